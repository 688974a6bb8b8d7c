// A real OAuth 2.1 authorization server for caddy-mcp's authorization
// tests: panva/oidc-provider (the certified OpenID provider for Node.js)
// with client credentials, resource indicators (RFC 8707: a token is for
// one resource, its "aud"), JWT access tokens (RFC 9068) or opaque ones,
// and introspection (RFC 7662).
//
//   node server.mjs '<config JSON>'
//
// The config: {"fd": 3 (or "port": 0), "keys": {"keys": [private JWKs]},
//   "clients": [{"client_id", "client_secret", "scope",
//     "grant_types": ["client_credentials"] (the default),
//     "token_endpoint_auth_method": "client_secret_basic" (the default;
//       or client_secret_post, or private_key_jwt with "jwks": {"keys": [public JWKs]})}],
//   "resources": {"<resource URL>": {"scope": "a b", "opaque": false, "ttl": 3600}},
//   "defaultResource": "<resource URL>",
//   "exchange": {"accept": "<resource URL>", "deny": {"<sub>": ["<resource URL>"]},
//     "unchanged": false}}
//
// With "exchange", it performs token exchange (RFC 8693) for the clients
// whose grant_types name it: a user's access token for the resource
// exchange.accept (and only that one) for a token for another resource,
// unless exchange.deny lists it for the user; with exchange.unchanged, it
// answers with the subject token itself.
//
// For the tests: POST /test/token {"sub", "client_id", "scope", "resource",
// "ttl"} mints a user's access token; GET /test/stats counts the requests
// to the token endpoint and the exchanges served (in all, by subject).
//
// The issuer is http://127.0.0.1:<port>. It prints one line, "ready
// <issuer>", once it listens, and stops on SIGTERM or when stdin closes.
// To rotate its keys, the tests start it again with other keys on the
// same listener.
import * as jose from 'jose'; // oidc-provider's own
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

// resourceServer is what a token for resource is, as the provider's
// resource indicators resolve it; undefined for an unknown resource.
const resourceServer = (resource) => {
  const rs = Object.hasOwn(cfg.resources, resource) ? cfg.resources[resource] : undefined;
  if (!rs) return undefined;
  return {
    scope: rs.scope,
    audience: resource,
    accessTokenTTL: rs.ttl ?? 3600,
    accessTokenFormat: rs.opaque ? 'opaque' : 'jwt',
    jwt: { sign: { alg: 'ES256' } },
  };
};

const provider = new Provider(issuer, {
  jwks: cfg.keys,
  clients: cfg.clients.map((c) => ({
    client_id: c.client_id,
    // A client that signs its assertions (private_key_jwt) needs none.
    ...(c.client_secret ? { client_secret: c.client_secret } : {}),
    ...(c.scope ? { scope: c.scope } : {}), // a client without: one that only introspects
    grant_types: c.grant_types ?? ['client_credentials'],
    redirect_uris: [],
    response_types: [],
    token_endpoint_auth_method: c.token_endpoint_auth_method ?? 'client_secret_basic',
    ...(c.jwks ? { jwks: c.jwks } : {}),
    id_token_signed_response_alg: 'ES256',
  })),
  scopes: [...scopes],
  // The claims a token was minted with beside the usual ones (an exchanged
  // token's "act"): none for the tokens the provider mints itself.
  extraTokenClaims: (_ctx, token) => token.extra,
  features: {
    devInteractions: { enabled: false },
    clientCredentials: { enabled: true },
    introspection: { enabled: true },
    resourceIndicators: {
      enabled: true,
      defaultResource: (_ctx, _client, oneOf) => oneOf ?? cfg.defaultResource,
      useGrantedResource: () => true,
      getResourceServerInfo: (_ctx, resource) => {
        const rs = resourceServer(resource);
        if (!rs) throw new errors.InvalidTarget();
        return rs;
      },
    },
  },
});
provider.on('server_error', (_ctx, err) => console.error('server_error', err));

const TOKEN_EXCHANGE = 'urn:ietf:params:oauth:grant-type:token-exchange';
const ACCESS_TOKEN = 'urn:ietf:params:oauth:token-type:access_token';

// stats counts the requests to the token endpoint, and the exchanges
// served (in all, and for each subject).
const stats = { tokenRequests: 0, exchanges: 0, bySubject: new Map() };

// mint saves and returns an access token for the user sub, as the
// provider writes one for resource: a JWT (RFC 9068) or an opaque one.
async function mint({
  sub, client, resource, scope, ttl, gty, extra,
}) {
  const token = new provider.AccessToken({
    accountId: sub,
    client,
    gty,
    scope: scope || undefined,
    resourceServer: new provider.ResourceServer(resource, resourceServer(resource)),
    ...(ttl ? { expiresIn: ttl } : {}),
    ...(extra ? { extra } : {}),
  });
  return { value: await token.save(), token };
}

// The keys the provider signs with, public.
const publicKeys = jose.createLocalJWKSet({
  keys: cfg.keys.keys.map(({
    d, p, q, dp, dq, qi, ...pub
  }) => pub),
});

// subjectOf is the claims of a JWT access token this issuer signed and
// that has not expired.
async function subjectOf(value) {
  try {
    const { payload } = await jose.jwtVerify(value, publicKeys, { issuer, typ: 'at+jwt', algorithms: ['ES256'] });
    return payload;
  } catch (err) {
    const detail = err instanceof jose.errors.JWTExpired ? 'subject_token is expired' : `subject_token is not this issuer's access token: ${err.message}`;
    throw new errors.InvalidGrant(detail);
  }
}

