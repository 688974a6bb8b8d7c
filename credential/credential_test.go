package credential

import (
	"fmt"
	"net/http"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/caddymcp/caddy-mcp/envelope"
	"github.com/caddymcp/caddy-mcp/feature/featuretest"
)

// The caller's Authorization header and cookies never reach a server
// given another credential; passthrough leaves the request as it came.
func TestTheCallersCredentialsReachOnlyAPassthroughServer(t *testing.T) {
	is := newIssuer(t)
	caller := http.Header{"Cookie": {"session=secret"}}
	cases := []struct {
		h    *Handler
		want string // the Authorization the server gets
	}{
		{&Handler{Use: None}, ""},
		{&Handler{Use: Header, Name: "X-Api-Key", Value: "k3y"}, ""},
		{&Handler{Use: Header, Name: "Authorization", Value: "Bearer static"}, "Bearer static"},
		{&Handler{Use: TokenExchange, Issuer: is.URL, Client: Client{ID: "gw", Secret: "s"}, Audience: "https://crm"}, "Bearer " + jwtFor("https://crm", "exchanged-for-alice")},
	}
	for _, c := range cases {
		t.Run(c.h.Use+c.h.Name, func(t *testing.T) {
			got, err := through(t, provisioned(t, c.h), is.URL, "alice", caller)
			require.NoError(t, err)
			assert.Equal(t, c.want, got.Header.Get("Authorization"))
			assert.Empty(t, got.Header.Get("Cookie"))
			if c.h.Name == "X-Api-Key" {
				assert.Equal(t, "k3y", got.Header.Get("X-Api-Key"))
			}
		})
	}
	got, err := through(t, provisioned(t, &Handler{Use: Passthrough}), is.URL, "alice", caller)
	require.NoError(t, err)
	assert.Equal(t, "Bearer "+jwtFor("https://gateway.example", "alice"), got.Header.Get("Authorization"))
	assert.Equal(t, "session=secret", got.Header.Get("Cookie"))
}

// A token exchange sends the issuer what RFC 8693 asks, authenticated as
// configured, and the exchanged token is remembered per caller.
func TestAnExchangedTokenIsRememberedPerCaller(t *testing.T) {
	is := newIssuer(t)
	h := exchanging(t, is, "https://crm")
	h.Scopes = []string{"crm:read"}
	remembered := featuretest.Counted(t, requests.WithLabelValues(TokenExchange, "", "remembered"))
	obtained := featuretest.Counted(t, requests.WithLabelValues(TokenExchange, "", "obtained"))
	for range 3 {
		for _, sub := range []string{"alice", "bob"} {
			got, err := through(t, h, is.URL, sub, nil)
			require.NoError(t, err)
			assert.Equal(t, "Bearer "+jwtFor("https://crm", "exchanged-for-"+sub), got.Header.Get("Authorization"))
		}
	}
	assert.EqualValues(t, 2, is.asked.Load(), "once per caller")
	assert.Equal(t, 4.0, featuretest.Counted(t, requests.WithLabelValues(TokenExchange, "", "remembered"))-remembered)
	assert.Equal(t, 2.0, featuretest.Counted(t, requests.WithLabelValues(TokenExchange, "", "obtained"))-obtained)
	f := is.forms[0]
	assert.Equal(t, "urn:ietf:params:oauth:grant-type:token-exchange", f.Get("grant_type"))
	assert.Equal(t, tokenTypeAccess, f.Get("subject_token_type"))
	assert.Equal(t, tokenTypeAccess, f.Get("requested_token_type"))
	assert.Equal(t, "https://crm", f.Get("audience"))
	assert.Equal(t, "crm:read", f.Get("scope"))
	assert.Empty(t, f.Get("client_secret"), "client_secret_basic: the secret is in the header")
	assert.Equal(t, "gw", is.basic[0])
	n, bytes := h.grant.cache.size()
	assert.Equal(t, 2, n)
	assert.Positive(t, bytes)
}

