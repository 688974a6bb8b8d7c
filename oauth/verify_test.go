package oauth

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// testIssuer is an authorization server's metadata and key set on a real
// loopback listener, which can rotate its keys, fail, or answer oversized
// sets on demand: the misbehaviours a real server cannot be made to show.
// The tokens it signs are built here only to be refused or accepted: the
// gateway's tests take theirs from a real authorization server.
type testIssuer struct {
	srv     *httptest.Server
	mu      sync.Mutex
	keys    map[string]*ecdsa.PrivateKey // by kid, published
	extra   []jose.JSONWebKey            // published as they are
	down    bool
	huge    bool
	fetches atomic.Int32
	// introspection: introspect.go's tests
	introspection
}

func newTestIssuer(t testing.TB) *testIssuer {
	is := &testIssuer{keys: map[string]*ecdsa.PrivateKey{}}
	is.rotate(t, "k1")
	mux := http.NewServeMux()
	mux.HandleFunc("/.well-known/oauth-authorization-server", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{
			"issuer":                           is.srv.URL,
			"authorization_endpoint":           is.srv.URL + "/authorize",
			"token_endpoint":                   is.srv.URL + "/token",
			"jwks_uri":                         is.srv.URL + "/jwks",
			"introspection_endpoint":           is.srv.URL + "/introspect",
			"response_types_supported":         []string{"code"},
			"code_challenge_methods_supported": []string{"S256"},
		})
	})
	mux.HandleFunc("/jwks", func(w http.ResponseWriter, r *http.Request) {
		is.fetches.Add(1)
		is.mu.Lock()
		defer is.mu.Unlock()
		if is.down {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		if is.huge {
			_, _ = w.Write([]byte(`{"keys":[],"pad":"` + strings.Repeat("x", MaxKeySet) + `"}`))
			return
		}
		set := jose.JSONWebKeySet{Keys: append([]jose.JSONWebKey(nil), is.extra...)}
		for kid, k := range is.keys {
			set.Keys = append(set.Keys, jose.JSONWebKey{Key: &k.PublicKey, KeyID: kid, Algorithm: string(jose.ES256), Use: "sig"})
		}
		_ = json.NewEncoder(w).Encode(set)
	})
	mux.HandleFunc("POST /introspect", is.introspect)
	is.srv = httptest.NewServer(mux)
	t.Cleanup(is.srv.Close)
	return is
}

// rotate publishes a new key, kid, in place of the others.
func (is *testIssuer) rotate(t testing.TB, kid string) {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	is.mu.Lock()
	defer is.mu.Unlock()
	clear(is.keys)
	is.keys[kid] = k
}

func (is *testIssuer) set(f func()) {
	is.mu.Lock()
	defer is.mu.Unlock()
	f()
}

// sign signs claims with key kid (which need not be published).
func (is *testIssuer) sign(t testing.TB, kid string, claims map[string]any) string {
	is.mu.Lock()
	k := is.keys[kid]
	is.mu.Unlock()
	if k == nil {
		var err error
		k, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		require.NoError(t, err)
	}
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: k}, (&jose.SignerOptions{}).WithHeader("kid", kid).WithType("at+jwt"))
	require.NoError(t, err)
	tok, err := jwt.Signed(signer).Claims(claims).Serialize()
	require.NoError(t, err)
	return tok
}

const resource = "https://mcp.example.com/mcp"

type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time          { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) advance(d time.Duration) { c.mu.Lock(); defer c.mu.Unlock(); c.now = c.now.Add(d) }

func setup(t testing.TB) (*testIssuer, *Verifier, *clock, map[string]any) {
	is := newTestIssuer(t)
	c := &clock{now: time.Unix(1_800_000_000, 0)}
	v := NewVerifier([]Issuer{{URL: is.srv.URL}}, 30*time.Second, is.srv.Client(), c.Now, nil)
	claims := map[string]any{
		"iss": is.srv.URL, "sub": "user-1", "aud": resource, "client_id": "agent-7",
		"scope": "tools:read tools:call", "iat": c.now.Unix(), "exp": c.now.Add(time.Hour).Unix(),
	}
	return is, v, c, claims
}

