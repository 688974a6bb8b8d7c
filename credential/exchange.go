package credential

import (
	"cmp"
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"
)

// The token types of RFC 8693 §3.
const (
	tokenTypeAccess = "urn:ietf:params:oauth:token-type:access_token"
	tokenTypeJWT    = "urn:ietf:params:oauth:token-type:jwt"
	// grantTypeJWTBearer is RFC 7523's grant, which Entra ID's
	// on-behalf-of flow takes.
	grantTypeJWTBearer = "urn:ietf:params:oauth:grant-type:jwt-bearer"
)

// asker makes the requests to the issuer's token endpoint: the grant
// (token exchange, client credentials), and the gateway's authentication
// as a client.
//
// Both grants go through x/oauth2's clientcredentials.Config, which lets
// the grant type be replaced by RFC 8693's (oauthex.GrantTypeTokenExchange)
// and carries the exchange's parameters: it authenticates the client with
// client_secret_basic or client_secret_post, reads at most 1 MiB of the
// answer, and parses the token and the issuer's errors (RFC 6749 §5.2).
// oauthex.ExchangeToken is not used: it authenticates with
// client_secret_post only, and requires an audience and a resource both,
// where issuers take one of them (Keycloak an audience, others a
// resource).
type asker struct {
	h       *Handler
	timeout time.Duration
	client  *http.Client
	signer  jose.Signer // private_key_jwt

	discovery sync.Mutex
	mu        sync.Mutex
	endpoint  string // the token endpoint, once known
}

func newAsker(h *Handler) (*asker, error) {
	a := &asker{h: h, timeout: time.Duration(h.Timeout), endpoint: h.TokenEndpoint}
	if a.timeout <= 0 {
		a.timeout = DefaultTimeout
	}
	a.client = &http.Client{
		Timeout: a.timeout,
		// Its own dialer: the issuer is the operator's, on whatever
		// network (oauthex's discovery refuses private addresses to a
		// transport it dials itself).
		Transport: &http.Transport{
			Proxy:               http.ProxyFromEnvironment,
			DialContext:         (&net.Dialer{Timeout: a.timeout}).DialContext,
			TLSHandshakeTimeout: a.timeout, MaxIdleConnsPerHost: 16, IdleConnTimeout: 90 * time.Second,
		},
		// The token endpoint answers; it does not send the gateway's
		// client secret elsewhere.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	if h.Client.method() == PrivateKey {
		s, err := loadSigner(h.Client.Key, h.Client.KeyID)
		if err != nil {
			return nil, fmt.Errorf("%s: client key: %w", h.Use, err)
		}
		a.signer = s
	}
	return a, nil
}

// obtained is a token the issuer gave.
type obtained struct {
	value  string
	expiry time.Time // zero: it did not say
}

// ask asks the issuer for a token: subject's exchanged, or, subject
// being empty, the gateway's own.
func (a *asker) ask(ctx context.Context, subject, gateway string) (obtained, error) {
	endpoint, err := a.tokenEndpoint(ctx)
	if err != nil {
		return obtained{}, err
	}
	cfg, err := a.config(endpoint, subject)
	if err != nil {
		return obtained{}, err
	}
	tok, err := cfg.Token(context.WithValue(ctx, oauth2.HTTPClient, a.client))
	if err != nil {
		var re *oauth2.RetrieveError
		if !errors.As(err, &re) || re.Response == nil {
			return obtained{}, fmt.Errorf("asking %s for a token: %w", endpoint, err)
		}
		if re.Response.StatusCode < 500 && re.ErrorCode != "" {
			return obtained{}, newIssuerError(re.ErrorCode, re.ErrorDescription, subject == "")
		}
		// Its words, not its body: an issuer's answer may be a megabyte.
		return obtained{}, fmt.Errorf("asking %s for a token: it answered %s", endpoint, re.Response.Status)
	}
	return a.check(tok, subject, gateway)
}

// config is the request: its grant, parameters and client authentication.
func (a *asker) config(endpoint, subject string) (*clientcredentials.Config, error) {
	h := a.h
	cfg := &clientcredentials.Config{
		ClientID: h.Client.ID, ClientSecret: h.Client.Secret, TokenURL: endpoint,
		Scopes: h.Scopes, EndpointParams: url.Values{},
		AuthStyle: oauth2.AuthStyleInHeader,
	}
	p := cfg.EndpointParams
	switch {
	case subject != "" && h.OnBehalfOf:
		// Entra ID's on-behalf-of flow: a JWT bearer grant (RFC 7523)
		// asking for a token on the caller's behalf; the server is named
		// by the scope (api://<its app>/.default), not by an audience.
		p.Set("grant_type", grantTypeJWTBearer)
		p.Set("assertion", subject)
		p.Set("requested_token_use", "on_behalf_of")
		return a.authenticate(cfg, endpoint)
	case subject != "":
		p.Set("grant_type", oauthex.GrantTypeTokenExchange)
		p.Set("subject_token", subject)
		p.Set("subject_token_type", cmp.Or(h.SubjectTokenType, tokenTypeAccess))
		p.Set("requested_token_type", tokenTypeAccess)
	}
	if h.Audience != "" {
		p.Set("audience", h.Audience)
	}
	if h.Resource != "" {
		p.Set("resource", h.Resource)
	}
	return a.authenticate(cfg, endpoint)
}

