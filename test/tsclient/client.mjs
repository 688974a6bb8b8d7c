#!/usr/bin/env node
// client.mjs: the official MCP TypeScript SDK client (@modelcontextprotocol/sdk,
// pinned in package.json) driven by a JSON script, for caddy-mcp integration
// tests (see test/mcptest.RunTSClient). Install once with:
//
//     npm ci --prefix test/tsclient
//
// Usage:
//
//     node client.mjs '<script JSON>'        # or
//     echo '<script JSON>' | node client.mjs
//
// Script:
//
//     {
//       "url": "https://127.0.0.1:8443/mcp",   // required; Streamable HTTP endpoint
//       "insecure": true,       // optional: accept ANY server certificate
//                               // (sets NODE_TLS_REJECT_UNAUTHORIZED=0; Node prints a warning on stderr)
//       "caFile": "/path/ca.pem", // optional: trust this PEM CA bundle (in addition to the system roots).
//                               // Implemented by re-running this script with NODE_EXTRA_CA_CERTS=caFile,
//                               // since Node 20's built-in fetch has no public per-request CA option.
//       "headers": {"Authorization": "Bearer x"}, // optional extra HTTP headers on every request
//       "clientName": "tsclient", // optional clientInfo.name
//       "oauth": {              // optional: sign in with the OAuth client credentials grant
//         "clientId": "agent",
//         "clientSecret": "...",
//         "expectedIssuer": "http://127.0.0.1:9000", // the authorization server they are for
//         "scope": "a b"        // optional: the scope to ask for
//       },                      // The SDK's ClientCredentialsProvider (client_secret_basic) is the
//                               // transport's authProvider: on a 401 the SDK finds the authorization
//                               // server from the Protected Resource Metadata (RFC 9728), obtains a
//                               // token there and sends the request again.
//       "recordHttp": true,     // optional: list every HTTP exchange of the client (see "http")
//       "steps": [ ... ]
//     }
//
// Steps (run in order; a failing step does not stop the script):
//
//     {"op": "listTools"}
//     {"op": "callTool", "name": "echo", "arguments": {...}, "progress": true}
//     {"op": "request", "method": "tools/list", "params": {...}, "progress": true}
//         arbitrary request; the result is parsed with the SDK's ResultSchema
//         (a loose/passthrough object), so any JSON object result is accepted.
//     {"op": "notify", "method": "notifications/...", "params": {...}}
//         sends a notification (result is null).
//     {"op": "ping"}
//     {"op": "parallel", "steps": [ ... ]}
//         runs the sub-steps concurrently on the same session; result is
//         {"results": [<one entry per sub-step, same shape as below>]}.
//     {"op": "terminateSession"}
//         DELETE the session (transport.terminateSession()).
//     {"op": "readResource", "params": {"uri": "..."}}
//         resources/read (client.readResource); the result is the SDK's.
//     {"op": "readPages", "params": {"uri": "...", "max": 1000}}
//         reads a result the gateway keeps (results { page }) page by page:
//         resources/read of uri, then of each page's _meta["caddymcp.dev/next"]
//         until a page has none (or "max" pages were read). Result:
//             {"uri", "pages", "bytes", "sha256", "size", "next",
//              "list": [{"uri", "contentUri", "mimeType", "contents",
//                        "from", "size", "bytes"}, ...]}
//         bytes and sha256 (hex) are of the pages' texts joined, as UTF-8
//         (the text itself is left out: it may be megabytes); from and size
//         are the page's _meta "caddymcp.dev/from" and "caddymcp.dev/size",
//         bytes its text's length in UTF-8; next is the URI left to read
//         (null once the last page was read). When a read fails, the step
//         fails with its error and its "result" holds the pages read before.
//
//   Instead of "uri", the params of readResource and readPages may say
//   "follow": "link" (the resource_link of the last callTool's result) or
//   "follow": "next" (the URI its RESULT_TRUNCATED warning names in
//   <detail key="next">, where its preview ends).
//
//   Every step may have "timeoutMs" (request timeout; SDK default 60000).
//   "progress": true makes the SDK attach a progressToken (_meta.progressToken)
//   and collects the notifications/progress params ({progress,total,message}).
//
// Output: exactly ONE JSON object on stdout:
//
//     {
//       "results": [
//         {"ok": true,  "result": <value returned by the SDK>, "progress": [...]},
//         {"ok": false, "error": {"name", "type", "message", "code", "data", "cause"}, "progress": [...]}
//       ],
//       "session": {"sessionId", "protocolVersion", "serverVersion", "serverCapabilities"},
//       "notifications": [<other notifications received from the server>],
//       "transportErrors": [<errors reported by client.onerror>],
//       "connectError": <error, only when connecting failed>
//       "http": [{"method", "url", "authorization", "status"} or {..., "error"}, ...],
//                               // with recordHttp: each request as it was sent, in order;
//                               // authorization is the scheme of its Authorization header, if any
//       "auth": {"tokenType", "scope", "expiresIn", "issuer"} or null
//                               // with oauth: the token the SDK holds (never the token itself)
//     }
//
//   error.name is the JS error name (e.g. "McpError" for JSON-RPC errors, whose
//   code is the JSON-RPC code and message "MCP error <code>: <message>");
//   error.type is the constructor name (e.g. "StreamableHTTPError", whose code
//   is the HTTP status).
//
// Exit status: 0 when the script ran (even if steps failed); 2 on a bad
// script; 3 when connecting (initialize) failed (output still printed, with
// connectError); 1 on any other harness error.

