#!/usr/bin/env node
// server.mjs: an MCP server written with the official TypeScript SDK
// (@modelcontextprotocol/sdk, pinned in package.json, the same package as
// client.mjs), for caddy-mcp's tests of what the gateway does to a TypeScript
// server's answers (see test/mcptest.StartTSServer).
//
//     node server.mjs '{"port": 0, "json": true}'
//
// port: the loopback port to listen on (0 or absent: any free one).
// json: answer each POST with one JSON body (enableJsonResponse); otherwise
// with an event stream.
// stateful: keep sessions, as the SDK's simpleStreamableHttp example: one
// McpServer and transport per session (Mcp-Session-Id from randomUUID), GET
// and DELETE served for a known session, 404 "Session not found" for an
// unknown one. Sessions live in the process: started again on its port, the
// server answers 404 to the sessions of the process before.
// events: give each event of a session's streams an id from an in-memory
// event store (the SDK's examples' InMemoryEventStore), so that a broken
// stream can be resumed with GET and Last-Event-ID (needs stateful).
//
// Without stateful it is stateless, as the SDK's simpleStatelessStreamableHttp
// example: a new McpServer and transport for every POST to /mcp, no session
// id. Once it listens, it prints one line, its endpoint
// "http://127.0.0.1:PORT/mcp", and it stops on SIGTERM or when its stdin
// closes.
//
// Tools that answer at once:
//
//     echo {text}        the text
//
// Tools that never answer, so that a test can kill the server in the middle
// of a call (see test/mcptest.StartKillable):
//
//     work {}            when asked with a progressToken, one
//                        notifications/progress (1 of 2); then it prints the
//                        line "called" on stdout, and waits until the call is
//                        cancelled
//
// Tools, each answering bytes of "x" so that a test can size a result:
//
//     big {n}            a text of n bytes; when asked with a progressToken, one
//                        notifications/progress (1 of 2) before it
//     failing {n}        the same text, with isError: true
//     picture {n}        one image/png whose data is n raw bytes (base64)
//     table {n}          outputSchema {rows: [{row}]}: structuredContent with n
//                        rows, and the text "a table"
//     blocks {n, count}  count texts of n bytes each
//     paged {query, limit, cursor}  paging arguments; a text of 5000 bytes
import { randomUUID } from 'node:crypto';
import { createServer } from 'node:http';
import * as z from 'zod/v4';
import { InMemoryEventStore } from '@modelcontextprotocol/sdk/examples/shared/inMemoryEventStore.js';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { isInitializeRequest } from '@modelcontextprotocol/sdk/types.js';

// Keep stdout for the line saying where it listens, and those saying
// "called".
console.log = (...args) => console.error(...args);
console.info = (...args) => console.error(...args);

const options = JSON.parse(process.argv[2] ?? '{}');
if (options.events && !options.stateful) {
    console.error('tsserver: events needs stateful: only a session\'s streams can be resumed');
    process.exit(2);
}

const text = (n) => ({ type: 'text', text: 'x'.repeat(n) });
const size = { n: z.number().int().min(0) };

function newServer() {
    const server = new McpServer({ name: 'caddy-mcp-tsserver', version: '0.0.0' });
    server.registerTool('echo', { description: 'The text', inputSchema: { text: z.string() } }, async ({ text }) => ({
        content: [{ type: 'text', text }],
    }));
    server.registerTool('work', { description: 'Never answers' }, async (extra) => {
        const progressToken = extra._meta?.progressToken;
        if (progressToken !== undefined) {
            await extra.sendNotification({ method: 'notifications/progress', params: { progressToken, progress: 1, total: 2 } });
        }
        process.stdout.write('called\n');
        await new Promise((resolve) => extra.signal.addEventListener('abort', resolve, { once: true }));
        throw new Error('cancelled');
    });
    server.registerTool('big', { description: 'A text of n bytes', inputSchema: size }, async ({ n }, extra) => {
        const progressToken = extra._meta?.progressToken;
        if (progressToken !== undefined) {
            await extra.sendNotification({ method: 'notifications/progress', params: { progressToken, progress: 1, total: 2 } });
        }
        return { content: [text(n)] };
    });
    server.registerTool('failing', { description: 'A failure of n bytes', inputSchema: size }, async ({ n }) => ({
        content: [text(n)],
        isError: true,
    }));
    server.registerTool('picture', { description: 'An image of n bytes', inputSchema: size }, async ({ n }) => ({
        content: [{ type: 'image', data: Buffer.alloc(n).toString('base64'), mimeType: 'image/png' }],
    }));
    server.registerTool(
        'table',
        {
            description: 'A table of n rows',
            inputSchema: size,
            outputSchema: { rows: z.array(z.object({ row: z.number() })) },
        },
        async ({ n }) => ({
            content: [{ type: 'text', text: 'a table' }],
            structuredContent: { rows: Array.from({ length: n }, (_, row) => ({ row })) },
        }),
    );
    server.registerTool(
        'blocks',
        { description: 'count texts of n bytes', inputSchema: { ...size, count: z.number().int().min(0) } },
        async ({ n, count }) => ({ content: Array.from({ length: count }, () => text(n)) }),
    );
    server.registerTool(
        'paged',
        {
            description: 'Search, a page at a time',
            inputSchema: { query: z.string(), limit: z.number().int().min(1).optional(), cursor: z.string().optional() },
        },
        async () => ({ content: [text(5000)] }),
    );
    return server;
}

