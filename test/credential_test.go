package test

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/caddymcp/caddy-mcp/credential"
	"github.com/caddymcp/caddy-mcp/envelope"
	"github.com/caddymcp/caddy-mcp/test/mcptest"
	"github.com/caddymcp/caddy-mcp/test/wire"
)

// Four servers behind one federated endpoint with authorization, each
// given its credential as its block says: crm and tickets a token the
// issuer exchanged the user's for (each for its own audience, with its
// own scopes, the gateway authenticating with a secret for one and a
// signed assertion for the other), search an API key, reports the
// gateway's own token. No server gets what the client sent: its token,
// its cookie, its session id.
func TestCredentialEachServerGetsACredentialMeantForIt(t *testing.T) {
	r := startCredRig(t, mcptest.AuthExchange{}, false, crmServer, ticketsServer, searchServer, reportsServer)
	tokens := map[string]string{"alice": r.userToken(t, "alice"), "bob": r.userToken(t, "bob")}
	var sessions []string
	reportsTokens := map[string]bool{}
	for _, user := range []string{"alice", "bob"} {
		cs := connectAs(t, r.endpoint, tokens[user])
		sessions = append(sessions, cs.ID())
		for range 3 {
			crm := whoamiOf(t, cs, r.tool("crm"))
			assert.Equal(t, []string{crmAudience}, crm.Aud, user)
			assert.Equal(t, user, crm.Sub)
			assert.Equal(t, gwBasic.ID, crm.ActSub(), "the gateway acts for the user")
			assert.Equal(t, gwBasic.ID, crm.ClientID)
			assert.Equal(t, "crm:read", crm.Scope, "the scopes crm's block asks for")

			tickets := whoamiOf(t, cs, r.tool("tickets"))
			assert.Equal(t, []string{ticketsResource}, tickets.Aud, user)
			assert.Equal(t, user, tickets.Sub)
			assert.Equal(t, gwJWTID, tickets.ActSub(), "authenticated with its signed assertion")
			assert.Equal(t, "tickets:read", tickets.Scope)

			search := whoamiOf(t, cs, r.tool("search"))
			assert.Equal(t, mcptest.Identity{APIKey: searchKey}, search, "the API key, and no Authorization")

			reports := whoamiOf(t, cs, r.tool("reports"))
			assert.Equal(t, []string{reportsResource}, reports.Aud)
			assert.Equal(t, gwReports.ID, reports.Sub, "the gateway's own token, whoever calls")
			assert.Nil(t, reports.Act)
		}
	}
	for _, c := range r.servers["reports"].Requests() {
		reportsTokens[c.Authorization] = true
	}
	assert.Equal(t, 1, len(reportsTokens), "one client-credentials token for every caller")

	// What each server got, request by request (initialize, notifications
	// and calls): a token for itself only, never the caller's, nor its
	// cookie, nor the session id the client holds.
	callers := []string{tokens["alice"], tokens["bob"]}
	for name, srv := range r.servers {
		assertNeverSawTheClients(t, name, srv, callers, sessions)
	}
	for name, aud := range map[string]string{"crm": crmAudience, "tickets": ticketsResource, "reports": reportsResource} {
		for _, c := range r.servers[name].Requests() {
			assert.Equal(t, aud, bearerClaims(t, c.Authorization).Aud, "%s got a token for another audience", name)
		}
	}
	for _, c := range r.servers["search"].Requests() {
		assert.Equal(t, [2]string{"", searchKey}, [2]string{c.Authorization, c.APIKey})
	}

	// One exchange per user and server, however many calls: the tokens
	// are remembered; and one token request for reports' token.
	assert.Equal(t, mcptest.AuthStats{TokenRequests: 5, Exchanges: 4, BySubject: map[string]int{"alice": 2, "bob": 2}}, r.as.Stats(t))
}

