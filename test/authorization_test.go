package test

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth/extauth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/caddymcp/caddy-mcp/envelope"
	"github.com/caddymcp/caddy-mcp/examples/demo/demoserver"
	"github.com/caddymcp/caddy-mcp/test/mcptest"
)

// The gateway as the MCP server's OAuth 2.1 resource server, in front of a
// server that has no authorization of its own, against a real
// authorization server (panva/oidc-provider, test/authserver).

var (
	agent = mcptest.AuthClient{ID: "agent", Secret: "agent-secret-agent-secret", Scope: "tools:read tools:call"}
	other = mcptest.AuthClient{ID: "other-agent", Secret: "other-secret-other-secret", Scope: "tools:read tools:call"}
	// gateway is the gateway's own client, which introspects opaque
	// tokens.
	gateway = mcptest.AuthClient{ID: "mcp-gateway", Secret: "gateway-secret-gateway-secret"}
)

// authorized is a gateway requiring tokens from its authorization server,
// in front of the demo server, whose requests it records.
type authorized struct {
	gw *mcptest.Gateway
	as *mcptest.AuthServer
	// endpoint is the MCP endpoint; resource the canonical URL tokens
	// are issued for: without resource configured, the site's address.
	endpoint, resource string
	mu                 sync.Mutex
	seen               []string // the Authorization header of each request upstream
}

func (a *authorized) upstreamSaw() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.seen...)
}

// startAuthorized starts the authorization server, and a gateway whose
// authorization block holds extra beside the issuer, with rest after the
// authorization block in its mcp block.
func startAuthorized(t *testing.T, extra, rest string) *authorized {
	t.Helper()
	return startAuthorizedFor(t, extra, rest, mcptest.AuthResource{})
}

// startAuthorizedFor is startAuthorized with tokens for the gateway (and
// for another resource) written as rs says: their lifetime, and opaque
// ones, which the gateway then introspects.
func startAuthorizedFor(t *testing.T, extra, rest string, rs mcptest.AuthResource) *authorized {
	t.Helper()
	a := &authorized{as: mcptest.NewAuthServer(t)}
	demo := demoserver.Handler()
	upstream := mcptest.ServeMCP(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a.mu.Lock()
		a.seen = append(a.seen, r.Header.Get("Authorization"))
		a.mu.Unlock()
		demo.ServeHTTP(w, r)
	}))
	issuer := a.as.Issuer
	if rs.Opaque {
		issuer += fmt.Sprintf(" {\n\t\t\tintrospect %s {env.CADDY_MCP_TEST_INTROSPECTION_SECRET}\n\t\t}", gateway.ID)
		t.Setenv("CADDY_MCP_TEST_INTROSPECTION_SECRET", gateway.Secret)
	}
	a.gw = mcptest.StartGateway(t, fmt.Sprintf("mcp {\n\tauthorization {\n\t\tissuer %s\n%s\n\t}\n%s\n}\n%s", issuer, extra, rest, mcptest.ProxyTo(upstream)))
	a.endpoint, a.resource = a.gw.URL+mcptest.MCPPath, a.gw.URL
	rs.Scope = "tools:read tools:call"
	another := mcptest.AuthResource{Scope: rs.Scope, Opaque: rs.Opaque}
	a.as.Start(t, mcptest.AuthServerConfig{
		Clients: []mcptest.AuthClient{agent, other, gateway},
		Resources: map[string]mcptest.AuthResource{
			a.resource:                   rs,
			"https://elsewhere.test/mcp": another,
			// The gateway's address with another port, and other paths.
			"http://127.0.0.1:1/mcp": another, a.endpoint: another, a.gw.URL + "/other": another,
		},
		DefaultResource: a.resource,
	}, "k1")
	return a
}