// One server and transport per POST, closed with its response.
async function serveStateless(req, res) {
    if (req.method !== 'POST') return refuse(res, 405, 'Method not allowed.');
    const server = newServer();
    const transport = new StreamableHTTPServerTransport({
        sessionIdGenerator: undefined,
        enableJsonResponse: Boolean(options.json),
    });
    res.on('close', () => {
        transport.close();
        server.close();
    });
    await server.connect(transport);
    await transport.handleRequest(req, res);
}

// The transports of the sessions, by session id.
const sessions = new Map();

// A request of a known session goes to its transport; a POST of initialize
// without a session id opens a session, as the SDK's simpleStreamableHttp
// example does.
async function serveSession(req, res) {
    const sessionId = req.headers['mcp-session-id'];
    if (sessionId !== undefined) {
        const transport = sessions.get(sessionId);
        if (transport === undefined) return refuse(res, 404, 'Session not found', -32001);
        return transport.handleRequest(req, res);
    }
    if (req.method !== 'POST') return refuse(res, 400, 'Bad Request: No valid session ID provided');
    let body;
    try {
        body = JSON.parse(await readBody(req));
    } catch {
        return refuse(res, 400, 'Parse error', -32700);
    }
    if (!isInitializeRequest(body)) return refuse(res, 400, 'Bad Request: No valid session ID provided');
    const transport = new StreamableHTTPServerTransport({
        sessionIdGenerator: randomUUID,
        enableJsonResponse: Boolean(options.json),
        eventStore: options.events ? new InMemoryEventStore() : undefined,
        onsessioninitialized: (id) => sessions.set(id, transport),
    });
    transport.onclose = () => sessions.delete(transport.sessionId);
    await newServer().connect(transport);
    await transport.handleRequest(req, res, body);
}

async function readBody(req) {
    const chunks = [];
    for await (const chunk of req) chunks.push(chunk);
    return Buffer.concat(chunks).toString('utf8');
}

function refuse(res, status, message, code = -32000) {
    res.writeHead(status, { 'Content-Type': 'application/json' });
    res.end(JSON.stringify({ jsonrpc: '2.0', error: { code, message }, id: null }));
}

const http = createServer((req, res) => {
    if (new URL(req.url, 'http://localhost').pathname !== '/mcp') return refuse(res, 404, 'Not found.');
    const serve = options.stateful ? serveSession : serveStateless;
    serve(req, res).catch((err) => {
        console.error('tsserver:', err);
        if (!res.headersSent) refuse(res, 500, 'Internal server error');
    });
});
// Node's listeners set SO_REUSEADDR: a server started again binds the port of
// a killed one while its connections are in TIME_WAIT. A port taken otherwise
// (EADDRINUSE) ends the process with the error on stderr.
await new Promise((resolve, reject) => {
    http.once('error', reject);
    http.listen(options.port ?? 0, '127.0.0.1', resolve);
});
process.stdout.write(`http://127.0.0.1:${http.address().port}/mcp\n`);

const stop = () => {
    http.close();
    http.closeAllConnections();
    process.exit(0);
};
process.on('SIGTERM', stop);
process.stdin.on('end', stop);
process.stdin.resume();
