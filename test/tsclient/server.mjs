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
//
// It is stateless, as the SDK's simpleStatelessStreamableHttp example: a new
// McpServer and transport for every POST to /mcp, no session id. Once it
// listens, it prints one line, its endpoint "http://127.0.0.1:PORT/mcp", and
// it stops on SIGTERM or when its stdin closes.
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
import { createServer } from 'node:http';
import * as z from 'zod/v4';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';

// Keep stdout for the one line saying where it listens.
console.log = (...args) => console.error(...args);
console.info = (...args) => console.error(...args);

const options = JSON.parse(process.argv[2] ?? '{}');

const text = (n) => ({ type: 'text', text: 'x'.repeat(n) });
const size = { n: z.number().int().min(0) };

function newServer() {
    const server = new McpServer({ name: 'caddy-mcp-tsserver', version: '0.0.0' });
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

// One server and transport per request, closed with its response.
async function serveMCP(req, res) {
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

function refuse(res, status, message) {
    res.writeHead(status, { 'Content-Type': 'application/json' });
    res.end(JSON.stringify({ jsonrpc: '2.0', error: { code: -32000, message }, id: null }));
}

const http = createServer((req, res) => {
    if (new URL(req.url, 'http://localhost').pathname !== '/mcp') return refuse(res, 404, 'Not found.');
    if (req.method !== 'POST') return refuse(res, 405, 'Method not allowed.');
    serveMCP(req, res).catch((err) => {
        console.error('tsserver:', err);
        if (!res.headersSent) refuse(res, 500, 'Internal server error');
    });
});
await new Promise((resolve) => http.listen(options.port ?? 0, '127.0.0.1', resolve));
process.stdout.write(`http://127.0.0.1:${http.address().port}/mcp\n`);

const stop = () => {
    http.close();
    http.closeAllConnections();
    process.exit(0);
};
process.on('SIGTERM', stop);
process.stdin.on('end', stop);
process.stdin.resume();