// Twenty sessions of one user, opened at once, each calling crm: the
// first exchange for the user at each server is asked once, the others
// waiting for it.
func TestCredentialConcurrentFirstCallsOfAUserExchangeOnce(t *testing.T) {
	r := startCredRig(t, mcptest.AuthExchange{}, false, crmServer, ticketsServer)
	carol := r.userToken(t, "carol")
	const n = 20
	start := make(chan struct{})
	var wg sync.WaitGroup
	subs := make([]string, n)
	for i := range n {
		wg.Go(func() {
			<-start
			cs, err := connectWith(t, r.endpoint, carol)
			if !assert.NoError(t, err) {
				return
			}
			subs[i] = whoamiOf(t, cs, r.tool("crm")).Sub
		})
	}
	close(start)
	wg.Wait()
	assert.Equal(t, slices.Repeat([]string{"carol"}, n), subs)
	assert.Equal(t, mcptest.AuthStats{TokenRequests: 2, Exchanges: 2, BySubject: map[string]int{"carol": 2}}, r.as.Stats(t),
		"one exchange at crm, one at tickets")
	bearers := map[string]bool{}
	for _, c := range r.servers["crm"].Requests() {
		bearers[c.Authorization] = true
	}
	assert.Equal(t, 1, len(bearers), "every session's requests to crm bore the one token exchanged")
}

// A site with one server and no federation: its mcp_credential, between
// mcp and reverse_proxy, gives it the exchanged token, or, with
// passthrough, the caller's own, as before.
func TestCredentialASitesOneServerGetsTheExchangedTokenOrTheCallers(t *testing.T) {
	as := mcptest.NewAuthServer(t)
	srv := mcptest.StartTokenServer(t)
	t.Setenv(basicSecretV, gwBasic.Secret)
	site := func(credential string) string {
		return "mcp {\n\tauthorization {\n\t\tissuer " + as.Issuer + "\n\t}\n}\n" + credential + "\n" + mcptest.ProxyTo(srv.URL)
	}
	exchange := exchangeBlock(as.Issuer, "client "+gwBasic.ID+" {env."+basicSecretV+"}", "audience "+crmAudience)
	gw := mcptest.StartGateway(t, site(exchange))
	as.Start(t, mcptest.AuthServerConfig{
		Clients:   []mcptest.AuthClient{userApp, gwBasic},
		Resources: map[string]mcptest.AuthResource{gw.URL: {Scope: "tools:call"}, crmAudience: {Scope: "crm:read crm:write"}},
		Exchange:  &mcptest.AuthExchange{Accept: gw.URL},
	}, "k1")
	alice := as.UserToken(t, "alice", userApp.ID, "", gw.URL)

	cs := connectAs(t, gw.URL+mcptest.MCPPath, alice)
	id := whoamiOf(t, cs, "whoami")
	assert.Equal(t, []string{crmAudience}, id.Aud)
	assert.Equal(t, "alice", id.Sub)
	assert.Equal(t, gwBasic.ID, id.ActSub())
	assert.Equal(t, "crm:read crm:write", id.Scope, "no scopes asked: the resource's")
	assertNeverSawTheClients(t, "the server", srv, []string{alice}, nil)
	assert.Equal(t, 1, as.Stats(t).Exchanges)

	gw.Reload(t, site("mcp_credential passthrough"))
	before := len(srv.Requests())
	cs = connectAs(t, gw.URL+mcptest.MCPPath, alice)
	id = whoamiOf(t, cs, "whoami")
	assert.Equal(t, []string{gw.URL}, id.Aud, "the caller's token, for the gateway")
	assert.Nil(t, id.Act)
	for _, c := range srv.Requests()[before:] {
		assert.Equal(t, "Bearer "+alice, c.Authorization)
		assert.Equal(t, clientCookie, c.Cookie, "passthrough: the request as it came")
	}
	assert.Equal(t, 1, as.Stats(t).Exchanges, "no exchange with passthrough")
}

