package credential

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/caddymcp/caddy-mcp/envelope"
)

// Probes of an issuer that misbehaves, and of callers that would make the
// gateway misbehave. Whatever the issuer answers, the server never gets
// what it must not (the caller's own token, a token for another
// audience), the gateway's memory stays within its bounds, and the model
// is told.

// An issuer that answers 10 MiB costs the gateway at most the 1 MiB
// x/oauth2 reads of a token answer, and the call is told the issuer is
// out of reach.
func TestAnIssuerAnswering10MiBIsOutOfReach(t *testing.T) {
	for _, status := range []int{200, 400} {
		is := newIssuer(t)
		is.set(func(w http.ResponseWriter, _ url.Values) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(status)
			_, _ = w.Write([]byte(`{"access_token":"`))
			chunk := []byte(strings.Repeat("a", 64<<10))
			for range 160 {
				if _, err := w.Write(chunk); err != nil {
					return
				}
			}
		})
		h := exchanging(t, is, "https://crm")
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		_, err := through(t, h, is.URL, "alice", nil)
		runtime.ReadMemStats(&after)
		ref := refusedWith(t, err)
		assert.Equal(t, envelope.HandoffUpstreamUnavailable, ref.Envelope.Code, "status %d", status)
		assert.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(8<<20), "the answer is not read whole")
	}
}

// An issuer that never answers holds a call for the timeout, no longer;
// its server's next calls are answered at once for a while, without
// asking it again.
func TestAnIssuerThatNeverAnswersIsWaitedForTheTimeoutOnly(t *testing.T) {
	is := newIssuer(t)
	hung := make(chan struct{})
	t.Cleanup(func() { close(hung) })
	is.set(func(http.ResponseWriter, url.Values) { <-hung })
	h := provisioned(t, &Handler{Use: TokenExchange, Issuer: is.URL, Client: Client{ID: "gw", Secret: "s"}, Audience: "https://crm", Timeout: caddy.Duration(100 * time.Millisecond)})
	_, err := through(t, h, is.URL, "alice", nil)
	ref := refusedWith(t, err)
	assert.Equal(t, envelope.HandoffUpstreamUnavailable, ref.Envelope.Code)
	assert.Positive(t, ref.Envelope.RetryAfter)
	for _, sub := range []string{"alice", "bob", "carol"} {
		_, err = through(t, h, is.URL, sub, nil)
		assert.Equal(t, envelope.HandoffUpstreamUnavailable, refusedWith(t, err).Envelope.Code)
	}
	assert.EqualValues(t, 1, is.asked.Load(), "an issuer out of reach is not asked again at once")
}

// An issuer whose port is closed: the same.
func TestAnIssuerDownIsOutOfReach(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	h := provisioned(t, &Handler{Use: TokenExchange, Issuer: "http://" + addr, TokenEndpoint: "http://" + addr + "/token", Client: Client{ID: "gw", Secret: "s"}, Audience: "https://crm"})
	_, err = through(t, h, "http://"+addr, "alice", nil)
	ref := refusedWith(t, err)
	assert.Equal(t, envelope.HandoffUpstreamUnavailable, ref.Envelope.Code)
	assert.EqualValues(t, 5, ref.Envelope.RetryAfter)
}

// What an issuer answers that the server must not get: the caller's own
// token back, a token for another audience, a token that is no bearer
// token or would break the header.
func TestWhatTheServerMustNotGetIsNeverPassedOn(t *testing.T) {
	answers := map[string]func(form url.Values) map[string]any{
		"the caller's own token": func(form url.Values) map[string]any {
			return map[string]any{"access_token": form.Get("subject_token"), "token_type": "Bearer", "issued_token_type": tokenTypeAccess}
		},
		"a token for another audience": func(url.Values) map[string]any {
			return map[string]any{"access_token": jwtFor("https://tickets", "alice"), "token_type": "Bearer", "issued_token_type": tokenTypeAccess}
		},
		"a token that breaks the header": func(url.Values) map[string]any {
			return map[string]any{"access_token": "abc\r\nX-Admin: 1", "token_type": "Bearer"}
		},
		"a DPoP-bound token": func(url.Values) map[string]any {
			return map[string]any{"access_token": "opaque", "token_type": "DPoP"}
		},
		"a refresh token": func(url.Values) map[string]any {
			return map[string]any{"access_token": "opaque", "token_type": "Bearer", "issued_token_type": "urn:ietf:params:oauth:token-type:refresh_token"}
		},
	}
	for name, answer := range answers {
		t.Run(name, func(t *testing.T) {
			is := newIssuer(t)
			is.set(func(w http.ResponseWriter, form url.Values) { jsonAnswer(w, 200, answer(form)) })
			h := exchanging(t, is, "https://crm")
			got, err := through(t, h, is.URL, "alice", nil)
			assert.Nil(t, got, "the server got the request")
			assert.Equal(t, envelope.HandoffUpstreamUnavailable, refusedWith(t, err).Envelope.Code)
		})
	}
}

