package fleet

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/caddymcp/caddy-mcp/test/fleettest"
	"github.com/caddymcp/caddy-mcp/test/mcptest"
)

// The resources of the credential tests: the gateway's canonical URL, the
// same for every node (the audience of the users' tokens), and the MCP
// server's behind it (the audience of the tokens exchanged for it).
const (
	gatewayResource = "https://mcp.fleet.test/mcp"
	serverResource  = "https://echo.fleet.test/mcp"
)

var (
	// app is the client the users signed in with.
	app = mcptest.AuthClient{ID: "app", Secret: "app-secret-app-secret-app-secret", Scope: "tools:call"}
	// gatewayClient is the nodes' client at the issuer, allowed to
	// exchange tokens.
	gatewayClient = mcptest.AuthClient{ID: "gateway", Secret: "gateway-secret-gateway-secret-gw",
		GrantTypes: []string{"client_credentials", mcptest.TokenExchangeGrant}}
)

// bearers records the Authorization header of every request that reached
// the upstream.
type bearers struct {
	mu   sync.Mutex
	seen []string
}

func (b *bearers) all() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.seen...)
}

// startRecordedUpstream is startUpstream's echo server, which takes any
// bearer token or none, behind a recorder of the tokens it was sent.
func startRecordedUpstream(t *testing.T) (*upstream, *bearers) {
	t.Helper()
	b := &bearers{}
	u := startUpstreamBehind(t, func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			b.mu.Lock()
			b.seen = append(b.seen, r.Header.Get("Authorization"))
			b.mu.Unlock()
			h.ServeHTTP(w, r)
		})
	})
	return u, b
}

// startExchangingIssuer is an authorization server that issues the users'
// tokens for the gateway and exchanges them, for the gateway's client,
// for tokens for the server.
func startExchangingIssuer(t *testing.T) *mcptest.AuthServer {
	t.Helper()
	as := mcptest.NewAuthServer(t)
	as.Start(t, mcptest.AuthServerConfig{
		Clients: []mcptest.AuthClient{app, gatewayClient},
		Resources: map[string]mcptest.AuthResource{
			gatewayResource: {Scope: "tools:call"},
			serverResource:  {Scope: "echo:call"},
		},
		DefaultResource: gatewayResource,
		Exchange:        &mcptest.AuthExchange{Accept: gatewayResource},
	}, "k1")
	return as
}

// exchangingSite is a node's site: the gateway checks that a token is the
// issuer's, for the gateway, then the server gets a token exchanged for
// it.
func exchangingSite(as *mcptest.AuthServer, up *upstream) string {
	return fmt.Sprintf("mcp {\n\tauthorization {\n\t\tissuer %s\n\t\tresource %s\n\t}\n}\n"+
		"mcp_credential token_exchange {\n\tissuer %s\n\tclient %s %s\n\tresource %s\n}\n%s",
		as.Issuer, gatewayResource, as.Issuer, gatewayClient.ID, gatewayClient.Secret, serverResource, mcptest.ProxyTo(up.url))
}

// sendBearer is send with a user's token, sent again once if the
// connection was closed without an answer (the first call to a node
// after its reload: see callAfterReload).
func sendBearer(n *fleettest.Node, token string) (answer, error) {
	header := http.Header{"Authorization": {"Bearer " + token}}
	a, err := sendWith(n, header)
	if errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET) {
		a, err = sendWith(n, header)
	}
	return a, err
}

// round has every user make calls tool calls, alternating between the
// nodes (user i starts on node i mod 2), each of them answered by the
// upstream.
func round(t *testing.T, users []string, tokens map[string]string, calls int, nodes ...*fleettest.Node) {
	t.Helper()
	for i, u := range users {
		for c := range calls {
			a, err := sendBearer(nodes[(i+c)%len(nodes)], tokens[u])
			require.NoError(t, err, "%s, call %d", u, c)
			require.Equal(t, "done", a.outcome, "%s, call %d: %+v", u, c, a.env)
		}
	}
}

// obtained is how many tokens the node's credential handlers obtained
// from the issuer, as its metrics count them.
func obtained(t *testing.T, n *fleettest.Node) int {
	t.Helper()
	return int(metric(t, n, "caddy_mcp_credential_requests_total", `use="token_exchange"`, `outcome="obtained"`))
}