// authenticate adds the gateway's client authentication to cfg.
func (a *asker) authenticate(cfg *clientcredentials.Config, endpoint string) (*clientcredentials.Config, error) {
	h, p := a.h, cfg.EndpointParams
	switch h.Client.method() {
	case SecretPost:
		cfg.AuthStyle = oauth2.AuthStyleInParams
	case PrivateKey:
		assertion, err := a.assertion(endpoint)
		if err != nil {
			return nil, err
		}
		cfg.AuthStyle, cfg.ClientSecret = oauth2.AuthStyleInParams, ""
		p.Set("client_assertion_type", "urn:ietf:params:oauth:client-assertion-type:jwt-bearer")
		p.Set("client_assertion", assertion)
	}
	return cfg, nil
}

// check holds the issuer's answer to what the server may be given: a
// bearer token the length of a header, that is not the caller's own, and,
// when it can be read (a JWT), for the server's audience and not for the
// gateway's (a server holding it could replay it against every other
// server behind the gateway).
func (a *asker) check(tok *oauth2.Token, subject, gateway string) (obtained, error) {
	v := tok.AccessToken
	switch {
	case v == "" || len(v) > MaxTokenBytes || strings.ContainsFunc(v, func(r rune) bool { return r <= ' ' || r >= 0x7f }):
		return obtained{}, &issuerError{code: "invalid_token", description: "the issuer's token is empty, too long, or not printable", broken: true}
	case subject != "" && v == subject:
		return obtained{}, &issuerError{code: "unchanged_token", description: "the issuer answered with the caller's own token", broken: true}
	case tok.TokenType != "" && !strings.EqualFold(tok.TokenType, "bearer"):
		return obtained{}, &issuerError{code: "invalid_token", description: fmt.Sprintf("the issuer's token is of type %q, not a bearer token", clip(tok.TokenType)), broken: true}
	}
	if typ, _ := tok.Extra("issued_token_type").(string); subject != "" && typ != "" && typ != tokenTypeAccess && typ != tokenTypeJWT {
		return obtained{}, &issuerError{code: "invalid_token", description: fmt.Sprintf("the issuer issued a %q, not an access token", clip(typ)), broken: true}
	}
	if aud, ok := audience(v); ok && !a.forServer(aud) {
		return obtained{}, &issuerError{code: "wrong_audience", description: "the issuer's token is for another audience than the server's", broken: true}
	} else if ok && gateway != "" && holds(aud, gateway) {
		return obtained{}, &issuerError{code: "wrong_audience", description: "the issuer's token is for the gateway too", broken: true}
	}
	return obtained{value: v, expiry: tok.Expiry}, nil
}

// forServer reports whether a token whose audience is aud is meant for
// the server.
func (a *asker) forServer(aud []string) bool {
	if a.h.Audience == "" && a.h.Resource == "" {
		return true // nothing asked for, nothing to hold it to
	}
	return (a.h.Audience != "" && holds(aud, a.h.Audience)) || (a.h.Resource != "" && holds(aud, a.h.Resource))
}

// holds reports whether aud names want, a trailing slash aside.
func holds(aud []string, want string) bool {
	for _, got := range aud {
		if strings.TrimSuffix(got, "/") == strings.TrimSuffix(want, "/") {
			return true
		}
	}
	return false
}

// audience is the "aud" of a JWT, read without its signature checked (the
// issuer answered it to the gateway over its own connection): ok is false
// for a token that is not a JWT, which the gateway cannot read.
func audience(token string) (aud []string, ok bool) {
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return nil, false
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return nil, false
	}
	var claims struct {
		Aud jwt.Audience `json:"aud"`
	}
	if json.Unmarshal(payload, &claims) != nil {
		return nil, false
	}
	return claims.Aud, true
}