const initialize = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}`

func bearerOf(token string) sendOption { return withHeader("Authorization", "Bearer "+token) }

// challengeOf is the parameters of a Bearer challenge.
func challengeOf(t *testing.T, resp *http.Response) map[string]string {
	t.Helper()
	cs, err := oauthex.ParseWWWAuthenticate(resp.Header.Values("Www-Authenticate"))
	require.NoError(t, err)
	require.Len(t, cs, 1)
	assert.Equal(t, "bearer", strings.ToLower(cs[0].Scheme))
	return cs[0].Params
}

func envelopeOf(t *testing.T, body []byte) envelope.Parsed {
	t.Helper()
	var rpc struct {
		ID    json.RawMessage `json:"id"`
		Error struct {
			Data struct {
				Envelope string `json:"envelope"`
			} `json:"data"`
		} `json:"error"`
	}
	require.NoError(t, json.Unmarshal(body, &rpc), "%s", body)
	assert.Empty(t, rpc.ID, "refused before its body was read: no id is known")
	env, err := envelope.Parse(rpc.Error.Data.Envelope)
	require.NoError(t, err, "%s", body)
	return env
}

func TestARequestWithoutATokenIsChallengedAndTheMetadataLeadsToTheIssuer(t *testing.T) {
	a := startAuthorized(t, "", "")
	resp, body := post(t, a.endpoint, initialize)
	assert.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	ch := challengeOf(t, resp)
	metadata := a.gw.URL + "/.well-known/oauth-protected-resource"
	assert.Equal(t, map[string]string{"resource_metadata": metadata}, ch, "no error: the request carried no token")
	assert.Equal(t, envelope.AuthRequired, envelopeOf(t, body).Code)
	assert.Empty(t, a.upstreamSaw(), "nothing reaches the server")

	// The metadata answers without a token, and names the issuer.
	for _, path := range []string{"/.well-known/oauth-protected-resource/mcp", "/.well-known/oauth-protected-resource"} {
		meta, err := oauthex.GetProtectedResourceMetadata(t.Context(), a.gw.URL+path, a.resource, http.DefaultClient)
		require.NoError(t, err, path)
		assert.Equal(t, []string{a.as.Issuer}, meta.AuthorizationServers)
		assert.Equal(t, []string{"header"}, meta.BearerMethodsSupported)
	}
	resp, _ = post(t, a.gw.URL+"/.well-known/oauth-protected-resource/mcp", "", withMethod(http.MethodGet))
	assert.Equal(t, "public, max-age=3600", resp.Header.Get("Cache-Control"))

	// A GET (the server's stream), a DELETE, and any other method are held
	// to it too; only a browser's CORS preflight, which carries no
	// credentials, goes on without.
	for _, method := range []string{http.MethodGet, http.MethodDelete, http.MethodOptions, http.MethodPut} {
		resp, _ := post(t, a.endpoint, "", withMethod(method))
		assert.Equal(t, http.StatusUnauthorized, resp.StatusCode, method)
	}
	assert.Empty(t, a.upstreamSaw())
	resp, _ = post(t, a.endpoint, initialize, withMethod(http.MethodOptions), withHeader("Access-Control-Request-Method", "POST"))
	assert.Equal(t, http.StatusUnauthorized, resp.StatusCode, "no Origin: no preflight")
	resp, _ = post(t, a.endpoint, initialize, withMethod(http.MethodOptions), withHeader("Access-Control-Request-Method", "POST", "Origin", "http://localhost:6274", "Authorization", "Bearer not-checked"))
	assert.NotEqual(t, http.StatusUnauthorized, resp.StatusCode)
	assert.Equal(t, []string{""}, a.upstreamSaw(), "the preflight reached the server, without a token (nor a body)")
}

func TestTheGoSDKClientSignsInWithClientCredentialsAndCallsTools(t *testing.T) {
	a := startAuthorized(t, "", "")
	cs := signIn(t, a.endpoint, agent)
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "signed in"}})
	require.NoError(t, err)
	assert.Equal(t, "signed in", mcptest.TextOf(t, res))
	seen := a.upstreamSaw()
	require.NotEmpty(t, seen)
	assert.True(t, strings.HasPrefix(seen[0], "Bearer "), "the token goes on to the server it is for, unless strip_token")
}

func TestStripTokenKeepsTheTokenFromTheServer(t *testing.T) {
	a := startAuthorized(t, "\t\tstrip_token", "")
	resp, _ := post(t, a.endpoint, initialize, bearerOf(a.as.Token(t, agent, "", "")))
	require.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, []string{""}, a.upstreamSaw())
}

// TestTokensTheServerMustNotAcceptAreRefused sends tokens a resource
// server must refuse, each obtained from a real authorization server or
// made from one of its tokens.
func TestTokensTheServerMustNotAcceptAreRefused(t *testing.T) {
	a := startAuthorized(t, "", "")
	good := a.as.Token(t, agent, "", "")
	parts := strings.Split(good, ".")
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	require.NoError(t, err)
	forged := strings.Replace(string(payload), `"sub":"agent"`, `"sub":"admin"`, 1)
	require.NotEqual(t, string(payload), forged)

	stranger := mcptest.NewAuthServer(t)
	stranger.Start(t, mcptest.AuthServerConfig{Clients: []mcptest.AuthClient{agent}, Resources: map[string]mcptest.AuthResource{a.endpoint: {Scope: agent.Scope}}, DefaultResource: a.endpoint}, "k1")

	cases := []struct {
		name, token, reason string
	}{
		{"for another resource", a.as.Token(t, agent, "https://elsewhere.test/mcp", ""), "wrong_audience"},
		{"from an issuer not trusted", stranger.Token(t, agent, "", ""), "wrong_issuer"},
		{"tampered", parts[0] + "." + base64.RawURLEncoding.EncodeToString([]byte(forged)) + "." + parts[2], "bad_signature"},
		{"alg none", base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"none","typ":"at+jwt"}`)) + "." + parts[1] + ".", "malformed"},
		{"unknown kid", base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"ES256","typ":"at+jwt","kid":"k9"}`)) + "." + parts[1] + "." + parts[2], "unknown_key"},
		{"not a JWT", "opaque-looking-token", "malformed"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			resp, body := post(t, a.endpoint, initialize, bearerOf(c.token))
			assert.Equal(t, http.StatusUnauthorized, resp.StatusCode)
			ch := challengeOf(t, resp)
			assert.Equal(t, "invalid_token", ch["error"])
			env := envelopeOf(t, body)
			assert.Equal(t, envelope.Unauthorized, env.Code)
			assert.Equal(t, []envelope.Detail{{Key: "reason", Value: c.reason}}, env.Details)
			assert.NotContains(t, string(body), c.token[:min(len(c.token), 20)], "a token is never echoed")
		})
	}
	assert.Empty(t, a.upstreamSaw())

	resp, _ := post(t, a.endpoint, initialize, bearerOf(good))
	assert.Equal(t, http.StatusOK, resp.StatusCode, "the token they were made from passes")
}

func TestAnExpiredTokenIsRefused(t *testing.T) {
	a := startAuthorizedFor(t, "\t\tleeway 1s", "", mcptest.AuthResource{TTL: 1})
	token := a.as.Token(t, agent, "", "")
	resp, _ := post(t, a.endpoint, initialize, bearerOf(token))
	require.Equal(t, http.StatusOK, resp.StatusCode, "valid while its second lasts")
	// Its exp passes: wait for the gateway to say so (the event, not a
	// time).
	require.Eventually(t, func() bool {
		resp, body := post(t, a.endpoint, initialize, bearerOf(token))
		return resp.StatusCode == http.StatusUnauthorized && strings.Contains(string(body), `reason\">expired`)
	}, 15*time.Second, 100*time.Millisecond)
}

