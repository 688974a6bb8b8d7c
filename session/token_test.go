package session

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/binary"
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

// clientInit is what the Go SDK's client sends as its initialize params.
const clientInit = `{"protocolVersion":"2025-06-18","capabilities":{"roots":{"listChanged":true},"sampling":{}},"clientInfo":{"name":"acme-agent","version":"v1.4.2"}}`

func TestATokenCarriesTheClientsInitializeParams(t *testing.T) {
	kr := ring(t, secretA)
	alice := PrincipalOf("Bearer alice")
	in := Session{Upstream: "10.0.0.2:9000", ID: "upstream-session-7f3a", Issued: t0, Params: []byte(clientInit)}
	tok, err := kr.Seal(in, &alice)
	require.NoError(t, err)
	assert.NotContains(t, tok, "acme-agent", "the params are sealed")
	assert.Equal(t, tokenLen(in, true), len(tok))
	raw, err := base64.RawURLEncoding.DecodeString(tok)
	require.NoError(t, err)
	assert.Equal(t, byte(2), raw[0], "format version 2")

	out, err := kr.Open(tok, t0.Add(time.Hour), 24*time.Hour, &alice)
	require.NoError(t, err)
	assert.Equal(t, in, out)

	in.Params = nil
	tok, err = kr.Seal(in, nil)
	require.NoError(t, err)
	out, err = kr.Open(tok, t0, time.Hour, nil)
	require.NoError(t, err)
	assert.Equal(t, in, out, "no params: none come back, not an empty slice")
}

// sealV1 seals s as versions before params were carried did.
func sealV1(t *testing.T, kr *Keyring, s Session, p *Principal) string {
	t.Helper()
	k := kr.sealing
	plain := binary.BigEndian.AppendUint64(nil, uint64(s.Issued.Unix()))
	if p != nil {
		plain = append(append(plain, 1), p[:]...)
	} else {
		plain = append(plain, 0)
	}
	plain = binary.BigEndian.AppendUint16(plain, uint16(len(s.Upstream)))
	plain = append(append(plain, s.Upstream...), s.ID...)
	raw := append([]byte{1}, k.id[:]...)
	raw = append(raw, make([]byte, nonceSize)...)
	_, err := rand.Read(raw[headSize:])
	require.NoError(t, err)
	return base64.RawURLEncoding.EncodeToString(k.aead.Seal(raw, raw[headSize:], plain, raw[:headSize]))
}

func TestATokenOfTheFirstFormatStillOpens(t *testing.T) {
	kr := ring(t, secretA)
	alice := PrincipalOf("Bearer alice")
	in := Session{Upstream: "10.0.0.2:9000", ID: "upstream-session-7f3a", Issued: t0}
	out, err := kr.Open(sealV1(t, kr, in, &alice), t0, time.Hour, &alice)
	require.NoError(t, err)
	assert.Equal(t, in, out, "its session, with no params: it is not reopened")

	_, err = kr.Open(sealV1(t, kr, in, &alice), t0, time.Hour, nil)
	assert.NoError(t, err)
	_, err = kr.Open(sealV1(t, kr, in, nil), t0, time.Hour, &alice)
	assert.ErrorIs(t, err, ErrPrincipal)
	_, err = kr.Open(sealV1(t, kr, in, nil), t0.Add(2*time.Hour), time.Hour, nil)
	assert.ErrorIs(t, err, ErrExpired)
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
	s := Session{Upstream: "u:1", ID: strings.Repeat("x", 5000), Issued: t0, Params: []byte(`{"a":"` + strings.Repeat("p", maxInit-8) + `"}`)}
	_, err = kr.Seal(s, nil)
	assert.ErrorContains(t, err, "over the 8192 bytes", "the id and the params share the room")
	s.Params = nil
	tok, err := kr.Seal(s, nil)
	require.NoError(t, err)
	assert.LessOrEqual(t, len(tok), MaxToken)
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

// benchSessions are a session with no params, and one with the Go SDK
// client's initialize params.
var benchSessions = []struct {
	name string
	s    Session
}{
	{"no params", Session{Upstream: "10.0.0.2:9000", ID: "3RZHGKQ4XN7VYJ2M5WTB6CPD8E", Issued: t0}},
	{"initialize params", Session{Upstream: "10.0.0.2:9000", ID: "3RZHGKQ4XN7VYJ2M5WTB6CPD8E", Issued: t0, Params: []byte(clientInit)}},
}

func BenchmarkSeal(b *testing.B) {
	kr := ring(b, secretA)
	p := PrincipalOf("Bearer eyJhbGciOiJIUzI1NiJ9.e30.x")
	for _, bs := range benchSessions {
		b.Run(bs.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := kr.Seal(bs.s, &p); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkOpen(b *testing.B) {
	kr := ring(b, secretA, secretB)
	p := PrincipalOf("Bearer eyJhbGciOiJIUzI1NiJ9.e30.x")
	for _, bs := range benchSessions {
		tok, err := kr.Seal(bs.s, &p)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(bs.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := kr.Open(tok, t0, time.Hour, &p); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(len(tok)), "token-bytes")
		})
	}
}

// FuzzTokenDecode holds decoding to what was sealed: any session seals
// and opens to itself, and no plaintext of either format, however made,
// makes decode read past it.
func FuzzTokenDecode(f *testing.F) {
	f.Add("10.0.0.2:9000", "upstream-session-7f3a", []byte(clientInit), true, []byte{})
	f.Add("", "", []byte(nil), false, []byte("\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x05abcde\x00\x02{}"))
	f.Add("u:1", "\x00\xff", []byte("{}"), false, []byte("\x00\x00\x00\x00\x00\x00\x00\x00\x01"+strings.Repeat("d", 16)+"\xff\xff"))
	kr := ring(f, secretA)
	alice := PrincipalOf("Bearer alice")
	f.Fuzz(func(t *testing.T, upstream, id string, params []byte, bound bool, plain []byte) {
		in := Session{Upstream: upstream, ID: id, Issued: t0, Params: params}
		if len(params) == 0 {
			in.Params = nil
		}
		var p *Principal
		if bound {
			p = &alice
		}
		if tok, err := kr.Seal(in, p); err == nil {
			out, err := kr.Open(tok, t0, time.Hour, p)
			require.NoError(t, err)
			require.Equal(t, in, out)
		} else {
			require.Greater(t, tokenLen(in, bound), MaxToken, "only a session too long for a token is not sealed")
		}
		for _, v := range []byte{1, 2} {
			s, err := decode(v, plain, t0, time.Hour, nil)
			if err != nil {
				continue
			}
			require.LessOrEqual(t, len(s.Upstream)+len(s.ID)+len(s.Params), len(plain))
			if v == 1 {
				require.Nil(t, s.Params)
			}
		}
	})
}
