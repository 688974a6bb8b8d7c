package oauth

import (
	"context"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/caddymcp/caddy-mcp/internal/cputime"
)

// badTokenChecks bounds the CPU one bad token may cost, on average, in
// signature checks of valid tokens as large as a token may be, measured
// beside it in the same test, so that the race detector (which weighs on
// every byte read) and a loaded machine weigh on both alike. What is
// bounded is CPU time, never wall time.
const badTokenChecks = 3

// signatureCPU is the CPU time v spends on n valid tokens it has not seen,
// each a signature check, of claims padded to the largest a token holds.
func signatureCPU(t *testing.T, is *testIssuer, v *Verifier, claims map[string]any, n int) time.Duration {
	t.Helper()
	tokens := make([]string, n)
	for i := range tokens {
		c := maps.Clone(claims)
		c["pad"] = strings.Repeat("x", MaxTokenSize*3/4-1024)
		c["jti"] = fmt.Sprint("reference-", i, "-", time.Now().UnixNano())
		tokens[i] = is.sign(t, "k1", c)
	}
	return cputime.Of(func() {
		for _, tok := range tokens {
			_, err := v.Verify(context.Background(), tok, resource)
			require.NoError(t, err)
		}
	})
}

// hostileTokens are tokens a client may send to make the gateway work:
// each is refused, for the reason given.
func hostileTokens(t *testing.T, is *testIssuer, claims map[string]any) map[string]struct {
	token string
	want  Reason
} {
	valid := is.sign(t, "k1", claims)
	parts := strings.Split(valid, ".")
	b64 := base64.RawURLEncoding.EncodeToString
	header := func(h string) string { return b64([]byte(h)) }

	// Algorithm confusion: HS256 keyed with the issuer's public key.
	is.mu.Lock()
	pub, err := x509.MarshalPKIXPublicKey(&is.keys["k1"].PublicKey)
	is.mu.Unlock()
	require.NoError(t, err)
	hmac, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.HS256, Key: pub}, (&jose.SignerOptions{}).WithHeader("kid", "k1"))
	require.NoError(t, err)
	confused, err := jwt.Signed(hmac).Claims(claims).Serialize()
	require.NoError(t, err)

	// Claims as large as a token may be, with a forged signature.
	big := map[string]any{}
	for k, v := range claims {
		big[k] = v
	}
	big["pad"] = strings.Repeat("x", MaxTokenSize*3/4-1024)
	payload, err := json.Marshal(big)
	require.NoError(t, err)
	deep := strings.Repeat("[", 4000) + strings.Repeat("]", 4000)

	return map[string]struct {
		token string
		want  Reason
	}{
		"a forged signature":             {parts[0] + "." + parts[1] + "." + strings.Split(is.sign(t, "k1", map[string]any{"sub": "x"}), ".")[2], BadSignature},
		"alg none":                       {header(`{"alg":"none"}`) + "." + parts[1] + ".", Malformed},
		"HS256 with the public key":      {confused, Malformed},
		"a key the issuer does not have": {is.sign(t, "made-up", claims), UnknownKey},
		"an untrusted issuer":            {header(`{"alg":"ES256","kid":"k1"}`) + "." + b64([]byte(`{"iss":"https://evil.example"}`)) + "." + parts[2], WrongIssuer},
		"claims of 11 KiB, forged":       {parts[0] + "." + b64(payload) + "." + parts[2], BadSignature},
		"claims nested 4,000 deep":       {parts[0] + "." + b64([]byte(`{"iss":`+deep+`}`)) + "." + parts[2], Malformed},
		"over 16 KiB":                    {strings.Repeat("a", MaxTokenSize+1), Malformed},
		"dots":                           {strings.Repeat(".", 4000), Malformed},
		"not a JWT":                      {"opaque-looking-token", Malformed},
	}
}