import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ClientCredentialsProvider } from '@modelcontextprotocol/sdk/client/auth-extensions.js';
import { ResultSchema } from '@modelcontextprotocol/sdk/types.js';

// Keep stdout for the single JSON result.
console.log = (...args) => console.error(...args);
console.info = (...args) => console.error(...args);
console.debug = (...args) => console.error(...args);

function writeAndExit(obj, code) {
    process.stdout.write(JSON.stringify(obj) + '\n', () => process.exit(code));
}

function serializeError(err) {
    if (err === null || typeof err !== 'object') {
        return { name: 'Error', type: typeof err, message: String(err) };
    }
    const out = {
        name: err.name ?? 'Error',
        type: err.constructor?.name ?? 'Object',
        message: err.message ?? String(err),
    };
    if (err.code !== undefined) out.code = err.code;
    if (err.data !== undefined) out.data = err.data;
    if (err.cause !== undefined) {
        out.cause = err.cause instanceof Error || typeof err.cause === 'object' ? serializeError(err.cause) : err.cause;
    }
    return out;
}

function readScript() {
    let text = process.argv[2];
    if (text === undefined || text === '-') {
        text = readFileSync(0, 'utf8');
    }
    const script = JSON.parse(text);
    if (typeof script !== 'object' || script === null || Array.isArray(script)) {
        throw new Error('script must be a JSON object');
    }
    if (typeof script.url !== 'string' || script.url === '') {
        throw new Error('script.url must be a non-empty string');
    }
    if (script.steps !== undefined && script.steps !== null && !Array.isArray(script.steps)) {
        throw new Error('script.steps must be an array');
    }
    const oauth = script.oauth;
    if (oauth !== undefined && oauth !== null) {
        for (const field of ['clientId', 'clientSecret', 'expectedIssuer']) {
            if (typeof oauth[field] !== 'string' || oauth[field] === '') {
                throw new Error(`script.oauth.${field} must be a non-empty string`);
            }
        }
    }
    return script;
}

let script;
try {
    script = readScript();
} catch (err) {
    console.error(`tsclient: bad script: ${err.message}`);
    process.exit(2);
}

// Trusting a custom CA: Node reads NODE_EXTRA_CA_CERTS only at startup, so
// re-run ourselves with it set (script passed on stdin).
if (script.caFile && process.env.NODE_EXTRA_CA_CERTS !== script.caFile) {
    const child = spawnSync(process.execPath, [fileURLToPath(import.meta.url), '-'], {
        input: JSON.stringify(script),
        env: { ...process.env, NODE_EXTRA_CA_CERTS: script.caFile },
        stdio: ['pipe', 'inherit', 'inherit'],
    });
    if (child.error) {
        console.error(`tsclient: re-running with NODE_EXTRA_CA_CERTS: ${child.error.message}`);
        process.exit(1);
    }
    process.exit(child.status ?? 1);
}