func TestKeysRotatedAtTheIssuerArePickedUpWithoutARestart(t *testing.T) {
	a := startAuthorized(t, "", "")
	resp, _ := post(t, a.endpoint, initialize, bearerOf(a.as.Token(t, agent, "", "")))
	require.Equal(t, http.StatusOK, resp.StatusCode)
	old := a.as.Token(t, agent, "", "")

	a.as.Rotate(t, "k2")
	fresh := a.as.Token(t, agent, "", "")
	require.Eventually(t, func() bool {
		resp, _ := post(t, a.endpoint, initialize, bearerOf(fresh))
		return resp.StatusCode == http.StatusOK
	}, 15*time.Second, 100*time.Millisecond, "the new key is fetched once RefetchAfter has passed since the last fetch")
	resp, _ = post(t, a.endpoint, initialize, bearerOf(old))
	assert.Equal(t, http.StatusUnauthorized, resp.StatusCode, "the old key is gone from the issuer's set")
}

func TestARequiredScopeIsAskedForBeforeAnythingRuns(t *testing.T) {
	a := startAuthorized(t, "\t\tscopes tools:call", "")
	resp, body := post(t, a.endpoint, initialize, bearerOf(a.as.Token(t, agent, "", "tools:read")))
	assert.Equal(t, http.StatusForbidden, resp.StatusCode)
	ch := challengeOf(t, resp)
	assert.Equal(t, "insufficient_scope", ch["error"])
	assert.Equal(t, "tools:call", ch["scope"], "the scope to ask for (step-up)")
	assert.Equal(t, envelope.Forbidden, envelopeOf(t, body).Code)

	resp, _ = post(t, a.endpoint, initialize, bearerOf(a.as.Token(t, agent, "", "tools:call")))
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Len(t, a.upstreamSaw(), 1)
}