// Every kind of bad token costs at most about a signature check, and no
// fetch storm: tokens naming made-up keys cost one fetch of the issuer's
// keys per RefetchAfter, however many arrive.
func TestBadTokensCostBoundedCPUAndNoFetchStorm(t *testing.T) {
	is, v, c, claims := setup(t)
	ctx := context.Background()
	_, err := v.Verify(ctx, is.sign(t, "k1", claims), resource) // the keys are held
	require.NoError(t, err)
	fetches := is.fetches.Load()

	const n = 200
	reference := signatureCPU(t, is, v, claims, n/4) * 4
	for name, tt := range hostileTokens(t, is, claims) {
		t.Run(name, func(t *testing.T) {
			var last error
			spent := cputime.Of(func() {
				for range n {
					_, last = v.Verify(ctx, tt.token, resource)
				}
			})
			assert.Equal(t, tt.want, reason(t, last))
			t.Logf("%v CPU per token, %v per signature check", spent/n, reference/n)
			assert.Less(t, spent, badTokenChecks*reference, "CPU per token, in signature checks")
		})
	}
	assert.LessOrEqual(t, is.fetches.Load()-fetches, int32(1), "a made-up key costs one fetch per RefetchAfter, not one per token")
	c.advance(RefetchAfter)
	_, err = v.Verify(ctx, is.sign(t, "made-up", claims), resource)
	assert.Equal(t, UnknownKey, reason(t, err))
	assert.LessOrEqual(t, is.fetches.Load()-fetches, int32(2))
}

// Made-up opaque tokens cost the issuer IntrospectionRate requests a
// second at most, and each the gateway little CPU.
func TestMadeUpOpaqueTokensCostTheIssuerABoundedRate(t *testing.T) {
	is, v, _, _ := opaque(t)
	ref, refVerifier, _, claims := setup(t)
	reference := signatureCPU(t, ref, refVerifier, claims, 50) * 10
	ctx := context.Background()
	const n = 500
	spent := cputime.Of(func() {
		for i := range n {
			_, _ = v.Verify(ctx, fmt.Sprint("made-up-", i), resource)
		}
	})
	t.Logf("%v CPU per token, %v per signature check", spent/n, reference/n)
	assert.Less(t, spent, badTokenChecks*reference, "CPU per token, in signature checks")
	assert.EqualValues(t, IntrospectionBurst, is.asked.Load(), "the clock did not move: the burst, and no more")
}

// One token, one spelling: each part's base64 ends without bits past its
// last byte, whatever its length.
func TestCanonicalRefusesBitsPastTheEndOfAnyPart(t *testing.T) {
	b64 := base64.RawURLEncoding.EncodeToString
	for _, n := range []int{1, 2, 3, 4, 5, 6} {
		part := b64([]byte(strings.Repeat("\xff", n)))
		assert.True(t, canonical(part+"."+part+"."+part), "%d bytes", n)
		if n%3 == 0 {
			continue // no bits past the end to set
		}
		last := part[len(part)-1] + 1 // 'w' to 'x', '8' to '9'
		spelt := part[:len(part)-1] + string(last)
		for _, tok := range []string{spelt + ".a." + part, part + "." + spelt + "." + part, part + "." + part + "." + spelt} {
			assert.False(t, canonical(tok), "%d bytes: %s", n, tok)
		}
	}
	assert.False(t, canonical("abcde.x.y"), "a length base64 cannot have")
}

// A token naming its issuer twice says two things about whose keys check
// it: refused, even signed by the issuer. ("ISS" is another claim: JOSE
// names are case-sensitive.)
func TestATokenNamingItsIssuerTwiceIsRefused(t *testing.T) {
	is, v, _, claims := setup(t)
	parts := strings.Split(is.sign(t, "k1", claims), ".")
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	require.NoError(t, err)
	is.mu.Lock()
	k := is.keys["k1"]
	is.mu.Unlock()
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: k}, (&jose.SignerOptions{}).WithHeader("kid", "k1").WithType("at+jwt"))
	require.NoError(t, err)
	for _, twice := range []string{
		`{"iss":"https://evil.example",` + string(payload[1:]),
		string(payload[:len(payload)-1]) + `,"iss":"https://evil.example"}`,
	} {
		jws, err := signer.Sign([]byte(twice))
		require.NoError(t, err)
		signed, err := jws.CompactSerialize()
		require.NoError(t, err)
		_, err = v.Verify(context.Background(), signed, resource)
		assert.Equal(t, Malformed, reason(t, err), twice)
	}
}