if (script.insecure) {
    process.env.NODE_TLS_REJECT_UNAUTHORIZED = '0';
}

const notifications = [];
const transportErrors = [];

const client = new Client({ name: script.clientName ?? 'caddy-mcp-tsclient', version: '0.0.0' }, { capabilities: {} });
client.onerror = (err) => transportErrors.push(serializeError(err));
client.fallbackNotificationHandler = async (n) => {
    notifications.push(n);
};

const transportOpts = {};
if (script.headers) {
    transportOpts.requestInit = { headers: script.headers };
}

// Every HTTP exchange, in the order the requests were sent: the transport
// and the SDK's auth() (discovery, token request) all fetch through it.
const http = [];
if (script.recordHttp) {
    transportOpts.fetch = async (input, init) => {
        const request = input instanceof Request ? input : undefined;
        const exchange = { method: init?.method ?? request?.method ?? 'GET', url: String(request?.url ?? input) };
        const credentials = new Headers(init?.headers ?? request?.headers).get('authorization');
        if (credentials) exchange.authorization = credentials.split(' ')[0]; // the scheme, never the credentials
        http.push(exchange);
        try {
            const response = await fetch(input, init);
            exchange.status = response.status;
            return response;
        } catch (err) {
            exchange.error = err?.message ?? String(err);
            throw err;
        }
    };
}

let authProvider;
if (script.oauth) {
    authProvider = new ClientCredentialsProvider({
        clientId: script.oauth.clientId,
        clientSecret: script.oauth.clientSecret,
        expectedIssuer: script.oauth.expectedIssuer,
        ...(script.oauth.scope ? { scope: script.oauth.scope } : {}),
    });
    transportOpts.authProvider = authProvider;
}
const transport = new StreamableHTTPClientTransport(new URL(script.url), transportOpts);

// The session id the client held once connected, before any step.
let firstSessionId = null;

function sessionInfo() {
    return {
        sessionId: transport.sessionId ?? null,
        firstSessionId,
        protocolVersion: transport.protocolVersion ?? null,
        serverVersion: client.getServerVersion() ?? null,
        serverCapabilities: client.getServerCapabilities() ?? null,
    };
}

// What the client ran with beside the session: the exchanges, and the
// token it holds, described without the token itself.
function extras() {
    const out = {};
    if (script.recordHttp) out.http = http;
    if (authProvider) {
        const tokens = authProvider.tokens();
        out.auth = tokens
            ? {
                  tokenType: tokens.token_type ?? null,
                  scope: tokens.scope ?? null,
                  expiresIn: tokens.expires_in ?? null,
                  issuer: tokens.issuer ?? null,
              }
            : null;
    }
    return out;
}

// The result of the last callTool step, for "follow".
let lastCall = null;

// The URI a read step's params name: their uri, or one that the last
// callTool's result links to (params.follow).
function uriOf(params) {
    if (typeof params?.uri === 'string') return params.uri;
    const content = lastCall?.content ?? [];
    switch (params?.follow) {
        case 'link': {
            const link = content.find((c) => c.type === 'resource_link');
            if (link) return link.uri;
            throw new Error('follow link: the last callTool result has no resource_link');
        }
        case 'next': {
            for (const c of content) {
                const m = c.type === 'text' && /<detail key="next">([^<]+)<\/detail>/.exec(c.text);
                if (m) return m[1];
            }
            throw new Error('follow next: the last callTool result names no next page');
        }
        default:
            throw new Error('params.uri must be a string, or params.follow "link" or "next"');
    }
}