// tokenEndpoint is the issuer's token endpoint: the configured one, or
// the one its metadata names (RFC 8414, else OpenID discovery), read once
// (again after a failure).
func (a *asker) tokenEndpoint(ctx context.Context) (string, error) {
	a.discovery.Lock() // one discovery at a time
	defer a.discovery.Unlock()
	if e := a.known(); e != "" {
		return e, nil
	}
	issuer := strings.TrimSuffix(a.h.Issuer, "/")
	u, err := url.Parse(issuer)
	if err != nil {
		return "", err
	}
	var errs []error
	for _, m := range []string{u.Scheme + "://" + u.Host + "/.well-known/oauth-authorization-server" + u.Path, issuer + "/.well-known/openid-configuration"} {
		endpoint, err := a.discover(ctx, m)
		if err == nil {
			a.mu.Lock()
			a.endpoint = endpoint
			a.mu.Unlock()
			return endpoint, nil
		}
		errs = append(errs, err)
	}
	return "", fmt.Errorf("the issuer's metadata names no token endpoint (configure token_endpoint): %w", errors.Join(errs...))
}

// maxMetadata is the largest metadata document read.
const maxMetadata = 1 << 20

// discover reads the token endpoint of the metadata at address: the
// issuer's own (its "issuer" is the configured one), https or loopback.
// oauthex.GetAuthServerMeta is not used: it refuses metadata that lists no
// PKCE method, which a token endpoint does not need.
func (a *asker) discover(ctx context.Context, address string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, address, nil)
	if err != nil {
		return "", err
	}
	req.Header.Set("Accept", "application/json")
	res, err := a.client.Do(req)
	if err != nil {
		return "", err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return "", fmt.Errorf("%s: %s", address, res.Status)
	}
	var meta oauthex.AuthServerMeta
	if err := json.NewDecoder(io.LimitReader(res.Body, maxMetadata)).Decode(&meta); err != nil {
		return "", fmt.Errorf("%s: %w", address, err)
	}
	switch {
	case !sameIssuer(meta.Issuer, a.h.Issuer):
		return "", fmt.Errorf("%s: the metadata is of issuer %q", address, clip(meta.Issuer))
	case meta.TokenEndpoint == "":
		return "", fmt.Errorf("%s: no token_endpoint", address)
	}
	if err := checkURL(meta.TokenEndpoint); err != nil {
		return "", fmt.Errorf("%s: token_endpoint %q: %w", address, clip(meta.TokenEndpoint), err)
	}
	return meta.TokenEndpoint, nil
}

// known is the token endpoint, "" until it is known.
func (a *asker) known() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.endpoint
}

// assertion is a client assertion for endpoint (RFC 7523 §3).
func (a *asker) assertion(endpoint string) (string, error) {
	var jti [16]byte
	_, _ = rand.Read(jti[:])
	now := time.Now()
	claims := jwt.Claims{
		Issuer: a.h.Client.ID, Subject: a.h.Client.ID, Audience: jwt.Audience{endpoint},
		ID: base64.RawURLEncoding.EncodeToString(jti[:]), IssuedAt: jwt.NewNumericDate(now),
		Expiry: jwt.NewNumericDate(now.Add(time.Minute)),
	}
	return jwt.Signed(a.signer).Claims(claims).Serialize()
}

// loadSigner reads a PEM private key and signs with the algorithm its
// kind takes (ES256/384/512 for EC, RS256 for RSA, EdDSA for Ed25519).
func loadSigner(file, kid string) (jose.Signer, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	key, alg, err := parseKey(data)
	if err != nil {
		return nil, err
	}
	opts := (&jose.SignerOptions{}).WithType("JWT")
	if kid != "" {
		opts = opts.WithHeader(jose.HeaderKey("kid"), kid)
	}
	return jose.NewSigner(jose.SigningKey{Algorithm: alg, Key: key}, opts)
}

// parseKey reads a PEM private key, and the algorithm it signs with.
func parseKey(data []byte) (any, jose.SignatureAlgorithm, error) {
	block, _ := pem.Decode(data)
	if block == nil {
		return nil, "", errors.New("no PEM block")
	}
	key, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		if k, err2 := x509.ParseECPrivateKey(block.Bytes); err2 == nil {
			key, err = k, nil
		} else if k, err3 := x509.ParsePKCS1PrivateKey(block.Bytes); err3 == nil {
			key, err = k, nil
		}
	}
	if err != nil {
		return nil, "", fmt.Errorf("not a PKCS #8, EC or RSA private key: %w", err)
	}
	switch k := key.(type) {
	case *ecdsa.PrivateKey:
		switch k.Curve.Params().BitSize {
		case 256:
			return k, jose.ES256, nil
		case 384:
			return k, jose.ES384, nil
		case 521:
			return k, jose.ES512, nil
		}
	case *rsa.PrivateKey:
		return k, jose.RS256, nil
	case ed25519.PrivateKey:
		return k, jose.EdDSA, nil
	}
	return nil, "", fmt.Errorf("a %T key cannot sign a client assertion", key)
}