func TestARateLimitKeyedBySubjectCountsEachPrincipalApart(t *testing.T) {
	a := startAuthorized(t, "", "\trate_limit per_subject {\n\t\tkey {http.mcp.auth.subject}\n\t\trate 1/1h\n\t}")
	call := `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"}}}`
	for _, client := range []mcptest.AuthClient{agent, other} {
		token := a.as.Token(t, client, "", "")
		_, body := post(t, a.endpoint, call, bearerOf(token), withHeader("Mcp-Protocol-Version", "2025-06-18"))
		assert.NotContains(t, string(body), "RATE_LIMITED", client.ID)
		// Another token of the same client is the same subject.
		_, body = post(t, a.endpoint, call, bearerOf(a.as.Token(t, client, "", "")), withHeader("Mcp-Protocol-Version", "2025-06-18"))
		assert.Contains(t, string(body), "RATE_LIMITED", "%s: a fresh token is no fresh bucket", client.ID)
	}
}

func TestASessionWorksOnlyForThePrincipalThatOpenedIt(t *testing.T) {
	a := startAuthorized(t, "", "\tsessions {\n\t\tsecret "+poolSecret+"\n\t}")
	resp, body := post(t, a.endpoint, initialize, bearerOf(a.as.Token(t, agent, "", "")))
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", body)
	session := resp.Header.Get("Mcp-Session-Id")
	require.NotEmpty(t, session)
	inSession := func(token, body string) (*http.Response, []byte) {
		return post(t, a.endpoint, body, bearerOf(token), withHeader("Mcp-Session-Id", session, "Mcp-Protocol-Version", "2025-06-18"))
	}
	resp, body = inSession(a.as.Token(t, agent, "", ""), `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	require.Equal(t, http.StatusAccepted, resp.StatusCode, "%s", body)

	list := `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`
	resp, body = inSession(a.as.Token(t, agent, "", ""), list)
	assert.Equal(t, http.StatusOK, resp.StatusCode, "a renewed token of the same principal: %s", body)
	assert.Contains(t, string(body), `"echo"`)

	resp, body = inSession(a.as.Token(t, other, "", ""), list)
	assert.Equal(t, http.StatusNotFound, resp.StatusCode, "another principal holding the session id: %s", body)
}

// A tool whose scope the token lacks: a client that re-authorizes on 403
// (2025-11-25 on) is asked for the scope; an earlier one gets a result the
// model reads.
func TestAToolsScopeIsAskedForByEachClientAsItCanAct(t *testing.T) {
	a := startAuthorized(t, "\t\ttool echo tools:call", "")
	call := `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"}}}`
	readOnly := a.as.Token(t, agent, "", "tools:read")

	resp, body := post(t, a.endpoint, call, bearerOf(readOnly), withHeader("Mcp-Protocol-Version", "2025-11-25"))
	assert.Equal(t, http.StatusForbidden, resp.StatusCode, "%s", body)
	ch := challengeOf(t, resp)
	assert.Equal(t, "insufficient_scope", ch["error"])
	assert.Equal(t, "tools:call", ch["scope"])
	assert.Contains(t, string(body), `"id":5`)

	resp, body = post(t, a.endpoint, call, bearerOf(readOnly), withHeader("Mcp-Protocol-Version", "2025-06-18"))
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Contains(t, string(body), `"isError":true`)
	assert.Contains(t, string(body), `FORBIDDEN`)
	assert.Contains(t, string(body), `needs the scope tools:call`)
	assert.Empty(t, a.upstreamSaw(), "neither reached the server")

	resp, _ = post(t, a.endpoint, call, bearerOf(a.as.Token(t, agent, "", "tools:read tools:call")), withHeader("Mcp-Protocol-Version", "2025-11-25"))
	assert.Equal(t, http.StatusOK, resp.StatusCode, "with the scope, the call runs")

	meta, err := oauthex.GetProtectedResourceMetadata(t.Context(), a.gw.URL+"/.well-known/oauth-protected-resource", a.resource, http.DefaultClient)
	require.NoError(t, err)
	assert.Equal(t, []string{"tools:call"}, meta.ScopesSupported, "every scope a request may need")
}

// The Go SDK's client signs in with the endpoint's scope, is refused the
// tool's on a call, asks for it (step-up) and the call runs: the model
// never sees the refusal.
func TestTheGoSDKClientStepsUpToAToolsScope(t *testing.T) {
	a := startAuthorized(t, "\t\tscopes tools:read\n\t\ttool echo tools:call", "")
	cs := signIn(t, a.endpoint, agent)
	t.Logf("protocol %s", cs.InitializeResult().ProtocolVersion)
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "stepped up"}})
	require.NoError(t, err)
	assert.False(t, res.IsError, "%s", mcptest.TextOf(t, res))
	assert.Equal(t, "stepped up", mcptest.TextOf(t, res))
}