// readPages reads from a page to the last (see the header), hashing the
// text as it goes so that megabytes stay out of the output.
async function readPages(params, opts) {
    const hash = createHash('sha256');
    const max = params?.max ?? Infinity;
    const out = { uri: null, pages: 0, bytes: 0, sha256: null, size: null, next: null, list: [] };
    try {
        let uri = uriOf(params);
        out.uri = uri;
        while (uri && out.pages < max) {
            const res = await client.readResource({ uri }, opts);
            const c = res.contents?.[0] ?? {};
            const text = c.text ?? '';
            const meta = res._meta ?? {};
            const page = { uri, contentUri: c.uri ?? null, mimeType: c.mimeType ?? null, contents: res.contents?.length ?? 0 };
            page.from = meta['caddymcp.dev/from'] ?? null;
            page.size = meta['caddymcp.dev/size'] ?? null;
            page.bytes = Buffer.byteLength(text, 'utf8');
            out.list.push(page);
            hash.update(text, 'utf8');
            out.pages++;
            out.bytes += page.bytes;
            out.size = page.size;
            const next = meta['caddymcp.dev/next'];
            if (next === uri) throw new Error(`page ${uri} names itself as the next`);
            uri = typeof next === 'string' && next !== '' ? next : null;
            out.next = uri;
        }
    } catch (err) {
        out.sha256 = hash.digest('hex');
        err.stepResult = out;
        throw err;
    }
    out.sha256 = hash.digest('hex');
    return out;
}

async function runStep(step) {
    const progress = [];
    const opts = {};
    if (step.timeoutMs !== undefined) opts.timeout = step.timeoutMs;
    if (step.progress) {
        opts.onprogress = (p) => {
            progress.push(p);
            // A test may wait for the notification to have reached the client.
            if (step.progressUrl) fetch(step.progressUrl).then((res) => res.text(), () => {});
        };
    }
    try {
        let result;
        switch (step.op) {
            case 'listTools':
                result = await client.listTools(step.params, opts);
                break;
            case 'callTool':
                result = await client.callTool(
                    { name: step.name, arguments: step.arguments ?? {}, ...(step.meta ? { _meta: step.meta } : {}) },
                    undefined,
                    opts,
                );
                lastCall = result;
                break;
            case 'readResource': {
                const { follow, ...params } = step.params ?? {};
                result = await client.readResource({ ...params, uri: uriOf(step.params) }, opts);
                break;
            }
            case 'readPages':
                result = await readPages(step.params, opts);
                break;
            case 'request':
                result = await client.request(
                    { method: step.method, ...(step.params !== undefined ? { params: step.params } : {}) },
                    ResultSchema,
                    opts,
                );
                break;
            case 'notify':
                await client.notification({ method: step.method, ...(step.params !== undefined ? { params: step.params } : {}) });
                result = null;
                break;
            case 'ping':
                result = await client.ping(opts);
                break;
            case 'parallel': {
                if (!Array.isArray(step.steps)) throw new Error('parallel: steps must be an array');
                result = { results: await Promise.all(step.steps.map(runStep)) };
                break;
            }
            case 'pause': {
                // The test acts between two steps (kills or restarts a
                // server): it answers this GET once it is done.
                const res = await fetch(step.url);
                await res.text();
                result = null;
                break;
            }
            case 'terminateSession':
                await transport.terminateSession();
                result = null;
                break;
            default:
                throw new Error(`unknown op ${JSON.stringify(step.op)}`);
        }
        return { ok: true, result: result ?? null, progress };
    } catch (err) {
        const failed = { ok: false, error: serializeError(err), progress };
        if (err?.stepResult !== undefined) failed.result = err.stepResult;
        return failed;
    }
}

try {
    await client.connect(transport);
    firstSessionId = transport.sessionId ?? null;
} catch (err) {
    console.error(`tsclient: connect: ${err?.message ?? err}`);
    writeAndExit({ results: [], session: sessionInfo(), notifications, transportErrors, connectError: serializeError(err), ...extras() }, 3);
    await new Promise(() => {}); // wait for exit
}

const results = [];
for (const step of script.steps ?? []) {
    results.push(await runStep(step));
}
// The errors of the steps are those reported until now: closing aborts any
// stream still open (one the server has not ended yet), and the SDK reports
// that abort as an error of its own, which is no transport error of the
// script's.
const out = { results, session: sessionInfo(), notifications, transportErrors: [...transportErrors], ...extras() };
client.onerror = () => {};
try {
    await client.close();
} catch (err) {
    out.transportErrors.push(serializeError(err));
}
writeAndExit(out, 0);
