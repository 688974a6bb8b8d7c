package test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-jose/go-jose/v4"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/caddymcp/caddy-mcp/envelope"
	"github.com/caddymcp/caddy-mcp/test/mcptest"
)

// Each server behind the gateway gets a credential of its own
// (mcp_credential), from a real issuer (panva/oidc-provider performing
// token exchange, test/authserver) and the gateway's clients there; the
// servers are official Go SDK servers that say what each request brought
// (mcptest.TokenServer).

// The resources the issuer issues tokens for, besides the gateway's.
const (
	crmAudience     = "https://crm.test/mcp"
	ticketsResource = "https://tickets.test/mcp"
	reportsResource = "https://reports.test/mcp"
	billingResource = "https://billing.test/mcp"
)

// The secrets the gateway holds: set in the environment, named in the
// config as {env.*}.
const (
	searchKey     = "search-api-key-3f9a1c0d5e7b"
	clientCookie  = "session=the-clients-own-cookie"
	basicSecretV  = "CADDY_MCP_TEST_GW_BASIC_SECRET"
	postSecretV   = "CADDY_MCP_TEST_GW_POST_SECRET"
	reportSecretV = "CADDY_MCP_TEST_GW_REPORTS_SECRET"
	searchKeyV    = "CADDY_MCP_TEST_SEARCH_KEY"
)

var (
	// userApp is the application users sign in with: their tokens are
	// issued to it, for the gateway.
	userApp = mcptest.AuthClient{ID: "user-app", Secret: "user-app-secret-user-app-secret", Scope: "tools:call"}
	// The gateway's clients at the issuer: two that exchange tokens, one
	// that obtains its own (reports').
	gwBasic   = mcptest.AuthClient{ID: "gw-basic", Secret: "gw-basic-secret-gw-basic-secret", GrantTypes: []string{mcptest.TokenExchangeGrant}}
	gwPost    = mcptest.AuthClient{ID: "gw-post", Secret: "gw-post-secret-gw-post-secret-00", GrantTypes: []string{mcptest.TokenExchangeGrant}, AuthMethod: "client_secret_post"}
	gwReports = mcptest.AuthClient{ID: "gw-reports", Secret: "gw-reports-secret-gw-reports-sec", Scope: "reports:read", AuthMethod: "client_secret_post"}
)

// gwJWTID is the client that signs its assertions (private_key_jwt).
const gwJWTID = "gw-jwt"

// credRig is a gateway whose servers each get a credential from the
// issuer as.
type credRig struct {
	as  *mcptest.AuthServer
	gw  *mcptest.Gateway
	key string // the PEM file of gw-jwt's private key
	// endpoint is the MCP endpoint; resource the gateway's canonical URL,
	// the users' tokens' audience.
	endpoint, resource string
	names              []string
	servers            map[string]*mcptest.TokenServer
}

// credServer is a server behind the gateway: its name, and its
// mcp_credential directive, written once the issuer is known.
type credServer struct {
	name       string
	credential func(r *credRig) string
}

// The servers' credentials.
var (
	crmServer = credServer{"crm", func(r *credRig) string {
		return exchangeBlock(r.as.Issuer, "client "+gwBasic.ID+" {env."+basicSecretV+"}", "audience "+crmAudience, "scopes crm:read")
	}}
	ticketsServer = credServer{"tickets", func(r *credRig) string {
		return exchangeBlock(r.as.Issuer, "client "+gwJWTID, "key "+r.key+" gw-jwt-1", "resource "+ticketsResource, "scopes tickets:read")
	}}
	searchServer = credServer{"search", func(*credRig) string {
		return "mcp_credential header X-Api-Key {env." + searchKeyV + "}"
	}}
	reportsServer = credServer{"reports", func(r *credRig) string {
		return "mcp_credential client_credentials {\n\tissuer " + r.as.Issuer + "\n\tclient " + gwReports.ID + " {env." + reportSecretV +
			"}\n\tauth client_secret_post\n\tresource " + reportsResource + "\n\tscopes reports:read\n}"
	}}
)

