package credential

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/stretchr/testify/require"

	"github.com/caddymcp/caddy-mcp/feature"
)

// issuer is a token endpoint on a loopback listener that answers as a
// test tells it to, the way no real authorization server misbehaves on
// demand (10 MiB, never, the caller's own token, another audience). The
// tests against a real one (panva/oidc-provider) are in test/.
type issuer struct {
	*httptest.Server
	asked  atomic.Int64
	mu     sync.Mutex
	answer func(w http.ResponseWriter, form url.Values)
	forms  []url.Values
	basic  []string
}

func newIssuer(t *testing.T) *issuer {
	is := &issuer{}
	is.answer = is.exchange(3600)
	is.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/.well-known/openid-configuration" {
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"issuer":%q,"token_endpoint":%q,"code_challenge_methods_supported":["S256"]}`, is.URL, is.URL+"/token")
			return
		}
		if r.URL.Path != "/token" {
			http.NotFound(w, r)
			return
		}
		is.asked.Add(1)
		_ = r.ParseForm()
		user, _, _ := r.BasicAuth()
		is.mu.Lock()
		is.forms = append(is.forms, r.PostForm)
		is.basic = append(is.basic, user)
		answer := is.answer
		is.mu.Unlock()
		answer(w, r.PostForm)
	}))
	t.Cleanup(is.Close)
	return is
}

// set replaces how the issuer answers.
func (is *issuer) set(answer func(w http.ResponseWriter, form url.Values)) {
	is.mu.Lock()
	is.answer = answer
	is.mu.Unlock()
}

// exchange answers as a good issuer does: a JWT for the audience asked,
// for the subject's sub, lasting ttl seconds.
func (is *issuer) exchange(ttl int) func(w http.ResponseWriter, form url.Values) {
	return func(w http.ResponseWriter, form url.Values) {
		aud := form.Get("audience")
		if aud == "" {
			aud = form.Get("resource")
		}
		jsonAnswer(w, 200, map[string]any{
			"access_token": jwtFor(aud, "exchanged-for-"+subjectOf(form.Get("subject_token"))), "token_type": "Bearer",
			"issued_token_type": tokenTypeAccess, "expires_in": ttl,
		})
	}
}

func jsonAnswer(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// jwtFor is an unsigned JWT-shaped token for aud and sub (the gateway
// reads its audience without checking a signature: the server checks).
func jwtFor(aud, sub string) string {
	enc := base64.RawURLEncoding.EncodeToString
	payload, _ := json.Marshal(map[string]any{"aud": aud, "sub": sub})
	return enc([]byte(`{"alg":"ES256"}`)) + "." + enc(payload) + ".c2ln"
}

// subjectOf is the sub of a jwtFor token.
func subjectOf(token string) string {
	var claims struct{ Sub string }
	if parts := splitJWT(token); len(parts) == 3 {
		b, _ := base64.RawURLEncoding.DecodeString(parts[1])
		_ = json.Unmarshal(b, &claims)
	}
	return claims.Sub
}

func splitJWT(s string) []string {
	var parts []string
	start := 0
	for i := 0; i < len(s); i++ {
		if s[i] == '.' {
			parts = append(parts, s[start:i])
			start = i + 1
		}
	}
	return append(parts, s[start:])
}

// provisioned is h provisioned, cleaned up with the test.
func provisioned(t *testing.T, h *Handler) *Handler {
	t.Helper()
	ctx, cancel := caddy.NewContext(caddy.Context{Context: context.Background()})
	t.Cleanup(cancel)
	require.NoError(t, h.Provision(ctx))
	t.Cleanup(func() { _ = h.Cleanup() })
	return h
}

// exchanging is a token_exchange handler at is, for audience.
func exchanging(t *testing.T, is *issuer, audience string) *Handler {
	return provisioned(t, &Handler{Use: TokenExchange, Issuer: is.URL, Client: Client{ID: "gw", Secret: "s3cret"}, Audience: audience, Timeout: caddy.Duration(2 * time.Second)})
}

// through sends a request of the user sub (a verified token of issuer iss)
// through h, and returns the error h returned and the request the server
// got (nil when it got none).
func through(t *testing.T, h *Handler, iss, sub string, header http.Header) (*http.Request, error) {
	t.Helper()
	got, _, err := throughAt(h, iss, sub, time.Time{}, header)
	return got, err
}

// throughAt is through for a caller's token that expires at expiry (zero:
// not said), also returning the client's request as the gateway holds it
// after the route.
func throughAt(h *Handler, iss, sub string, expiry time.Time, header http.Header) (got, client *http.Request, err error) {
	r := httptest.NewRequest(http.MethodPost, "/mcp", nil)
	r = r.WithContext(context.WithValue(r.Context(), caddyhttp.VarsCtxKey, map[string]any{}))
	for k, v := range header {
		r.Header[k] = v
	}
	if sub != "" {
		token := jwtFor("https://gateway.example", sub)
		r.Header.Set("Authorization", "Bearer "+token)
		caddyhttp.SetVar(r.Context(), feature.VerifiedVar, &feature.Verified{
			Principal: &feature.Principal{Issuer: iss, Subject: sub, ClientID: "agent"}, Token: token, Audience: "https://gateway.example", Expiry: expiry,
		})
	}
	err = h.ServeHTTP(httptest.NewRecorder(), r, caddyhttp.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) error {
		got = r
		return nil
	}))
	return got, r, err
}

// refusedWith is the envelope code of err, a *feature.Refused.
func refusedWith(t *testing.T, err error) *feature.Refused {
	t.Helper()
	var ref *feature.Refused
	require.Truef(t, errors.As(err, &ref), "want a refusal, got %v", err)
	return ref
}