// exchangeTarget is the resource a token is asked for (resource, else
// audience) and the scope it may carry.
function exchangeTarget(params) {
  const target = params.resource ?? params.audience;
  const rs = target === undefined ? undefined : resourceServer(target);
  if (!rs) throw new errors.InvalidTarget();
  const allowed = new Set(rs.scope.split(' '));
  const scope = params.scope ?? rs.scope;
  const refused = scope.split(' ').filter((s) => s && !allowed.has(s));
  if (refused.length) throw new errors.InvalidScope('requested scope is not allowed', refused.join(' '));
  return { target, scope };
}

// tokenExchange is the token exchange grant (RFC 8693): for a user's
// access token for exchange.accept, a token for another resource, issued
// to the exchanging client and naming it as the actor (act).
async function tokenExchange(ctx) {
  const { params, client } = ctx.oidc;
  const missing = ['subject_token', 'subject_token_type'].filter((p) => params[p] === undefined);
  if (missing.length) {
    throw new errors.InvalidRequest(`missing required parameter${missing.length > 1 ? 's' : ''} ${missing.map((p) => `'${p}'`).join(' and ')}`);
  }
  if (params.subject_token_type !== ACCESS_TOKEN) throw new errors.InvalidRequest('unsupported subject_token_type');
  if (params.requested_token_type !== undefined && params.requested_token_type !== ACCESS_TOKEN) {
    throw new errors.InvalidRequest('unsupported requested_token_type');
  }
  const subject = await subjectOf(params.subject_token);
  if (![subject.aud].flat().includes(cfg.exchange.accept)) {
    throw new errors.InvalidGrant('subject_token is not for the audience this issuer exchanges from');
  }
  const { target, scope } = exchangeTarget(params);
  if (cfg.exchange.deny?.[subject.sub]?.includes(target)) {
    throw new errors.AccessDenied(`the user has not consented to ${target}`);
  }
  stats.exchanges += 1;
  stats.bySubject.set(subject.sub, (stats.bySubject.get(subject.sub) ?? 0) + 1);
  const answer = { issued_token_type: ACCESS_TOKEN, token_type: 'Bearer' };
  if (cfg.exchange.unchanged) {
    ctx.body = {
      access_token: params.subject_token, ...answer, expires_in: subject.exp - Math.floor(Date.now() / 1000), scope: subject.scope,
    };
    return;
  }
  const act = { sub: client.clientId, ...(subject.act ? { act: subject.act } : {}) };
  const { value, token } = await mint({
    sub: subject.sub, client, resource: target, scope, gty: TOKEN_EXCHANGE, extra: { act },
  });
  ctx.oidc.entity('AccessToken', token);
  ctx.body = {
    access_token: value, ...answer, expires_in: token.expiration, scope: token.scope,
  };
}

if (cfg.exchange) {
  provider.registerGrantType(TOKEN_EXCHANGE, tokenExchange, [
    'subject_token', 'subject_token_type', 'requested_token_type', 'resource', 'audience', 'scope',
  ]);
}

const answer = (res, status, body) => {
  res.writeHead(status, { 'content-type': 'application/json; charset=utf-8', 'cache-control': 'no-store' });
  res.end(JSON.stringify(body));
};

// testToken mints an access token for a user, as the provider would
// have once the user signed in: {sub, client_id, scope, resource, ttl}.
async function testToken(req, res) {
  let text = '';
  for await (const chunk of req) text += chunk;
  const {
    sub, client_id: clientId, scope, resource, ttl,
  } = JSON.parse(text);
  const client = typeof clientId === 'string' ? await provider.Client.find(clientId) : undefined;
  const rs = typeof resource === 'string' ? resourceServer(resource) : undefined;
  if (typeof sub !== 'string' || !sub || !client || !rs) {
    answer(res, 400, { error: 'invalid_request', error_description: 'sub, a client_id and a configured resource are required' });
    return;
  }
  const { value, token } = await mint({
    sub, client, resource, scope: scope ?? rs.scope, ttl, gty: 'authorization_code',
  });
  answer(res, 200, { access_token: value, expires_in: token.expiration });
}

// testRoute serves the tests' own routes, and says if it did.
function testRoute(req, res, pathname) {
  if (req.method === 'GET' && pathname === '/test/stats') {
    answer(res, 200, {
      token_requests: stats.tokenRequests,
      exchanges: stats.exchanges,
      by_subject: Object.fromEntries(stats.bySubject),
    });
    return true;
  }
  if (req.method === 'POST' && pathname === '/test/token') {
    testToken(req, res).catch((err) => answer(res, 500, { error: 'server_error', error_description: err.message }));
    return true;
  }
  return false;
}

const callback = provider.callback();
const tokenPath = provider.pathFor('token');
server.on('request', (req, res) => {
  const [pathname] = req.url.split('?');
  if (req.method === 'POST' && pathname === tokenPath) stats.tokenRequests += 1;
  if (!testRoute(req, res, pathname)) callback(req, res);
});

console.log(`ready ${issuer}`);
const stop = () => server.close(() => process.exit(0));
process.on('SIGTERM', stop);
process.stdin.on('end', stop);
process.stdin.resume();