// A token is given until shortly before it expires, then exchanged again.
func TestAnExchangedTokenIsExchangedAgainBeforeItExpires(t *testing.T) {
	is := newIssuer(t)
	is.set(is.exchange(300))
	h := exchanging(t, is, "https://crm")
	now := time.Now()
	h.grant.clock = func() time.Time { return now }
	_, err := through(t, h, is.URL, "alice", nil)
	require.NoError(t, err)
	now = now.Add(300*time.Second - margin - time.Second)
	_, err = through(t, h, is.URL, "alice", nil)
	require.NoError(t, err)
	assert.EqualValues(t, 1, is.asked.Load())
	now = now.Add(2 * time.Second)
	_, err = through(t, h, is.URL, "alice", nil)
	require.NoError(t, err)
	assert.EqualValues(t, 2, is.asked.Load(), "within the margin of its expiry, a token is exchanged again")
}

// Concurrent first calls of one caller share one exchange.
func TestConcurrentFirstCallsShareOneExchange(t *testing.T) {
	is := newIssuer(t)
	release := make(chan struct{})
	good := is.exchange(3600)
	is.set(func(w http.ResponseWriter, form url.Values) {
		<-release
		good(w, form)
	})
	h := exchanging(t, is, "https://crm")
	var wg sync.WaitGroup
	errs := make(chan error, 50)
	for range 50 {
		wg.Go(func() {
			_, err := through(t, h, is.URL, "alice", nil)
			errs <- err
		})
	}
	close(release)
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	assert.EqualValues(t, 1, is.asked.Load(), "one exchange, however many callers asked at once")
}

// What the issuer refuses reaches the model, naming the server, and a
// refusal is remembered: the model calling again costs the issuer
// nothing.
func TestTheIssuersRefusalsReachTheModel(t *testing.T) {
	cases := []struct {
		errorCode string
		want      envelope.Code
		status    int
	}{
		{"invalid_grant", envelope.AuthRequired, 403},
		{"access_denied", envelope.Forbidden, 403},
		{"invalid_target", envelope.Forbidden, 403},
		{"invalid_scope", envelope.Forbidden, 403},
		{"invalid_client", envelope.HandoffUpstreamUnavailable, 502},
		{"unsupported_grant_type", envelope.HandoffUpstreamUnavailable, 502},
	}
	for _, c := range cases {
		t.Run(c.errorCode, func(t *testing.T) {
			is := newIssuer(t)
			is.set(func(w http.ResponseWriter, _ url.Values) {
				jsonAnswer(w, 400, map[string]string{"error": c.errorCode, "error_description": "alice has not consented to crm"})
			})
			h := exchanging(t, is, "https://crm")
			_, err := through(t, h, is.URL, "alice", nil)
			ref := refusedWith(t, err)
			assert.Equal(t, c.want, ref.Envelope.Code)
			assert.Equal(t, c.status, ref.Status)
			if c.status == 403 { // the user's to lift: the model is told what the issuer said
				assert.Contains(t, fmt.Sprint(ref.Envelope.Details), "the issuer answered "+c.errorCode+": alice has not consented to crm")
			}
			_, err = through(t, h, is.URL, "alice", nil)
			assert.Equal(t, c.want, refusedWith(t, err).Envelope.Code)
			assert.EqualValues(t, 1, is.asked.Load(), "a refusal is remembered, an unusable issuer not asked again at once")
		})
	}
}

// Only tokens of the configured issuer are sent to it; a token exchange
// for a caller nobody verified is refused.
func TestOnlyTheIssuersOwnTokensAreSentToIt(t *testing.T) {
	is := newIssuer(t)
	h := exchanging(t, is, "https://crm")
	_, err := through(t, h, "https://elsewhere.example", "alice", nil)
	assert.Equal(t, envelope.AuthRequired, refusedWith(t, err).Envelope.Code)
	_, err = through(t, h, "", "", nil)
	assert.Equal(t, envelope.HandoffUpstreamUnavailable, refusedWith(t, err).Envelope.Code)
	assert.Zero(t, is.asked.Load())
}

