package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"
	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/caddymcp/caddy-mcp/internal/caddyrun"
)

// exchanged is what an exchanged token says.
type exchanged struct {
	jwt.Claims
	Scope string `json:"scope"`
	Act   struct {
		Sub string `json:"sub"`
	} `json:"act"`
}

// claimsOf checks token's signature with the issuer's key and reads it.
func claimsOf(t *testing.T, is *issuer, token string) exchanged {
	t.Helper()
	parsed, err := jwt.ParseSigned(token, []jose.SignatureAlgorithm{jose.EdDSA})
	require.NoError(t, err)
	var c exchanged
	require.NoError(t, parsed.Claims(is.pub, &c))
	return c
}

// postExchange asks the issuer's token endpoint, and reads its JSON answer.
func postExchange(t *testing.T, is *issuer, id, secret string, form url.Values) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, is.URL+"/token", strings.NewReader(form.Encode()))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.SetBasicAuth(url.QueryEscape(id), url.QueryEscape(secret))
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	var out map[string]any
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&out))
	return resp.StatusCode, out
}

func TestIssuerExchangesItsTokenForAnAudience(t *testing.T) {
	is, err := startIssuer()
	require.NoError(t, err)
	defer is.Close()
	form := func(subject, audience string) url.Values {
		return url.Values{"grant_type": {grantTokenExchange}, "subject_token": {subject}, "subject_token_type": {tokenTypeAccess}, "audience": {audience}}
	}

	status, out := postExchange(t, is, credentialClient, credentialSecret, form(is.Token, credentialAudience))
	require.Equal(t, http.StatusOK, status, out)
	assert.Equal(t, tokenTypeAccess, out["issued_token_type"])
	assert.Equal(t, "Bearer", out["token_type"])
	assert.Equal(t, 3600.0, out["expires_in"])
	tok, _ := out["access_token"].(string)
	c := claimsOf(t, is, tok)
	assert.Equal(t, jwt.Audience{credentialAudience}, c.Audience)
	assert.Equal(t, "bench-user", c.Subject)
	assert.Equal(t, is.URL, c.Issuer)
	assert.Equal(t, "tools:call", c.Scope)
	assert.Equal(t, credentialClient, c.Act.Sub, "the party it was exchanged for")

	for _, bad := range []struct {
		id, secret string
		form       url.Values
		status     int
		code       string
	}{
		{credentialClient, "wrong", form(is.Token, credentialAudience), http.StatusUnauthorized, "invalid_client"},
		{credentialClient, credentialSecret, url.Values{"grant_type": {"client_credentials"}}, http.StatusBadRequest, "unsupported_grant_type"},
		{credentialClient, credentialSecret, form(is.Token, ""), http.StatusBadRequest, "invalid_target"},
		{credentialClient, credentialSecret, form(tok, credentialAudience), http.StatusBadRequest, "invalid_grant"},
		{credentialClient, credentialSecret, form("not.a.token", credentialAudience), http.StatusBadRequest, "invalid_grant"},
	} {
		status, out := postExchange(t, is, bad.id, bad.secret, bad.form)
		assert.Equal(t, bad.status, status, out)
		assert.Equal(t, bad.code, out["error"])
	}
	assert.Equal(t, uint64(1), is.Exchanges(), "refusals are not exchanges")
}

// handlersOf are the handlers of the one route of the site of an adapted
// bench Caddyfile, in order.
func handlersOf(t *testing.T, adapted []byte) []string {
	t.Helper()
	type route struct {
		Handle []struct {
			Handler string  `json:"handler"`
			Routes  []route `json:"routes"`
		} `json:"handle"`
	}
	var cfg struct {
		Apps struct {
			HTTP struct {
				Servers map[string]struct {
					Routes []route `json:"routes"`
				} `json:"servers"`
			} `json:"http"`
		} `json:"apps"`
	}
	require.NoError(t, json.Unmarshal(adapted, &cfg))
	routes := cfg.Apps.HTTP.Servers["srv0"].Routes
	require.Len(t, routes, 1)
	require.Len(t, routes[0].Handle, 1)
	require.Len(t, routes[0].Handle[0].Routes, 1, "one route in the site's subroute")
	var names []string
	for _, h := range routes[0].Handle[0].Routes[0].Handle {
		names = append(names, h.Handler)
	}
	return names
}

