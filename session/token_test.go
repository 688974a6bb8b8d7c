package session

import (
	"encoding/base64"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var t0 = time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)

func ring(t testing.TB, secrets ...string) *Keyring {
	t.Helper()
	kr, err := FromSecrets(secrets)
	require.NoError(t, err)
	return kr
}

const (
	secretA = "0123456789abcdef0123456789abcdef"
	secretB = "fedcba9876543210fedcba9876543210"
)

func TestTokenRoundTrip(t *testing.T) {
	kr := ring(t, secretA)
	in := Session{Upstream: "10.0.0.2:9000", ID: "upstream-session-7f3a", Issued: t0}
	tok, err := kr.Seal(in, nil)
	require.NoError(t, err)
	assert.NotContains(t, tok, in.ID, "the upstream's id never shows")
	assert.NotContains(t, tok, in.Upstream)
	for _, c := range tok {
		// A header value any client sends back as it got it.
		assert.True(t, c == '-' || c == '_' || ('0' <= c && c <= '9') || ('a' <= c && c <= 'z') || ('A' <= c && c <= 'Z'), "%q", c)
	}
	out, err := kr.Open(tok, t0.Add(time.Hour), 24*time.Hour, nil)
	require.NoError(t, err)
	assert.Equal(t, in, out)

	again, err := kr.Seal(in, nil)
	require.NoError(t, err)
	assert.NotEqual(t, tok, again, "a fresh nonce for every token")
}

func TestTokenKeepsAnyUpstreamID(t *testing.T) {
	kr := ring(t, secretA)
	for _, id := range []string{"", "x", strings.Repeat("é", 3000), "\x00\xff", `"},{"id":1`} {
		tok, err := kr.Seal(Session{Upstream: "u:1", ID: id, Issued: t0}, nil)
		require.NoError(t, err)
		out, err := kr.Open(tok, t0, time.Hour, nil)
		require.NoError(t, err)
		assert.Equal(t, id, out.ID)
	}
}

func TestAnIDTooLongForATokenIsNotSealed(t *testing.T) {
	kr := ring(t, secretA)
	_, err := kr.Seal(Session{Upstream: "u:1", ID: strings.Repeat("x", 6200), Issued: t0}, nil)
	assert.ErrorContains(t, err, "over the 8192 bytes")
}

func TestTamperedTokensDoNotOpen(t *testing.T) {
	kr := ring(t, secretA)
	tok, err := kr.Seal(Session{Upstream: "10.0.0.1:9000", ID: "abc", Issued: t0}, nil)
	require.NoError(t, err)
	raw, err := base64.RawURLEncoding.DecodeString(tok)
	require.NoError(t, err)
	// Every bit of every byte: version, key id, nonce, ciphertext, tag.
	for i := range raw {
		for bit := range 8 {
			b := append([]byte(nil), raw...)
			b[i] ^= 1 << bit
			_, err := kr.Open(base64.RawURLEncoding.EncodeToString(b), t0, time.Hour, nil)
			require.ErrorIs(t, err, ErrMalformed, "byte %d bit %d", i, bit)
		}
	}
	for _, bad := range []string{"", "a", tok[:len(tok)-1], tok + "A", tok + "=", "!" + tok[1:], strings.Repeat("A", MaxToken+1), "MTIz"} {
		_, err := kr.Open(bad, t0, time.Hour, nil)
		assert.ErrorIs(t, err, ErrMalformed, "%.40q", bad)
	}
}

func TestTokenExpires(t *testing.T) {
	kr := ring(t, secretA)
	tok, err := kr.Seal(Session{Upstream: "u:1", ID: "s", Issued: t0}, nil)
	require.NoError(t, err)
	_, err = kr.Open(tok, t0.Add(24*time.Hour), 24*time.Hour, nil)
	assert.NoError(t, err, "valid through its ttl")
	_, err = kr.Open(tok, t0.Add(24*time.Hour+time.Second), 24*time.Hour, nil)
	assert.ErrorIs(t, err, ErrExpired)
}

func TestBoundTokenOpensForItsPrincipalOnly(t *testing.T) {
	kr := ring(t, secretA)
	alice, bob, none := PrincipalOf("Bearer alice"), PrincipalOf("Bearer bob"), PrincipalOf("")
	tok, err := kr.Seal(Session{Upstream: "u:1", ID: "s", Issued: t0}, &alice)
	require.NoError(t, err)
	_, err = kr.Open(tok, t0, time.Hour, &alice)
	assert.NoError(t, err)
	_, err = kr.Open(tok, t0, time.Hour, &bob)
	assert.ErrorIs(t, err, ErrPrincipal)
	_, err = kr.Open(tok, t0, time.Hour, &none)
	assert.ErrorIs(t, err, ErrPrincipal)
	_, err = kr.Open(tok, t0, time.Hour, nil)
	assert.NoError(t, err, "bind turned off: the token opens for anyone holding it")

	unbound, err := kr.Seal(Session{Upstream: "u:1", ID: "s", Issued: t0}, nil)
	require.NoError(t, err)
	_, err = kr.Open(unbound, t0, time.Hour, &alice)
	assert.ErrorIs(t, err, ErrPrincipal, "bind turned on: a token sealed before opens for no one")
}

func TestSecretRotation(t *testing.T) {
	old := ring(t, secretA)
	tok, err := old.Seal(Session{Upstream: "u:1", ID: "s", Issued: t0}, nil)
	require.NoError(t, err)

	rotated := ring(t, secretB, secretA)
	out, err := rotated.Open(tok, t0, time.Hour, nil)
	require.NoError(t, err, "the old secret still opens")
	assert.Equal(t, "s", out.ID)
	fresh, err := rotated.Seal(Session{Upstream: "u:1", ID: "s", Issued: t0}, nil)
	require.NoError(t, err)
	_, err = old.Open(fresh, t0, time.Hour, nil)
	assert.ErrorIs(t, err, ErrMalformed, "the new secret seals")

	_, err = ring(t, secretB).Open(tok, t0, time.Hour, nil)
	assert.ErrorIs(t, err, ErrMalformed, "a secret dropped opens nothing")
}

func TestSecretsTooShortAreRefused(t *testing.T) {
	_, err := FromSecrets([]string{secretA, "short"})
	require.ErrorContains(t, err, "secret 2 of 2: 5 bytes")
	assert.NotContains(t, err.Error(), "short", "a secret is never quoted")
	_, err = FromSecrets(nil)
	assert.Error(t, err)
}

func BenchmarkSeal(b *testing.B) {
	kr := ring(b, secretA)
	s := Session{Upstream: "10.0.0.2:9000", ID: "3RZHGKQ4XN7VYJ2M5WTB6CPD8E", Issued: t0}
	p := PrincipalOf("Bearer eyJhbGciOiJIUzI1NiJ9.e30.x")
	b.ReportAllocs()
	for b.Loop() {
		if _, err := kr.Seal(s, &p); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkOpen(b *testing.B) {
	kr := ring(b, secretA, secretB)
	s := Session{Upstream: "10.0.0.2:9000", ID: "3RZHGKQ4XN7VYJ2M5WTB6CPD8E", Issued: t0}
	p := PrincipalOf("Bearer eyJhbGciOiJIUzI1NiJ9.e30.x")
	tok, err := kr.Seal(s, &p)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := kr.Open(tok, t0, time.Hour, &p); err != nil {
			b.Fatal(err)
		}
	}
}