// Each node of a fleet exchanges a user's token for the server's once,
// then remembers it, in its own memory only: the issuer serves one
// exchange per user and node, whatever the number of calls, and the server
// never sees a user's own token. A node reloaded with the same credential
// keeps what it held.
func TestCredentialExchangesOncePerUserAndNode(t *testing.T) {
	t.Parallel()
	const users, calls = 10, 5
	as := startExchangingIssuer(t)
	up, seen := startRecordedUpstream(t)
	body := exchangingSite(as, up)
	a, b := fleettest.StartNode(t, body), fleettest.StartNode(t, body)

	names, tokens := make([]string, users), make(map[string]string, users)
	for i := range names {
		names[i] = fmt.Sprintf("user-%02d", i)
		tokens[names[i]] = as.UserToken(t, names[i], app.ID, "tools:call", gatewayResource)
	}
	round(t, names, tokens, calls, a, b)
	first := as.Stats(t)
	assert.Equal(t, users*2, first.Exchanges, "one exchange per user and node")
	assert.Equal(t, first.Exchanges, first.TokenRequests, "no token request but the exchanges, none refused")
	assert.Equal(t, each(names, 2), first.BySubject, "each user: one exchange on each node")
	assert.Equal(t, []int{users, users}, []int{obtained(t, a), obtained(t, b)}, "each node exchanged for every user")
	assert.Equal(t, each(names, 2), tokensPerUser(t, seen.all(), tokens), "each user's calls reached the server with one token per node")

	// The same config loaded again on b: the tokens it remembered survive
	// the reload (Caddy provisions the new config before it cleans up the
	// old one, and the credential keeps its tokens by its settings), so
	// a reload costs the issuer nothing.
	b.Reload(t, body)
	round(t, names, tokens, calls, a, b)
	second := as.Stats(t)
	reload := second.Exchanges - first.Exchanges
	assert.Zero(t, reload, "after b's reload, b remembers every user's token")
	assert.Equal(t, second.Exchanges, second.TokenRequests)
	assert.Equal(t, each(names, 2), second.BySubject)
	assert.Equal(t, []int{users, users}, []int{obtained(t, a), obtained(t, b)}, "neither node asked again")
	assert.Equal(t, each(names, 2), tokensPerUser(t, seen.all(), tokens), "b's tokens after its reload are the ones it held")
	assert.EqualValues(t, 2*users*calls, up.calls.Load(), "every call reached the server")

	t.Logf("fleet of 2 nodes, %d users × %d calls: %d exchanges at the issuer (%d per user), %d after a reload of one node",
		users, calls, first.Exchanges, first.Exchanges/users, reload)
}

// tokensPerUser checks every Authorization header the server saw: a
// bearer token exchanged for the server (aud the server's resource), of
// one of the users, never a user's own token. It returns the number of
// distinct tokens each user's calls came with.
func tokensPerUser(t *testing.T, headers []string, userTokens map[string]string) map[string]int {
	t.Helper()
	own := make(map[string]bool, len(userTokens))
	for _, tok := range userTokens {
		own[tok] = true
	}
	byUser := map[string]map[string]bool{}
	for _, h := range headers {
		tok, ok := strings.CutPrefix(h, "Bearer ")
		require.True(t, ok, "the server got a request without a bearer token: %q", h)
		require.False(t, own[tok], "the server got a user's own token")
		claims := claimsOf(t, tok)
		require.Equal(t, serverResource, claims.Aud, "the server got a token for another audience")
		require.Contains(t, userTokens, claims.Sub)
		if byUser[claims.Sub] == nil {
			byUser[claims.Sub] = map[string]bool{}
		}
		byUser[claims.Sub][tok] = true
	}
	counts := make(map[string]int, len(byUser))
	for u, toks := range byUser {
		counts[u] = len(toks)
	}
	return counts
}

// claims are a JWT's claims the tests read.
type claims struct {
	Sub string `json:"sub"`
	Aud any    `json:"aud"`
}

// claimsOf is the payload of a JWT, unverified (the gateway verified it).
func claimsOf(t *testing.T, token string) claims {
	t.Helper()
	var c claims
	require.NoError(t, mcptest.Claims(token, &c))
	return c
}

// each is n for every user.
func each(users []string, n int) map[string]int {
	m := make(map[string]int, len(users))
	for _, u := range users {
		m[u] = n
	}
	return m
}