// A flood of distinct callers: the tokens remembered stay within their
// bound, and the issuer is asked at most its burst, then its rate; the
// callers past it are told to come back.
func TestAFloodOfCallersStaysWithinTheBounds(t *testing.T) {
	is := newIssuer(t)
	h := provisioned(t, &Handler{Use: TokenExchange, Issuer: is.URL, Client: Client{ID: "gw", Secret: "s"}, Audience: "https://crm", Cache: Cache{Tokens: 50, Bytes: 1 << 20}, Rate: 10, Burst: 100})
	now := time.Now()
	h.grant.clock = func() time.Time { return now }
	var waited time.Duration
	h.grant.wait = func(d time.Duration) { waited += d }
	busy := 0
	for i := range 1000 {
		_, err := through(t, h, is.URL, fmt.Sprintf("user-%d", i), nil)
		if err != nil {
			require.Equal(t, envelope.ServerBusy, refusedWith(t, err).Envelope.Code)
			busy++
		}
		n, bytes := h.grant.cache.size()
		require.LessOrEqual(t, n, 50)
		require.LessOrEqual(t, bytes, int64(1<<20))
	}
	// The burst, then what the rate gives within the longest wait.
	assert.EqualValues(t, 100+10, is.asked.Load())
	assert.Equal(t, 1000-110, busy)
	assert.LessOrEqual(t, waited, 10*maxWait, "each caller waited at most maxWait")
}

// The gateway authenticates with private_key_jwt: a client assertion its
// key signs, for the token endpoint, used once.
func TestPrivateKeyJWTSignsAClientAssertion(t *testing.T) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	der, err := x509.MarshalPKCS8PrivateKey(key)
	require.NoError(t, err)
	file := filepath.Join(t.TempDir(), "gateway.pem")
	require.NoError(t, os.WriteFile(file, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600))
	is := newIssuer(t)
	h := provisioned(t, &Handler{Use: TokenExchange, Issuer: is.URL, Client: Client{ID: "gw", Key: file, KeyID: "gw-1"}, Audience: "https://crm"})
	for _, sub := range []string{"alice", "bob"} {
		_, err = through(t, h, is.URL, sub, nil)
		require.NoError(t, err)
	}
	var ids []string
	for _, f := range is.forms {
		assert.Equal(t, "urn:ietf:params:oauth:client-assertion-type:jwt-bearer", f.Get("client_assertion_type"))
		tok, err := jwt.ParseSigned(f.Get("client_assertion"), []jose.SignatureAlgorithm{jose.ES256})
		require.NoError(t, err)
		assert.Equal(t, "gw-1", tok.Headers[0].KeyID)
		var c jwt.Claims
		require.NoError(t, tok.Claims(&key.PublicKey, &c))
		require.NoError(t, c.Validate(jwt.Expected{Issuer: "gw", Subject: "gw", AnyAudience: jwt.Audience{is.URL + "/token"}}))
		ids = append(ids, c.ID)
	}
	require.Len(t, ids, 2)
	assert.NotEqual(t, ids[0], ids[1], "an assertion is used once")
}