// A user the issuer refuses crm to, and a server whose issuer is out of
// reach: each is told to the model naming the server, and the other
// servers serve meanwhile.
func TestCredentialRefusalsNameTheServerAndTheOthersServe(t *testing.T) {
	var down func()
	billing := credServer{"billing", func(r *credRig) string {
		var endpoint string
		endpoint, down = tokenFront(t, r.as.Issuer)
		return billingServer(endpoint).credential(r)
	}}
	r := startCredRig(t, mcptest.AuthExchange{Deny: map[string][]string{"mallory": {crmAudience}}}, false, crmServer, ticketsServer, billing)
	alice := connectAs(t, r.endpoint, r.userToken(t, "alice"))
	for _, name := range r.names {
		assert.Equal(t, "alice", whoamiOf(t, alice, r.tool(name)).Sub, name)
	}
	down() // billing's issuer, out of reach from now on

	mallory := connectAs(t, r.endpoint, r.userToken(t, "mallory"))
	tickets := func() {
		id := whoamiOf(t, mallory, r.tool("tickets"))
		assert.Equal(t, []string{ticketsResource}, id.Aud)
		assert.Equal(t, "mallory", id.Sub)
	}
	p := refusedWith(t, mallory, r.tool("crm"), "crm", envelope.Forbidden, tickets)
	t.Logf("crm: %s", p.Raw)
	assert.Contains(t, p.Message, `"crm"`)
	assert.Contains(t, detailOf(p.Envelope, "issuer_said"), "access_denied")
	tickets()
	again := callEnvelope(t, mallory, r.tool("crm"), map[string]any{})
	assert.Equal(t, envelope.Forbidden, again.Code, "%s", again.Raw)

	p = refusedWith(t, mallory, r.tool("billing"), "billing", envelope.HandoffUpstreamUnavailable, tickets)
	t.Logf("billing: %s", p.Raw)
	assert.Contains(t, p.Message, `"billing"`)
	assert.Positive(t, p.RetryAfter)
	assert.LessOrEqual(t, p.RetryAfter, 5.0)
	tickets()

	// Alice keeps every server: her token for billing is remembered.
	for _, name := range r.names {
		assert.Equal(t, "alice", whoamiOf(t, alice, r.tool(name)).Sub, name)
	}
	for _, name := range []string{"crm", "billing"} {
		for _, c := range r.servers[name].Requests() {
			assert.Equal(t, "alice", bearerClaims(t, c.Authorization).Sub, "%s got a request of mallory's", name)
		}
	}
	assert.Equal(t, map[string]int{"alice": 3, "mallory": 1}, r.as.Stats(t).BySubject)
}

// An issuer that answers an exchange with the caller's own token is not
// believed: the server never gets the token, and the call is refused.
func TestCredentialAnIssuerAnsweringTheCallersOwnTokenIsNotBelieved(t *testing.T) {
	as := mcptest.NewAuthServer(t)
	srv := mcptest.StartTokenServer(t)
	t.Setenv(basicSecretV, gwBasic.Secret)
	exchange := exchangeBlock(as.Issuer, "client "+gwBasic.ID+" {env."+basicSecretV+"}", "audience "+crmAudience)
	gw := mcptest.StartGateway(t, "mcp {\n\tauthorization {\n\t\tissuer "+as.Issuer+"\n\t}\n}\n"+exchange+"\n"+mcptest.ProxyTo(srv.URL))
	as.Start(t, mcptest.AuthServerConfig{
		Clients:   []mcptest.AuthClient{userApp, gwBasic},
		Resources: map[string]mcptest.AuthResource{gw.URL: {Scope: "tools:call"}, crmAudience: {Scope: "crm:read"}},
		Exchange:  &mcptest.AuthExchange{Accept: gw.URL, Unchanged: true},
	}, "k1")
	alice := as.UserToken(t, "alice", userApp.ID, "", gw.URL)
	endpoint := gw.URL + mcptest.MCPPath

	_, err := connectWith(t, endpoint, alice)
	require.Error(t, err, "the initialize is refused")
	assert.Contains(t, err.Error(), "could not obtain its credential")
	call := `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"whoami","arguments":{}}}`
	resp, body := post(t, endpoint, call, bearerOf(alice), withHeader("Mcp-Protocol-Version", "2025-06-18"))
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", body)
	assert.Contains(t, string(body), `"isError":true`)
	p, err := wire.ResultEnvelope(body)
	require.NoError(t, err, "%s", body)
	assert.Equal(t, envelope.HandoffUpstreamUnavailable, p.Code, "%s", p.Raw)
	assert.Contains(t, p.Message, "could not be used")
	assert.NotContains(t, string(body), alice)
	assert.Empty(t, srv.Requests(), "nothing reached the server")
	assert.Positive(t, as.Stats(t).Exchanges, "the issuer was asked, and answered")
}