// billingServer exchanges tokens at the token endpoint tokenEndpoint (a
// front of the issuer's that the test can take down).
func billingServer(tokenEndpoint string) credServer {
	return credServer{"billing", func(r *credRig) string {
		return exchangeBlock(r.as.Issuer, "token_endpoint "+tokenEndpoint, "client "+gwPost.ID+" {env."+postSecretV+"}",
			"auth client_secret_post", "resource "+billingResource)
	}}
}

func exchangeBlock(issuer string, lines ...string) string {
	return "mcp_credential token_exchange {\n\tissuer " + issuer + "\n\t" + strings.Join(lines, "\n\t") + "\n}"
}

// startCredRig starts the issuer, exchanging as exchange says (its Accept
// is set to the gateway's resource), a TokenServer for each server, and a
// gateway federating them with authorization (its admin API on if admin).
func startCredRig(t *testing.T, exchange mcptest.AuthExchange, admin bool, servers ...credServer) *credRig {
	t.Helper()
	r := &credRig{as: mcptest.NewAuthServer(t), servers: map[string]*mcptest.TokenServer{}}
	jwks := writeClientKey(t, r)
	for name, v := range map[string]string{basicSecretV: gwBasic.Secret, postSecretV: gwPost.Secret, reportSecretV: gwReports.Secret, searchKeyV: searchKey} {
		t.Setenv(name, v)
	}
	site := "mcp {\n\tauthorization {\n\t\tissuer " + r.as.Issuer + "\n\t}\n"
	for _, s := range servers {
		ts := mcptest.StartTokenServer(t)
		r.servers[s.name], r.names = ts, append(r.names, s.name)
		site += "\tserver " + s.name + " {\n" + s.credential(r) + "\n" + mcptest.ProxyTo(ts.URL) + "\n\t}\n"
	}
	r.gw = mcptest.StartGatewayWith(t, mcptest.GatewayConfig{Site: site + "}", Admin: admin})
	r.endpoint, r.resource = r.gw.URL+mcptest.MCPPath, r.gw.URL
	exchange.Accept = r.resource
	gwJWT := mcptest.AuthClient{ID: gwJWTID, GrantTypes: []string{mcptest.TokenExchangeGrant}, AuthMethod: "private_key_jwt", JWKS: jwks}
	r.as.Start(t, mcptest.AuthServerConfig{
		Clients: []mcptest.AuthClient{userApp, gwBasic, gwPost, gwReports, gwJWT},
		Resources: map[string]mcptest.AuthResource{
			r.resource:      {Scope: "tools:call tools:read"},
			crmAudience:     {Scope: "crm:read crm:write"},
			ticketsResource: {Scope: "tickets:read tickets:write"},
			reportsResource: {Scope: "reports:read"},
			billingResource: {Scope: "billing:read"},
		},
		Exchange: &exchange,
	}, "k1")
	return r
}

// writeClientKey writes gw-jwt's private key where the gateway reads it,
// and is its public key as the issuer knows it.
func writeClientKey(t *testing.T, r *credRig) *jose.JSONWebKeySet {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	der, err := x509.MarshalPKCS8PrivateKey(key)
	require.NoError(t, err)
	r.key = filepath.Join(t.TempDir(), "gw-jwt.pem")
	require.NoError(t, os.WriteFile(r.key, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600))
	return &jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &key.PublicKey, KeyID: "gw-jwt-1", Algorithm: string(jose.ES256), Use: "sig"}}}
}

// tool is the name server's whoami is advertised by: the first server's
// keeps its name, the others' are prefixed with theirs.
func (r *credRig) tool(server string) string {
	if server == r.names[0] {
		return "whoami"
	}
	return server + "__whoami"
}

// userToken is a token of the user sub for the gateway.
func (r *credRig) userToken(t *testing.T, sub string) string {
	t.Helper()
	return r.as.UserToken(t, sub, userApp.ID, "", r.resource)
}

// asUser sends every request with the user's token, and a cookie of the
// client's own.
type asUser struct{ token string }

func (u asUser) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	req.Header.Set("Authorization", "Bearer "+u.token)
	req.Header.Set("Cookie", clientCookie)
	return http.DefaultTransport.RoundTrip(req)
}