// A configuration that cannot work is refused at load, saying why.
func TestAConfigurationThatCannotWorkIsRefused(t *testing.T) {
	cases := map[string]*Handler{
		"use is required":                  {},
		"the issuer is required":           {Use: TokenExchange, TokenEndpoint: "https://a.example/token", Client: Client{ID: "gw", Secret: "s"}, Audience: "x"},
		"audience or resource is required": {Use: TokenExchange, Issuer: "https://a.example", Client: Client{ID: "gw", Secret: "s"}},
		"client_id is required":            {Use: ClientCredentials, Issuer: "https://a.example"},
		"needs a secret":                   {Use: ClientCredentials, Issuer: "https://a.example", Client: Client{ID: "gw"}},
		"https is required":                {Use: ClientCredentials, Issuer: "http://auth.example", Client: Client{ID: "gw", Secret: "s"}},
		"a header name and a value":        {Use: Header, Name: "X-Api-Key"},
		"line break":                       {Use: Header, Name: "X-Api-Key", Value: "a\r\nb"},
		"not a header name":                {Use: Header, Name: "X Api", Value: "a"},
		"not token_exchange":               {Use: "exchange"},
	}
	for want, h := range cases {
		assert.ErrorContains(t, h.validate(), want)
	}
}

// One caller's token refused with an error the issuer gives no other
// caller (invalid_token: its session ended at the issuer) is remembered
// for that token only: no caller makes the server unavailable to the
// others.
func TestOneCallersErrorIsItsOwn(t *testing.T) {
	is := newIssuer(t)
	good := is.exchange(3600)
	is.set(func(w http.ResponseWriter, form url.Values) {
		switch subjectOf(form.Get("subject_token")) {
		case "mallory":
			jsonAnswer(w, 400, map[string]string{"error": "invalid_token", "error_description": "Invalid token"})
		case "eve":
			jsonAnswer(w, 400, map[string]string{"error": "invalid_request", "error_description": "odd"})
		default:
			good(w, form)
		}
	})
	h := exchanging(t, is, "https://crm")
	for range 3 {
		_, err := through(t, h, is.URL, "mallory", nil)
		assert.Equal(t, envelope.AuthRequired, refusedWith(t, err).Envelope.Code)
		_, err = through(t, h, is.URL, "eve", nil)
		assert.Equal(t, envelope.HandoffUpstreamUnavailable, refusedWith(t, err).Envelope.Code)
		_, err = through(t, h, is.URL, "alice", nil)
		require.NoError(t, err, "alice is not refused for mallory's token")
	}
	assert.EqualValues(t, 3, is.asked.Load(), "each token asked once")
}

// A token the issuer gives for the server and for the gateway too
// (an audience mapper that adds both) is not passed on: the server could
// replay it against every other server behind the gateway.
func TestATokenAlsoForTheGatewayIsNotPassedOn(t *testing.T) {
	is := newIssuer(t)
	is.set(func(w http.ResponseWriter, _ url.Values) {
		enc := base64.RawURLEncoding.EncodeToString
		payload, _ := json.Marshal(map[string]any{"aud": []string{"https://crm", "https://gateway.example/"}, "sub": "alice"})
		jsonAnswer(w, 200, map[string]any{"access_token": enc([]byte(`{"alg":"ES256"}`)) + "." + enc(payload) + ".c2ln", "token_type": "Bearer"})
	})
	got, err := through(t, exchanging(t, is, "https://crm"), is.URL, "alice", nil)
	assert.Nil(t, got)
	assert.Equal(t, envelope.HandoffUpstreamUnavailable, refusedWith(t, err).Envelope.Code)
}

// An exchanged token is never given past the caller's own token's
// expiry; the client's request keeps the header it came with.
func TestAnExchangedTokenLivesNoLongerThanTheCallers(t *testing.T) {
	is := newIssuer(t)
	h := exchanging(t, is, "https://crm")
	now := time.Now()
	h.grant.clock = func() time.Time { return now }
	caller := http.Header{"Cookie": {"c=1"}}
	got, client, err := throughAt(h, is.URL, "alice", now.Add(10*time.Minute), caller)
	require.NoError(t, err)
	assert.NotEqual(t, got.Header.Get("Authorization"), client.Header.Get("Authorization"))
	assert.Equal(t, "c=1", client.Header.Get("Cookie"), "the client's request keeps its header")
	now = now.Add(10*time.Minute - margin + time.Second)
	_, _, err = throughAt(h, is.URL, "alice", now.Add(time.Hour), nil)
	require.NoError(t, err)
	assert.EqualValues(t, 2, is.asked.Load(), "the exchanged token lived no longer than the caller's")
}
