package main

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"net"
	"net/http"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

// The authorization configuration's issuer: an Ed25519 key set on a
// loopback listener of the benchmark's own process, and one access token
// signed with it, which every request of the configuration carries. The
// gateway fetches the keys once, checks the token's signature once, and
// remembers it: what is measured is a request with a valid token, as a
// client sends request after request with the token it was given.

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
}

// startIssuer serves a new key set and signs a token for benchResource,
// valid for a day.
func startIssuer() (*issuer, error) {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	is := &issuer{URL: "http://" + ln.Addr().String()}
	keys, err := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: pub, KeyID: "bench", Algorithm: string(jose.EdDSA), Use: "sig"}}})
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /jwks", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(keys)
	})
	is.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = is.srv.Serve(ln) }()
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.EdDSA, Key: priv}, (&jose.SignerOptions{}).WithHeader("kid", "bench").WithType("at+jwt"))
	if err != nil {
		return nil, err
	}
	now := time.Now()
	is.Token, err = jwt.Signed(signer).Claims(map[string]any{
		"iss": is.URL, "sub": "bench-user", "aud": benchResource, "client_id": "bench",
		"scope": "tools:call", "iat": now.Unix(), "exp": now.Add(24 * time.Hour).Unix(),
	}).Serialize()
	return is, err
}

func (is *issuer) Close() { _ = is.srv.Close() }