// TestCredentialGivesTheUpstreamAnExchangedToken runs the credential
// configuration's Caddyfile in this process, in front of a responder that
// notes the Authorization header of every request: each carries the token
// exchanged for the caller's, for the upstream's audience, and the issuer
// exchanged once for them all.
func TestCredentialGivesTheUpstreamAnExchangedToken(t *testing.T) {
	is, err := startIssuer()
	require.NoError(t, err)
	defer is.Close()
	var mu sync.Mutex
	var seen []string
	responder := &responder{}
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Header.Get("Authorization"))
		mu.Unlock()
		responder.ServeHTTP(w, r)
	}))
	defer up.Close()

	cfg := allConfigs(1000)[indexOf(t, cfgCredential)]
	assert.Equal(t, cfgAuthz, cfg.Baseline)
	assert.True(t, cfg.Bearer)
	port, err := caddyrun.FreePort()
	require.NoError(t, err)
	admin, err := caddyrun.FreePort()
	require.NoError(t, err)
	text := caddyfile(cfg, port, admin, t.TempDir(), strings.TrimPrefix(up.URL, "http://"), map[string]string{issuerMark: is.URL})
	adapted, _, err := caddyconfig.GetAdapter("caddyfile").Adapt([]byte(text), nil)
	require.NoError(t, err, text)
	assert.Equal(t, []string{"mcp", "mcp_credential", "reverse_proxy"}, handlersOf(t, adapted))
	require.NoError(t, caddy.Load(adapted, true))
	defer func() { assert.NoError(t, caddy.Stop()) }()

	const clients, each = 4, 5
	tg := &target{addr: "127.0.0.1:" + strconv.Itoa(port), path: "/mcp", body: body(1 << 10), keys: 1, headers: "Authorization: Bearer " + is.Token + "\r\n", expect: upstreamText}
	var wg sync.WaitGroup
	errs := make(chan error, clients*each)
	for i := range clients {
		wg.Go(func() {
			c := newClient(tg, i, clients)
			defer c.close()
			for range each {
				errs <- c.do()
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}

	mu.Lock()
	defer mu.Unlock()
	require.Len(t, seen, clients*each)
	for _, h := range seen {
		require.Equal(t, seen[0], h, "one token for one caller")
	}
	token, ok := strings.CutPrefix(seen[0], "Bearer ")
	require.True(t, ok, seen[0])
	assert.NotEqual(t, is.Token, token, "never the caller's own token")
	c := claimsOf(t, is, token)
	assert.Equal(t, jwt.Audience{credentialAudience}, c.Audience)
	assert.Equal(t, "bench-user", c.Subject)
	assert.Equal(t, uint64(1), is.Exchanges(), "exchanged once, then remembered")
}

func indexOf(t *testing.T, name string) int {
	for i, c := range allConfigs(1000) {
		if c.Name == name {
			return i
		}
	}
	t.Fatalf("no configuration %s", name)
	return -1
}

// credential's CPU is compared with authorization's round by round, and
// the report says how many exchanges the issuer served.
func TestCredentialIsComparedWithAuthorizationRoundByRound(t *testing.T) {
	all := allConfigs(1000)
	measured := func(name string, cpus ...time.Duration) *series {
		s := &series{Config: all[indexOf(t, name)], Size: 1024}
		for _, c := range cpus {
			s.Samples = append(s.Samples, &sample{Requests: 1000, Answered: 1000, Window: time.Second, CPU: c})
		}
		return s
	}
	// Per answer: credential 2 µs over authorization in both rounds, the
	// machine twice as slow in the second.
	series := []*series{
		measured(cfgAuthz, 200*time.Millisecond, 400*time.Millisecond),
		measured(cfgCredential, 202*time.Millisecond, 402*time.Millisecond),
	}
	assert.Nil(t, versusAuthorization(series[:1], 0), "credential not measured")
	run := versusAuthorization(series, 1)
	require.NotNil(t, run)
	require.Len(t, run.Rows, 1)
	assert.InDelta(t, 2, run.Rows[0].CPU.Median, 1e-9)
	assert.Equal(t, uint64(2000), run.Answers)

	var out strings.Builder
	(&report{Credential: run}).writeMarkdown(&out)
	assert.Contains(t, out.String(), "The issuer served 1 token exchange(s) in the whole run, for 2,000 answers")
	assert.Contains(t, out.String(), "| credential | authorization | 1 KiB | +2.0 µs")
}
