// A real OAuth 2.1 authorization server for caddy-mcp's authorization
// tests: panva/oidc-provider (the certified OpenID provider for Node.js)
// with client credentials, resource indicators (RFC 8707: a token is for
// one resource, its "aud"), JWT access tokens (RFC 9068) or opaque ones,
// and introspection (RFC 7662).
//
//   node server.mjs '<config JSON>'
//
// The config: {"fd": 3 (or "port": 0), "keys": {"keys": [private JWKs]},
//   "clients": [{"client_id", "client_secret", "scope"}],
//   "resources": {"<resource URL>": {"scope": "a b", "opaque": false, "ttl": 3600}},
//   "defaultResource": "<resource URL>"}
//
// The issuer is http://127.0.0.1:<port>. It prints one line, "ready
// <issuer>", once it listens, and stops on SIGTERM or when stdin closes.
// To rotate its keys, the tests start it again with other keys on the
// same listener.
import Provider, { errors } from 'oidc-provider';

const cfg = JSON.parse(process.argv[2]);
const { createServer } = await import('node:http');
const server = createServer();
// The listener is the test process's, handed over as a file descriptor
// (cfg.fd), so that no other socket takes its port before the server, or
// between two of them; cfg.port otherwise.
const listenOn = cfg.fd !== undefined ? { fd: cfg.fd } : { port: cfg.port || 0, host: '127.0.0.1' };
await new Promise((resolve) => server.listen(listenOn, resolve));
const issuer = `http://127.0.0.1:${server.address().port}`;

const scopes = new Set();
for (const rs of Object.values(cfg.resources)) rs.scope.split(' ').forEach((s) => scopes.add(s));

const provider = new Provider(issuer, {
  jwks: cfg.keys,
  clients: cfg.clients.map((c) => ({
    client_id: c.client_id,
    client_secret: c.client_secret,
    ...(c.scope ? { scope: c.scope } : {}), // a client without: one that only introspects
    grant_types: ['client_credentials'],
    redirect_uris: [],
    response_types: [],
    token_endpoint_auth_method: 'client_secret_basic',
    id_token_signed_response_alg: 'ES256',
  })),
  scopes: [...scopes],
  features: {
    devInteractions: { enabled: false },
    clientCredentials: { enabled: true },
    introspection: { enabled: true },
    resourceIndicators: {
      enabled: true,
      defaultResource: (_ctx, _client, oneOf) => oneOf ?? cfg.defaultResource,
      useGrantedResource: () => true,
      getResourceServerInfo: (_ctx, resource) => {
        const rs = cfg.resources[resource];
        if (!rs) throw new errors.InvalidTarget();
        return {
          scope: rs.scope,
          audience: resource,
          accessTokenTTL: rs.ttl ?? 3600,
          accessTokenFormat: rs.opaque ? 'opaque' : 'jwt',
          jwt: { sign: { alg: 'ES256' } },
        };
      },
    },
  },
});
provider.on('server_error', (_ctx, err) => console.error('server_error', err));
server.on('request', provider.callback());

console.log(`ready ${issuer}`);
const stop = () => server.close(() => process.exit(0));
process.on('SIGTERM', stop);
process.stdin.on('end', stop);
process.stdin.resume();