func reason(t *testing.T, err error) Reason {
	t.Helper()
	var e *Error
	require.ErrorAs(t, err, &e)
	return e.Reason
}

func TestATokenFromTheIssuerForThisResourceNamesItsPrincipal(t *testing.T) {
	is, v, _, claims := setup(t)
	p, err := v.Verify(context.Background(), is.sign(t, "k1", claims), resource)
	require.NoError(t, err)
	assert.Equal(t, "user-1", p.Subject)
	assert.Equal(t, "agent-7", p.ClientID)
	assert.Equal(t, []string{"tools:read", "tools:call"}, p.Scopes)
	assert.Equal(t, is.srv.URL, p.Issuer)
	assert.JSONEq(t, `"user-1"`, string(p.Claims["sub"]))

	claims["aud"] = []string{"https://other.example.com", resource + "/"}
	claims["scp"], claims["scope"] = []string{"a", "b"}, nil
	p, err = v.Verify(context.Background(), is.sign(t, "k1", claims), resource)
	require.NoError(t, err, "one of its audiences is this resource, written with a trailing slash")
	assert.Equal(t, []string{"a", "b"}, p.Scopes)
}

func TestTokensOutsideTheirLifetimeOrForAnotherResourceAreRefused(t *testing.T) {
	is, v, c, claims := setup(t)
	ctx := context.Background()
	tok := is.sign(t, "k1", claims)

	c.advance(time.Hour + 20*time.Second)
	_, err := v.Verify(ctx, tok, resource)
	require.NoError(t, err, "within the leeway")
	c.advance(20 * time.Second)
	_, err = v.Verify(ctx, tok, resource)
	assert.Equal(t, Expired, reason(t, err))

	is, v, c, claims = setup(t)
	claims["nbf"] = c.now.Add(time.Minute).Unix()
	_, err = v.Verify(ctx, is.sign(t, "k1", claims), resource)
	assert.Equal(t, NotYetValid, reason(t, err))

	is, v, _, claims = setup(t)
	delete(claims, "exp")
	_, err = v.Verify(ctx, is.sign(t, "k1", claims), resource)
	assert.Equal(t, Malformed, reason(t, err), "a token that never expires")

	is, v, _, claims = setup(t)
	claims["aud"] = "https://mcp.example.com/other"
	_, err = v.Verify(ctx, is.sign(t, "k1", claims), resource)
	assert.Equal(t, WrongAudience, reason(t, err))
	delete(claims, "aud")
	_, err = v.Verify(ctx, is.sign(t, "k1", claims), resource)
	assert.Equal(t, WrongAudience, reason(t, err), "a token for no resource in particular")

	claims["aud"] = resource
	claims["iss"] = "https://issuer.example.com"
	fetches := is.fetches.Load()
	_, err = v.Verify(ctx, is.sign(t, "k1", claims), resource)
	assert.Equal(t, WrongIssuer, reason(t, err))
	assert.Equal(t, fetches, is.fetches.Load(), "an untrusted issuer costs no fetch")
}

