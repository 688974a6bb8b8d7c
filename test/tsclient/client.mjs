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
        return { ok: false, error: serializeError(err), progress };
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
