package main

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

// The credential configuration: authorization, then mcp_credential
// token_exchange before the reverse_proxy, so that the upstream gets a
// token the issuer exchanged the caller's for, meant for it, rather than
// the caller's. The gateway asks the issuer once, and remembers the token
// for the caller until shortly before it expires (an hour): what is
// measured is a request whose exchanged token is remembered, against
// authorization alone.

// The gateway's client at the issuer, and the upstream's audience.
const (
	credentialClient   = "bench-gateway"
	credentialSecret   = "bench-gateway-secret"
	credentialAudience = "https://upstream.bench"
)

// credentialHandler is the credential configuration's Handler: the token
// endpoint given, so that the handler reads no metadata.
const credentialHandler = authorizationHandler + "\nmcp_credential token_exchange {\n\tissuer " + issuerMark +
	"\n\ttoken_endpoint " + issuerMark + "/token\n\tclient " + credentialClient + " " + credentialSecret +
	"\n\taudience " + credentialAudience + "\n}"

// The names of RFC 8693.
const (
	grantTokenExchange = "urn:ietf:params:oauth:grant-type:token-exchange"
	tokenTypeAccess    = "urn:ietf:params:oauth:token-type:access_token"
)

// exchangedLife is how long an exchanged token is valid.
const exchangedLife = time.Hour

// exchange is the issuer's token endpoint: RFC 8693 token exchange for the
// gateway's client, authenticated with client_secret_basic, of a token
// the issuer signed for benchResource, for a token whose audience is the
// one asked (audience, else resource).
func (is *issuer) exchange(w http.ResponseWriter, r *http.Request) {
	if !gatewayClient(r) {
		w.Header().Set("WWW-Authenticate", `Basic realm="bench"`)
		tokenError(w, http.StatusUnauthorized, "invalid_client", "not the gateway's client_id and secret (client_secret_basic)")
		return
	}
	if err := r.ParseForm(); err != nil {
		tokenError(w, http.StatusBadRequest, "invalid_request", err.Error())
		return
	}
	f := r.PostForm
	aud := cmp.Or(f.Get("audience"), f.Get("resource"))
	switch {
	case f.Get("grant_type") != grantTokenExchange:
		tokenError(w, http.StatusBadRequest, "unsupported_grant_type", "only token exchange")
		return
	case f.Get("subject_token_type") != tokenTypeAccess:
		tokenError(w, http.StatusBadRequest, "invalid_request", "subject_token_type: an access token")
		return
	case aud == "":
		tokenError(w, http.StatusBadRequest, "invalid_target", "an audience or a resource is required")
		return
	}
	sub, scope, err := is.subject(f.Get("subject_token"))
	if err != nil {
		tokenError(w, http.StatusBadRequest, "invalid_grant", err.Error())
		return
	}
	tok, err := is.mint(sub, aud, credentialClient, scope, exchangedLife, map[string]any{"sub": credentialClient})
	if err != nil {
		tokenError(w, http.StatusInternalServerError, "server_error", err.Error())
		return
	}
	is.exchanges.Add(1)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_ = json.NewEncoder(w).Encode(map[string]any{
		"access_token": tok, "issued_token_type": tokenTypeAccess,
		"token_type": "Bearer", "expires_in": int(exchangedLife / time.Second),
	})
}

// gatewayClient reports whether r authenticates as the gateway's client
// with client_secret_basic (its id and secret form-encoded, RFC 6749
// §2.3.1).
func gatewayClient(r *http.Request) bool {
	id, secret, ok := r.BasicAuth()
	if !ok {
		return false
	}
	id, err1 := url.QueryUnescape(id)
	secret, err2 := url.QueryUnescape(secret)
	return err1 == nil && err2 == nil && id == credentialClient && secret == credentialSecret
}

// subject checks a subject token: signed by the issuer, for benchResource,
// not expired. It returns its subject and scope.
func (is *issuer) subject(token string) (sub, scope string, err error) {
	if token == "" {
		return "", "", errors.New("subject_token is required")
	}
	t, err := jwt.ParseSigned(token, []jose.SignatureAlgorithm{jose.EdDSA})
	if err != nil {
		return "", "", err
	}
	var c jwt.Claims
	var extra struct {
		Scope string `json:"scope"`
	}
	if err := t.Claims(is.pub, &c, &extra); err != nil {
		return "", "", err
	}
	if err := c.ValidateWithLeeway(jwt.Expected{Issuer: is.URL, AnyAudience: jwt.Audience{benchResource}, Time: time.Now()}, 0); err != nil {
		return "", "", err
	}
	return c.Subject, extra.Scope, nil
}

// tokenError answers an error of RFC 6749 §5.2.
func tokenError(w http.ResponseWriter, status int, code, description string) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]string{"error": code, "error_description": description})
}

// credentialRun is the credential configuration against authorization:
// at each body size, its Caddy CPU per answer minus authorization's, round
// by round; and the exchanges the issuer served in the whole run, for the
// answers of the rounds.
type credentialRun struct {
	Rows      []fedFigure `json:"rows"`
	Exchanges uint64      `json:"exchanges"`
	Answers   uint64      `json:"answers"`
}

// versusAuthorization is the credential run, nil when it was not
// measured.
func versusAuthorization(all []*series, exchanges uint64) *credentialRun {
	run := &credentialRun{Exchanges: exchanges}
	for _, s := range all {
		if s.Config.Name != cfgCredential {
			continue
		}
		for _, smp := range s.Samples {
			run.Answers += smp.Answered
		}
		if base := findSeries(all, s.Config.Baseline, s.Size); base != nil {
			run.Rows = append(run.Rows, fedFigure{Config: s.Config.Name, Baseline: s.Config.Baseline, Body: sizeLabel(s.Size), CPU: cpuMinusBaseline(s, base)})
		}
	}
	if len(run.Rows) == 0 {
		return nil
	}
	return run
}

// writeCredential is the credential run, when it was measured.
func (r *report) writeCredential(w io.Writer) {
	c := r.Credential
	if c == nil {
		return
	}
	fmt.Fprintf(w, "\nToken exchange, round by round: credential's Caddy CPU per answer minus authorization's (median [interval, confidence]). The issuer served %d token exchange(s) in the whole run, for %s answers in the rounds (warm-ups included).\n\n",
		c.Exchanges, thousands(float64(c.Answers)))
	fmt.Fprintln(w, "| config | baseline | body | CPU minus the baseline's |")
	fmt.Fprintln(w, "|---|---|---|---|")
	for _, f := range c.Rows {
		fmt.Fprintf(w, "| %s | %s | %s | %s |\n", f.Config, f.Baseline, f.Body, cpuInterval(f.CPU))
	}
}