// The token endpoint is read from the issuer's metadata; client
// credentials give every caller the gateway's one token.
func TestClientCredentialsGiveEveryCallerOneToken(t *testing.T) {
	is := newIssuer(t)
	is.set(func(w http.ResponseWriter, form url.Values) {
		jsonAnswer(w, 200, map[string]any{"access_token": jwtFor(form.Get("audience"), "gw"), "token_type": "Bearer", "expires_in": 3600})
	})
	h := provisioned(t, &Handler{Use: ClientCredentials, Issuer: is.URL, Client: Client{ID: "gw", Secret: "s", Method: SecretPost}, Audience: "https://reports"})
	for _, sub := range []string{"alice", "bob", ""} {
		got, err := through(t, h, is.URL, sub, nil)
		require.NoError(t, err)
		assert.Equal(t, "Bearer "+jwtFor("https://reports", "gw"), got.Header.Get("Authorization"))
	}
	assert.EqualValues(t, 1, is.asked.Load())
	assert.Equal(t, "client_credentials", is.forms[0].Get("grant_type"))
	// A refusal of the gateway's own token is the operator's to fix,
	// never the user's.
	is2 := newIssuer(t)
	is2.set(func(w http.ResponseWriter, _ url.Values) {
		jsonAnswer(w, 400, map[string]string{"error": "access_denied"})
	})
	h2 := provisioned(t, &Handler{Use: ClientCredentials, Issuer: is2.URL, Client: Client{ID: "gw", Secret: "s"}, Audience: "https://reports"})
	_, err := through(t, h2, is2.URL, "alice", nil)
	assert.Equal(t, envelope.HandoffUpstreamUnavailable, refusedWith(t, err).Envelope.Code)
	assert.Equal(t, "s", is.forms[0].Get("client_secret"), "client_secret_post")
	assert.Equal(t, is.URL+"/token", h.grant.asker.known())
}

// A reload that keeps a server's credential as it was keeps the tokens
// remembered: Caddy provisions the new config before it cleans up the
// old one, and the issuer is not asked again for every caller.
func TestAReloadKeepsTheTokensRemembered(t *testing.T) {
	is := newIssuer(t)
	old := exchanging(t, is, "https://crm")
	_, err := through(t, old, is.URL, "alice", nil)
	require.NoError(t, err)
	reloaded := exchanging(t, is, "https://crm")
	require.NoError(t, old.Cleanup())
	_, err = through(t, reloaded, is.URL, "alice", nil)
	require.NoError(t, err)
	assert.EqualValues(t, 1, is.asked.Load(), "the reloaded config remembers alice's token")
	other := exchanging(t, is, "https://tickets")
	_, err = through(t, other, is.URL, "alice", nil)
	require.NoError(t, err)
	assert.EqualValues(t, 2, is.asked.Load(), "another server's credential is its own")
}

// With on_behalf_of, the caller's token is exchanged as Entra ID's
// on-behalf-of flow asks: a JWT bearer grant naming the server by its
// scope; the token it gives must still be for the server's audience.
func TestOnBehalfOfAsksAsEntraIDDoes(t *testing.T) {
	is := newIssuer(t)
	is.set(func(w http.ResponseWriter, form url.Values) {
		jsonAnswer(w, 200, map[string]any{"access_token": jwtFor("api://crm", "exchanged-for-"+subjectOf(form.Get("assertion"))), "token_type": "Bearer", "expires_in": 3600})
	})
	h := provisioned(t, &Handler{Use: TokenExchange, OnBehalfOf: true, Issuer: is.URL, Client: Client{ID: "gw", Secret: "s", Method: SecretPost},
		Audience: "api://crm", Scopes: []string{"api://crm/.default"}})
	got, err := through(t, h, is.URL, "alice", nil)
	require.NoError(t, err)
	assert.Equal(t, "Bearer "+jwtFor("api://crm", "exchanged-for-alice"), got.Header.Get("Authorization"))
	f := is.forms[0]
	assert.Equal(t, "urn:ietf:params:oauth:grant-type:jwt-bearer", f.Get("grant_type"))
	assert.Equal(t, "on_behalf_of", f.Get("requested_token_use"))
	assert.Equal(t, jwtFor("https://gateway.example", "alice"), f.Get("assertion"))
	assert.Equal(t, "api://crm/.default", f.Get("scope"))
	assert.Empty(t, f.Get("subject_token"))
	assert.Empty(t, f.Get("audience"), "Entra names the server by its scope")
	assert.ErrorContains(t, (&Handler{Use: TokenExchange, OnBehalfOf: true, Issuer: is.URL, Client: Client{ID: "gw", Secret: "s"}, Audience: "api://crm"}).validate(), "scopes name the server")
}