func TestForgedTokensAreRefused(t *testing.T) {
	is, v, _, claims := setup(t)
	ctx := context.Background()
	tok := is.sign(t, "k1", claims)
	parts := strings.Split(tok, ".")

	// The payload changed after signing.
	claims["sub"] = "admin"
	forged, _ := json.Marshal(claims)
	tampered := parts[0] + "." + base64.RawURLEncoding.EncodeToString(forged) + "." + parts[2]
	_, err := v.Verify(ctx, tampered, resource)
	assert.Equal(t, BadSignature, reason(t, err))

	// Signed by a key the issuer never published, under its key's id.
	other, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: other}, (&jose.SignerOptions{}).WithHeader("kid", "k1"))
	require.NoError(t, err)
	impostor, err := jwt.Signed(signer).Claims(claims).Serialize()
	require.NoError(t, err)
	_, err = v.Verify(ctx, impostor, resource)
	assert.Equal(t, BadSignature, reason(t, err))

	// alg none, and HMAC keyed with anything: refused before any key.
	fetches := is.fetches.Load()
	for _, alg := range []string{"none", "HS256"} {
		head := base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"` + alg + `","kid":"k1"}`))
		_, err := v.Verify(ctx, head+"."+parts[1]+".", resource)
		assert.Equal(t, Malformed, reason(t, err), alg)
		_, err = v.Verify(ctx, head+"."+parts[1]+"."+parts[2], resource)
		assert.Equal(t, Malformed, reason(t, err), alg)
	}
	hs, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.HS256, Key: []byte("secret-secret-secret-secret-32b!")}, nil)
	require.NoError(t, err)
	hmacTok, err := jwt.Signed(hs).Claims(claims).Serialize()
	require.NoError(t, err)
	_, err = v.Verify(ctx, hmacTok, resource)
	assert.Equal(t, Malformed, reason(t, err))

	for _, junk := range []string{"", "abc", "a.b.c", strings.Repeat("a", MaxTokenSize+1)} {
		_, err := v.Verify(ctx, junk, resource)
		assert.Equal(t, Malformed, reason(t, err), "%.20q", junk)
	}
	assert.Equal(t, fetches, is.fetches.Load(), "a token refused on its form costs no fetch")
}

func TestRotatedKeysArePickedUpAndMadeUpKeyIDsCostOneFetchAWhile(t *testing.T) {
	is, v, c, claims := setup(t)
	ctx := context.Background()
	_, err := v.Verify(ctx, is.sign(t, "k1", claims), resource)
	require.NoError(t, err)
	require.EqualValues(t, 1, is.fetches.Load(), "discovery, then one fetch")

	is.rotate(t, "k2")
	c.advance(RefetchAfter)
	_, err = v.Verify(ctx, is.sign(t, "k2", claims), resource)
	require.NoError(t, err, "a new key id: fetched again, no restart")
	assert.EqualValues(t, 2, is.fetches.Load())

	// A client making up key ids: one fetch per RefetchAfter, however many
	// tokens, however concurrent.
	var wg sync.WaitGroup
	for i := range 50 {
		wg.Go(func() {
			_, err := v.Verify(ctx, is.sign(t, "made-up-"+string(rune('a'+i%26)), claims), resource)
			assert.Equal(t, UnknownKey, reason(t, err))
		})
	}
	wg.Wait()
	assert.EqualValues(t, 2, is.fetches.Load(), "within RefetchAfter of the last fetch")
	c.advance(RefetchAfter)
	for range 10 {
		_, err := v.Verify(ctx, is.sign(t, "made-up", claims), resource)
		assert.Equal(t, UnknownKey, reason(t, err))
	}
	assert.EqualValues(t, 3, is.fetches.Load())
	_, err = v.Verify(ctx, is.sign(t, "k2", claims), resource)
	require.NoError(t, err, "the keys held still serve")
}

func TestAnIssuerThatCannotBeReachedIsSaidSoAndHeldKeysServeMeanwhile(t *testing.T) {
	is, v, c, claims := setup(t)
	ctx := context.Background()
	is.set(func() { is.down = true })
	_, err := v.Verify(ctx, is.sign(t, "k1", claims), resource)
	assert.Equal(t, IssuerUnavailable, reason(t, err))
	_, err = v.Verify(ctx, is.sign(t, "k1", claims), resource)
	assert.Equal(t, IssuerUnavailable, reason(t, err))
	assert.EqualValues(t, 1, is.fetches.Load(), "a failed fetch is not tried again at once")

	is.set(func() { is.down = false })
	c.advance(RefetchAfter)
	tok := is.sign(t, "k1", claims)
	_, err = v.Verify(ctx, tok, resource)
	require.NoError(t, err)

	// The keys age past KeysMaxAge while the issuer is down: they serve.
	is.set(func() { is.down = true })
	c.advance(KeysMaxAge)
	claims["iat"], claims["exp"] = c.Now().Unix(), c.Now().Add(time.Hour).Unix()
	_, err = v.Verify(ctx, is.sign(t, "k1", claims), resource)
	require.NoError(t, err)
	// They serve at once, and a fetch refreshes them meanwhile: tried
	// once, and failed.
	require.Eventually(t, func() bool { return is.fetches.Load() == 3 }, 10*time.Second, time.Millisecond)
	require.Eventually(t, func() bool { // the fetch is over
		held := v.issuers[is.srv.URL]
		if !held.fetching.TryLock() {
			return false
		}
		held.fetching.Unlock()
		return true
	}, 10*time.Second, time.Millisecond)
	_, err = v.Verify(ctx, is.sign(t, "k1", claims), resource)
	require.NoError(t, err)
	assert.EqualValues(t, 3, is.fetches.Load(), "not again within RefetchAfter")

	is.set(func() { is.down, is.huge = false, true })
	v2 := NewVerifier([]Issuer{{URL: is.srv.URL, JWKS: is.srv.URL + "/jwks"}}, 0, is.srv.Client(), c.Now, nil)
	_, err = v2.Verify(ctx, is.sign(t, "k1", claims), resource)
	assert.Equal(t, IssuerUnavailable, reason(t, err), "a key set over MaxKeySet is not read")

	gone := NewVerifier([]Issuer{{URL: "http://127.0.0.1:1"}}, 0, http.DefaultClient, c.Now, nil)
	claims["iss"] = "http://127.0.0.1:1"
	_, err = gone.Verify(ctx, is.sign(t, "k1", claims), resource)
	assert.Equal(t, IssuerUnavailable, reason(t, err))
}

func TestAPublishedSymmetricKeyIsNeverHeld(t *testing.T) {
	is, v, _, claims := setup(t)
	secret := []byte("secret-secret-secret-secret-32b!")
	is.set(func() {
		is.extra = []jose.JSONWebKey{{Key: secret, KeyID: "k0", Algorithm: string(jose.HS256), Use: "sig"}}
	})
	_, err := v.Verify(context.Background(), is.sign(t, "k1", claims), resource)
	require.NoError(t, err)
	held := v.issuers[is.srv.URL]
	held.mu.Lock()
	defer held.mu.Unlock()
	require.Len(t, held.keys, 1, "the symmetric key is dropped")
	assert.Equal(t, "k1", held.keys[0].KeyID)
}

func TestAVerifiedTokenIsRememberedForCacheForAtMost(t *testing.T) {
	is, v, c, claims := setup(t)
	ctx := context.Background()
	tok := is.sign(t, "k1", claims)
	first, err := v.Verify(ctx, tok, resource)
	require.NoError(t, err)
	again, err := v.Verify(ctx, tok, resource)
	require.NoError(t, err)
	assert.Same(t, first, again, "not checked again")
	_, err = v.Verify(ctx, tok, "https://mcp.example.com/other")
	assert.Equal(t, WrongAudience, reason(t, err), "remembered for its resource only")

	c.advance(CacheFor)
	later, err := v.Verify(ctx, tok, resource)
	require.NoError(t, err)
	assert.NotSame(t, first, later, "checked again after CacheFor")

	// A token that expires sooner is remembered until then only.
	claims["exp"] = c.Now().Add(time.Minute).Unix()
	short := is.sign(t, "k1", claims)
	_, err = v.Verify(ctx, short, resource)
	require.NoError(t, err)
	c.advance(time.Minute + 31*time.Second)
	_, err = v.Verify(ctx, short, resource)
	assert.Equal(t, Expired, reason(t, err))
}

func TestTheCacheHoldsMaxCachedTokensAtMost(t *testing.T) {
	var c tokenCache
	now := time.Unix(0, 0)
	p := &Principal{}
	for i := range MaxCached + 100 {
		c.put(cacheKey(fmt.Sprint(i), resource), cached{p: p, until: now.Add(time.Minute)}, now)
	}
	assert.Len(t, c.m, MaxCached)
	e, ok := c.get(cacheKey(fmt.Sprint(MaxCached+99), resource), now)
	assert.True(t, ok, "the newest is kept")
	assert.Same(t, p, e.p)
}

func TestDiscoveryAsksNothingOfTheIssuersFlowsButRefusesAKeySetInTheClear(t *testing.T) {
	for _, c := range []struct {
		name string
		meta map[string]any
		ok   bool
	}{
		{"no PKCE advertised", map[string]any{"jwks_uri": "/jwks"}, true},
		{"a jwks_uri in the clear", map[string]any{"jwks_uri": "http://keys.example/jwks"}, false},
		{"another issuer's metadata", map[string]any{"jwks_uri": "/jwks", "issuer": "https://other.example"}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			is := newTestIssuer(t)
			mux := http.NewServeMux()
			mux.HandleFunc("/.well-known/oauth-authorization-server", func(w http.ResponseWriter, r *http.Request) {
				meta := map[string]any{"issuer": is.srv.URL}
				for k, v := range c.meta {
					meta[k] = v
				}
				if j, _ := meta["jwks_uri"].(string); strings.HasPrefix(j, "/") {
					meta["jwks_uri"] = is.srv.URL + j
				}
				w.Header().Set("Content-Type", "application/json")
				_ = json.NewEncoder(w).Encode(meta)
			})
			mux.Handle("/jwks", is.srv.Config.Handler)
			is.srv.Config.Handler = mux
			c2 := &clock{now: time.Unix(1_800_000_000, 0)}
			v := NewVerifier([]Issuer{{URL: is.srv.URL}}, 0, is.srv.Client(), c2.Now, nil)
			_, err := v.Verify(context.Background(), is.sign(t, "k1", map[string]any{"iss": is.srv.URL, "sub": "s", "aud": resource, "exp": c2.now.Add(time.Hour).Unix()}), resource)
			if c.ok {
				assert.NoError(t, err)
			} else {
				assert.Equal(t, IssuerUnavailable, reason(t, err))
			}
		})
	}
}

func TestTokensOfAnotherKindOrSpellingAreRefused(t *testing.T) {
	is, v, _, claims := setup(t)
	ctx := context.Background()
	signWith := func(header map[jose.HeaderKey]any, claims map[string]any) string {
		is.mu.Lock()
		k := is.keys["k1"]
		is.mu.Unlock()
		opts := (&jose.SignerOptions{}).WithHeader("kid", "k1")
		for h, val := range header {
			opts = opts.WithHeader(h, val)
		}
		signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: k}, opts)
		require.NoError(t, err)
		tok, err := jwt.Signed(signer).Claims(claims).Serialize()
		require.NoError(t, err)
		return tok
	}
	for _, typ := range []string{"JWT", "at+jwt", "application/at+JWT"} {
		_, err := v.Verify(ctx, signWith(map[jose.HeaderKey]any{jose.HeaderType: typ}, claims), resource)
		assert.NoError(t, err, typ)
	}
	_, err := v.Verify(ctx, signWith(map[jose.HeaderKey]any{jose.HeaderType: "logout+jwt"}, claims), resource)
	assert.Equal(t, Malformed, reason(t, err), "another kind of token signed with the same keys")

	noSub := maps.Clone(claims)
	delete(noSub, "sub")
	_, err = v.Verify(ctx, is.sign(t, "k1", noSub), resource)
	assert.Equal(t, Malformed, reason(t, err), "RFC 9068 requires sub")

	// The same token with bits set past the end of its signature's base64.
	tok := is.sign(t, "k1", claims)
	last := tok[len(tok)-1]
	alphabet := "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	i := strings.IndexByte(alphabet, last)
	variant := tok[:len(tok)-1] + string(alphabet[i^1])
	_, err = v.Verify(ctx, variant, resource)
	assert.Equal(t, Malformed, reason(t, err))
	_, err = v.Verify(ctx, tok, resource)
	assert.NoError(t, err)
}

func TestATokenNamingNoKeyIsCheckedAgainstASetOfOneOnly(t *testing.T) {
	is, v, _, claims := setup(t)
	tok := is.sign(t, "", claims)
	_, err := v.Verify(context.Background(), tok, resource)
	assert.Equal(t, BadSignature, reason(t, err), "no kid, a set of one: checked against that key, which did not sign it")

	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: k}, nil)
	require.NoError(t, err)
	noKid, err := jwt.Signed(signer).Claims(claims).Serialize()
	require.NoError(t, err)
	is.set(func() { is.keys["k2"] = k })
	v2 := NewVerifier([]Issuer{{URL: is.srv.URL + "/"}}, 0, is.srv.Client(), nil, nil)
	_, err = v2.Verify(context.Background(), noKid, resource)
	assert.Equal(t, UnknownKey, reason(t, err), "two keys published: a token must name its own; and the issuer matched with its trailing slash")
}
