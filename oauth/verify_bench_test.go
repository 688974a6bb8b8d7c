package oauth

import (
	"context"
	"strings"
	"testing"
)

// What a token costs the gateway to check, with the issuer's keys held:
//
//	go test -run '^$' -bench Verify -benchmem ./oauth
//
// A token found valid within CacheFor costs a digest and a lookup, whatever
// its length; past it, a valid token and a forged one cost one ES256
// verification each (and a valid one the decoding of its claims); a
// token refused on its form (alg none, HMAC, not a JWT) costs its parse
// only; an untrusted issuer costs its parse only. A forged token's claims
// are never decoded: one of 15 KiB costs its parse, a digest of its bytes
// and the check.
func BenchmarkVerify(b *testing.B) {
	is, v, _, claims := setup(b)
	ctx := context.Background()
	valid := is.sign(b, "k1", claims)
	if _, err := v.Verify(ctx, valid, resource); err != nil {
		b.Fatal(err)
	}
	parts := strings.Split(valid, ".")
	other := is.sign(b, "k1", map[string]any{"iss": is.srv.URL, "sub": "x", "aud": resource, "exp": 1 << 40})
	forged := parts[0] + "." + parts[1] + "." + strings.Split(other, ".")[2]
	claims["pad"] = strings.Repeat("x", 11<<10)
	bigForged := strings.Split(is.sign(b, "k1", claims), ".")
	bigForged[2] = parts[2]
	delete(claims, "pad")
	claims["groups"] = groups(1, 280)
	large := is.sign(b, "k1", claims) // 14.8 KB, as an Entra ID token listing a user's groups
	delete(claims, "groups")
	claims["iss"] = "https://untrusted.example"
	untrusted := is.sign(b, "k1", claims)
	for _, tc := range []struct{ name, token string }{
		{"valid_remembered", valid},
		{"valid_remembered_15KiB", large},
	} {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				_, _ = v.Verify(ctx, tc.token, resource)
			}
		})
	}
	for _, tc := range []struct{ name, token string }{
		{"valid_checked", valid},
		{"valid_checked_15KiB", large},
		{"bad_signature", forged},
		{"bad_signature_15KiB", strings.Join(bigForged, ".")},
		{"alg_none", "eyJhbGciOiJub25lIn0." + parts[1] + "."},
		{"untrusted_issuer", untrusted},
	} {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				v.verified.forget() // the signature is checked each time
				_, _ = v.Verify(ctx, tc.token, resource)
			}
		})
	}
}