// A federated server that would get the caller's token, issued for the
// gateway, is refused when the config loads: one with no mcp_credential,
// and one with passthrough; none loads.
func TestCredentialAFederatedServerWithoutACredentialOfItsOwnIsRefusedAtLoad(t *testing.T) {
	site := func(credential string) string {
		cfg, _ := multiSite(t, "mcp {\n\tauthorization {\n\t\tissuer http://127.0.0.1:1\n\t}\n\tserver search {\n\t\tmcp_credential none\n\t\treverse_proxy 127.0.0.1:1\n\t}\n"+
			"\tserver crm {\n\t\t"+credential+"\n\t\treverse_proxy 127.0.0.1:1\n\t}\n}")
		return cfg
	}
	configs := map[string]string{}
	for _, credential := range []string{"", "mcp_credential passthrough", "mcp_credential none"} {
		configs[credential] = site(credential)
	}
	load := caddyLoader(t) // registered last, Caddy stops before the configs' folders go
	for credential, want := range map[string]string{
		"":                           `federation: server "crm": the caller's token is for the gateway, not for this server, and is not passed on: say in its block what it gets instead, with mcp_credential token_exchange, client_credentials, header or none`,
		"mcp_credential passthrough": `federation: server "crm": mcp_credential passthrough would give it the caller's token, issued for the gateway: a server must be given a token meant for it (MCP authorization forbids token passthrough): use token_exchange, client_credentials, header or none`,
	} {
		err := loadCaddyfile(t, load, configs[credential])
		require.Error(t, err, "%q", credential)
		assert.Contains(t, err.Error(), want)
	}
	require.NoError(t, loadCaddyfile(t, load, configs["mcp_credential none"]), "a server given nothing of the caller's loads")
}

// /mcp/status shows each server's credential: how it gets it, where from,
// how many tokens are remembered; never a token nor a secret.
func TestCredentialStatusCountsTheTokensAndShowsNone(t *testing.T) {
	r := startCredRig(t, mcptest.AuthExchange{}, true, crmServer, ticketsServer, searchServer, reportsServer)
	secrets := []string{searchKey, gwBasic.Secret, gwReports.Secret}
	for _, user := range []string{"alice", "bob"} {
		token := r.userToken(t, user)
		secrets = append(secrets, token)
		cs := connectAs(t, r.endpoint, token)
		for _, name := range r.names {
			whoamiOf(t, cs, r.tool(name))
		}
	}
	for _, srv := range r.servers {
		for _, c := range srv.Requests() {
			if tok, ok := strings.CutPrefix(c.Authorization, "Bearer "); ok {
				secrets = append(secrets, tok, tok[strings.LastIndexByte(tok, '.')+1:])
			}
		}
	}
	raw, _, err := getStatus(r.gw.AdminURL)
	require.NoError(t, err, "%s", raw)
	for _, s := range secrets {
		assert.NotContains(t, string(raw), s)
	}
	var status struct {
		Routes struct {
			Credentials []credential.Status `json:"mcp_credential"`
		} `json:"routes"`
	}
	require.NoError(t, json.Unmarshal(raw, &status), "%s", raw)
	got := status.Routes.Credentials
	require.Len(t, got, 4, "%s", raw)
	for i := range got {
		if got[i].Remembered > 0 {
			assert.Positive(t, got[i].RememberedBytes)
			assert.NotEmpty(t, got[i].LastRefresh)
		}
		got[i].RememberedBytes, got[i].LastRefresh = 0, ""
	}
	grant := credential.Status{Issuer: r.as.Issuer, TokenEndpoint: r.as.TokenEndpoint(), MaxTokens: credential.DefaultCacheTokens, MaxBytes: credential.DefaultCacheBytes}
	crm, tickets, reports := grant, grant, grant
	crm.Server, crm.Use, crm.Audience, crm.Scopes, crm.Remembered = "crm", "token_exchange", crmAudience, []string{"crm:read"}, 2
	tickets.Server, tickets.Use, tickets.Resource, tickets.Scopes, tickets.Remembered = "tickets", "token_exchange", ticketsResource, []string{"tickets:read"}, 2
	reports.Server, reports.Use, reports.Resource, reports.Scopes, reports.Remembered = "reports", "client_credentials", reportsResource, []string{"reports:read"}, 1
	reports.MaxTokens, reports.MaxBytes = 1, 2*credential.MaxTokenBytes
	assert.ElementsMatch(t, []credential.Status{crm, tickets, {Server: "search", Use: "header", Header: "X-Api-Key"}, reports}, got)
}
