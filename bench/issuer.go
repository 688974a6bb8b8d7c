package main

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

// The issuer of the configurations that require tokens: an Ed25519 key set
// on a loopback listener of the benchmark's own process, and one access
// token signed with it, which every request of those configurations
// carries. The gateway fetches the keys once, checks the token's signature
// once, and remembers it: what is measured is a request with a valid token,
// as a client sends request after request with the token it was given.
//
// Its token endpoint (POST /token) exchanges that token for one meant for
// another audience (RFC 8693), for the credential configuration
// (credential.go), and counts the exchanges it served.

// issuerMark stands for the issuer's URL in a configuration's Handler.
const issuerMark = "ISSUER_URL"

// benchResource is the resource the gateway is configured as, and the
// token's audience.
const benchResource = "http://bench.invalid/mcp"

// authorizationHandler is the mcp block of the authorization
// configuration.
const authorizationHandler = "mcp {\n\tauthorization {\n\t\tissuer " + issuerMark + " jwks " + issuerMark + "/jwks\n\t\tresource " + benchResource + "\n\t}\n}"

type issuer struct {
	URL   string
	Token string
	srv   *http.Server
	// pub checks the subject tokens of exchanges; signer signs every
	// token.
	pub    ed25519.PublicKey
	signer jose.Signer
	// exchanges counts the token exchanges served.
	exchanges atomic.Uint64
}

// startIssuer serves a new key set and its token endpoint, and signs a
// token for benchResource, valid for a day.
func startIssuer() (*issuer, error) {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, err
	}
	keys, err := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: pub, KeyID: "bench", Algorithm: string(jose.EdDSA), Use: "sig"}}})
	if err != nil {
		return nil, err
	}
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.EdDSA, Key: priv}, (&jose.SignerOptions{}).WithHeader("kid", "bench").WithType("at+jwt"))
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	is := &issuer{URL: "http://" + ln.Addr().String(), pub: pub, signer: signer}
	if is.Token, err = is.mint("bench-user", benchResource, "bench", "tools:call", 24*time.Hour, nil); err != nil {
		_ = ln.Close()
		return nil, err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /jwks", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(keys)
	})
	mux.HandleFunc("POST /token", is.exchange)
	is.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = is.srv.Serve(ln) }()
	return is, nil
}

// mint signs an access token of the issuer's for subject and audience,
// valid for life; act, if any, names the party it was exchanged for (RFC
// 8693 §4.1).
func (is *issuer) mint(subject, audience, clientID, scope string, life time.Duration, act map[string]any) (string, error) {
	now := time.Now()
	claims := map[string]any{
		"iss": is.URL, "sub": subject, "aud": audience, "client_id": clientID,
		"scope": scope, "iat": now.Unix(), "exp": now.Add(life).Unix(),
	}
	if act != nil {
		claims["act"] = act
	}
	return jwt.Signed(is.signer).Claims(claims).Serialize()
}

// Exchanges is how many token exchanges the issuer served.
func (is *issuer) Exchanges() uint64 { return is.exchanges.Load() }

func (is *issuer) Close() { _ = is.srv.Close() }