// A tool whose scope the token lacks is not offered to the model: the
// list the client is given follows its token, and grows when the client
// steps up to the scope.
func TestToolsListOffersOnlyWhatTheTokenMayCall(t *testing.T) {
	a := startAuthorized(t, "\t\tscopes tools:read\n\t\ttool slow tools:call\n\t\ttool c* tools:call", "")
	cs := signIn(t, a.endpoint, agent)
	names := func() []string {
		res, err := cs.ListTools(t.Context(), nil)
		require.NoError(t, err)
		var names []string
		for _, tool := range res.Tools {
			names = append(names, tool.Name)
		}
		return names
	}
	assert.Equal(t, []string{"add", "echo"}, names(), "signed in with tools:read only")

	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "slow", Arguments: map[string]any{"ms": 0}})
	require.NoError(t, err, "the client steps up to tools:call")
	assert.False(t, res.IsError, "%s", mcptest.TextOf(t, res))
	assert.Equal(t, []string{"add", "count", "echo", "slow"}, names(), "the token now grants tools:call")
}

// signIn connects the Go SDK's client to endpoint with its own client
// credentials flow: it discovers the authorization server from the 401,
// obtains a token as client, and sends the request again.
func signIn(t *testing.T, endpoint string, client mcptest.AuthClient) *mcp.ClientSession {
	t.Helper()
	handler, err := extauth.NewClientCredentialsHandler(&extauth.ClientCredentialsHandlerConfig{
		Credentials: &oauthex.ClientCredentials{ClientID: client.ID, ClientSecretAuth: &oauthex.ClientSecretAuth{ClientSecret: client.Secret}},
	})
	require.NoError(t, err)
	c := mcp.NewClient(&mcp.Implementation{Name: "caddy-mcp-test", Version: "0"}, nil)
	cs, err := c.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: endpoint, OAuthHandler: handler}, nil)
	require.NoError(t, err, "discovered from the 401, signed in, and sent again")
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

// Every refusal the gateway writes with authorization on is a JSON-RPC
// error, and says so in its Content-Type: the step-up 403 (written apart
// from the envelopes, with the request's id) as much as those at the edge.
func TestEveryRefusalOfAuthorizationIsJSON(t *testing.T) {
	a := startAuthorized(t, "\t\tscopes tools:read\n\t\ttool echo tools:call", "")
	call := `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"}}}`
	readOnly := a.as.Token(t, agent, "", "tools:read")
	for _, c := range []struct {
		name, challenge string
		status          int
		opts            []sendOption
	}{
		{"no token", "", http.StatusUnauthorized, nil},
		{"a token refused", "invalid_token", http.StatusUnauthorized, []sendOption{bearerOf("not-a-jwt")}},
		{"two Authorization headers", "invalid_request", http.StatusBadRequest, []sendOption{bearerOf(readOnly), bearerOf(readOnly)}},
		{"a scope every request needs", "insufficient_scope", http.StatusForbidden, []sendOption{bearerOf(a.as.Token(t, agent, "", "tools:call"))}},
		{"a scope the tool needs (step-up)", "insufficient_scope", http.StatusForbidden, []sendOption{bearerOf(readOnly), withHeader("Mcp-Protocol-Version", "2025-11-25")}},
	} {
		resp, body := post(t, a.endpoint, call, c.opts...)
		assert.Equal(t, c.status, resp.StatusCode, "%s: %s", c.name, body)
		assert.Equal(t, c.challenge, challengeOf(t, resp)["error"], c.name)
		assert.Equal(t, []string{"application/json"}, resp.Header.Values("Content-Type"), c.name)
		assert.True(t, json.Valid(body), "%s: %s", c.name, body)
	}

	// An issuer whose keys cannot be fetched: 503, and no challenge.
	a.gw.Reload(t, "route {\n\tmcp {\n\t\tauthorization {\n\t\t\tissuer http://127.0.0.1:1\n\t\t}\n\t}\n\trespond ok\n}")
	b64 := func(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }
	token := b64(`{"alg":"ES256","typ":"at+jwt"}`) + "." + b64(`{"iss":"http://127.0.0.1:1","sub":"agent","exp":4102444800}`) + "." + b64(strings.Repeat("s", 64))
	resp, body := post(t, a.endpoint, call, bearerOf(token), afterReload(t))
	assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode, "%s", body)
	assert.Empty(t, resp.Header.Values("Www-Authenticate"))
	assert.Equal(t, []string{"application/json"}, resp.Header.Values("Content-Type"))
	assert.Equal(t, envelope.ServerBusy, envelopeOf(t, body).Code)
	assert.Empty(t, a.upstreamSaw())
}