// connectWith opens a session of the Go SDK's client with the user's
// token; it is closed when the test ends.
func connectWith(t *testing.T, endpoint, token string) (*mcp.ClientSession, error) {
	t.Helper()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "credential-test", Version: "0"}, nil).Connect(t.Context(),
		&mcp.StreamableClientTransport{Endpoint: endpoint, HTTPClient: &http.Client{Transport: asUser{token}}, DisableStandaloneSSE: true}, nil)
	if err == nil {
		t.Cleanup(func() { _ = cs.Close() })
	}
	return cs, err
}

func connectAs(t *testing.T, endpoint, token string) *mcp.ClientSession {
	t.Helper()
	cs, err := connectWith(t, endpoint, token)
	require.NoError(t, err)
	return cs
}

// whoamiOf calls tool, a whoami, and reads what its server saw.
func whoamiOf(t *testing.T, cs *mcp.ClientSession, tool string) mcptest.Identity {
	t.Helper()
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: tool, Arguments: map[string]any{}})
	require.NoError(t, err, tool)
	require.False(t, res.IsError, "%s: %s", tool, mcptest.TextOf(t, res))
	return identityOf(t, mcptest.TextOf(t, res))
}

func identityOf(t *testing.T, text string) mcptest.Identity {
	t.Helper()
	var id mcptest.Identity
	require.NoError(t, json.Unmarshal([]byte(text), &id), "%s", text)
	return id
}

// refusedWith calls tool, whose server could not be connected for the
// session for want of its credential: the call, the first included,
// carries the refusal, code, which names server; another server's call
// goes between, and is answered.
func refusedWith(t *testing.T, cs *mcp.ClientSession, tool, server string, code envelope.Code, between func()) envelope.Parsed {
	t.Helper()
	p := callEnvelope(t, cs, tool, map[string]any{})
	require.Equal(t, code, p.Code, "%s", p.Raw)
	between()
	p = callEnvelope(t, cs, tool, map[string]any{})
	require.Equal(t, code, p.Code, "%s", p.Raw)
	assert.Equal(t, server, detailOf(p.Envelope, "server"), "%s", p.Raw)
	return p
}

func detailOf(e envelope.Envelope, key string) string {
	for _, d := range e.Details {
		if d.Key == key {
			return d.Value
		}
	}
	return ""
}

// tokenFront is an issuer's token endpoint reached through a proxy the
// test can take down: the issuer out of reach for the servers that ask
// it there, and for them alone.
func tokenFront(t *testing.T, issuer string) (endpoint string, down func()) {
	t.Helper()
	target, err := url.Parse(issuer)
	require.NoError(t, err)
	srv := httptest.NewServer(httputil.NewSingleHostReverseProxy(target))
	down = func() {
		srv.CloseClientConnections()
		srv.Close()
	}
	t.Cleanup(down)
	return srv.URL + "/token", down
}

// bearerClaims reads the claims of the bearer token of an Authorization
// header, unverified.
func bearerClaims(t *testing.T, authorization string) jwtClaims {
	t.Helper()
	token, ok := strings.CutPrefix(authorization, "Bearer ")
	require.True(t, ok, "a bearer token: %q", authorization)
	return claimsOf(t, token)
}

// assertNeverSawTheClients checks that no request srv got carried the
// client's cookie, one of the client's tokens, or one of the client's
// session ids, and that every session id it got was its own.
func assertNeverSawTheClients(t *testing.T, name string, srv *mcptest.TokenServer, tokens, sessions []string) {
	t.Helper()
	reqs := srv.Requests()
	require.NotEmpty(t, reqs, name)
	for _, c := range reqs {
		assert.Empty(t, c.Cookie, "%s: %s", name, c.Method)
		for _, tok := range tokens {
			assert.NotContains(t, c.Authorization, tok, "%s got a caller's token", name)
		}
		assert.NotContains(t, sessions, c.SessionID, "%s got the gateway's session id", name)
		assert.True(t, c.SessionID == "" || c.Issued, "%s: a session id it did not issue: %q", name, c.SessionID)
	}
}
