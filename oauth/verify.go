// Package oauth makes the gateway the OAuth 2.1 resource server of the MCP
// servers behind it, as the MCP authorization specification asks of a
// server (2025-06-18 onward): it verifies the bearer tokens of the
// requests, so that what the gateway does per caller rests on a principal
// it checked rather than on a header nobody checked.
//
// This file verifies a JWT access token (RFC 9068): signed with an
// asymmetric key the issuer publishes, by a configured issuer, for this
// resource (RFC 8707: a token for another resource is refused), within its
// lifetime give or take a leeway.
package oauth

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
	"go.uber.org/zap"

	"github.com/caddymcp/caddy-mcp/internal/jsonrpc"
)

// MaxTokenSize is the longest token read; a longer one is refused unread.
const MaxTokenSize = 16 << 10

// Algorithms are the signature algorithms a token may be signed with:
// asymmetric ones only. "none" and the HMAC algorithms are refused before
// any key is looked at, so that a token cannot pick how it is checked
// (algorithm confusion: an HMAC keyed with the issuer's public key).
var Algorithms = []jose.SignatureAlgorithm{
	jose.RS256, jose.RS384, jose.RS512,
	jose.PS256, jose.PS384, jose.PS512,
	jose.ES256, jose.ES384, jose.ES512,
	jose.EdDSA,
}

// Reason is why a token was refused; each is counted (never with the
// token or its subject).
type Reason string

const (
	Malformed         Reason = "malformed"          // not a signed JWT in an accepted algorithm (nor, with introspection, an opaque token), too long, without exp, or bound to a key
	WrongIssuer       Reason = "wrong_issuer"       // by no configured issuer
	UnknownKey        Reason = "unknown_key"        // names a key the issuer does not publish
	BadSignature      Reason = "bad_signature"      // its signature does not verify
	Expired           Reason = "expired"            // past exp (with the leeway)
	NotYetValid       Reason = "not_yet_valid"      // before nbf, or issued in the future (with the leeway)
	WrongAudience     Reason = "wrong_audience"     // for another resource
	Inactive          Reason = "inactive"           // an opaque token its issuer says is not active
	IssuerUnavailable Reason = "issuer_unavailable" // the issuer's keys could not be fetched, or it could not be asked about a token

	// IntrospectionLimited: more tokens never seen before than may be
	// introspected (IntrospectionRate); the token was not looked at.
	IntrospectionLimited Reason = "introspection_limited"
)

// Error is a refused token.
type Error struct {
	Reason Reason
	Err    error
}

func (e *Error) Error() string { return string(e.Reason) + ": " + e.Err.Error() }
func (e *Error) Unwrap() error { return e.Err }

// Verifier verifies tokens from a set of issuers.
type Verifier struct {
	issuers map[string]*keySet
	leeway  time.Duration
	now     func() time.Time
	// verified remembers the tokens found valid, so that a client's
	// token costs one signature check a while rather than one a request.
	verified tokenCache
	// opaque checks the tokens that are not JWTs: nil unless an issuer
	// introspects them.
	opaque *introspector
}

// Issuer is a trusted issuer: its identifier (the "iss" its tokens carry,
// and where its metadata is discovered), optionally its key set's
// address, which discovery is then skipped for, and how its opaque tokens
// are introspected, if they are (one issuer at most).
type Issuer struct {
	URL           string
	JWKS          string
	Introspection *Introspection
}

// NewVerifier returns a verifier trusting issuers, fetching their keys
// with client, and telling logger of a fetch that panicked (nil: Caddy's
// default logger). now is the clock (time.Now when nil).
func NewVerifier(issuers []Issuer, leeway time.Duration, client *http.Client, now func() time.Time, logger *zap.Logger) *Verifier {
	if now == nil {
		now = time.Now
	}
	v := &Verifier{issuers: make(map[string]*keySet, len(issuers)), leeway: leeway, now: now}
	for _, is := range issuers {
		keys := &keySet{issuer: is.URL, jwksURL: is.JWKS, client: client, now: now, logger: logger}
		v.issuers[is.URL] = keys
		if is.Introspection != nil {
			v.opaque = newIntrospector(keys, *is.Introspection, leeway)
		}
	}
	return v
}

// Verify verifies token as an access token for resource. The principal
// returned is shared: it may not be changed.
func (v *Verifier) Verify(ctx context.Context, token, resource string) (*Principal, error) {
	if len(token) > MaxTokenSize {
		return nil, &Error{Reason: Malformed, Err: fmt.Errorf("the token is over %d bytes", MaxTokenSize)}
	}
	key := cacheKey(token, resource)
	now := v.now()
	if e, ok := v.verified.get(key, now); ok {
		return e.p, nil
	}
	var p *Principal
	var err error
	if v.opaque != nil && !isJWS(token) {
		p, err = v.opaque.check(ctx, token, resource, key, now)
	} else {
		p, err = v.verify(ctx, token, resource, now)
	}
	if err == nil {
		until := p.Expiry.Add(v.leeway)
		if limit := now.Add(CacheFor); limit.Before(until) {
			until = limit
		}
		v.verified.put(key, cached{p: p, until: until}, now)
	}
	return p, err
}

func (v *Verifier) verify(ctx context.Context, token, resource string, now time.Time) (*Principal, error) {
	tok, err := parse(token)
	if err != nil {
		return nil, err
	}
	iss, err := unverifiedIssuer(token)
	if err != nil {
		return nil, &Error{Reason: Malformed, Err: err}
	}
	keys := v.issuerOf(iss)
	if keys == nil {
		return nil, &Error{Reason: WrongIssuer, Err: fmt.Errorf("issuer %q is not trusted", iss)}
	}
	candidates, err := keys.lookup(ctx, tok.Headers[0].KeyID)
	if err != nil {
		return nil, err
	}
	var claims jwt.Claims
	var all map[string]json.RawMessage
	verified := false
	for i := range candidates {
		if tok.Claims(candidates[i].Key, &claims, &all) == nil {
			verified = true
			break
		}
	}
	if !verified {
		return nil, &Error{Reason: BadSignature, Err: errors.New("the signature does not verify with the issuer's keys")}
	}
	if claims.Issuer != iss {
		// go-jose's decoder (case-sensitive, refusing duplicates) read
		// another issuer than the one whose keys checked the token.
		return nil, &Error{Reason: Malformed, Err: errors.New("the token's issuer is not the one read before its check")}
	}
	if claims.Expiry == nil || claims.Subject == "" {
		return nil, &Error{Reason: Malformed, Err: errors.New("the token has no exp or no sub (RFC 9068 requires both)")}
	}
	if all["cnf"] != nil {
		// Sender-constrained (DPoP, mTLS): only its holder may present
		// it, which a bearer token's check cannot tell.
		return nil, &Error{Reason: Malformed, Err: errors.New("the token is bound to a key (cnf): not a bearer token")}
	}
	if err := current(&claims, resource, now, v.leeway); err != nil {
		return nil, err
	}
	p := &Principal{
		Issuer:   claims.Issuer,
		Subject:  claims.Subject,
		ClientID: firstString(all, "client_id", "azp", "cid"),
		Scopes:   scopes(all),
		Expiry:   claims.Expiry.Time(),
		Claims:   all,
	}
	return p.complete(), nil
}

// current refuses claims outside their lifetime (exp, nbf, iat, with the
// leeway), or for another resource than resource (aud, RFC 8707).
func current(claims *jwt.Claims, resource string, now time.Time, leeway time.Duration) error {
	switch err := claims.ValidateWithLeeway(jwt.Expected{Time: now}, leeway); {
	case errors.Is(err, jwt.ErrExpired):
		return &Error{Reason: Expired, Err: err}
	case errors.Is(err, jwt.ErrNotValidYet), errors.Is(err, jwt.ErrIssuedInTheFuture):
		return &Error{Reason: NotYetValid, Err: err}
	case err != nil:
		return &Error{Reason: WrongIssuer, Err: err}
	}
	if !oauthex.MatchesResource(claims.Audience, resource) {
		return &Error{Reason: WrongAudience, Err: fmt.Errorf("the token is not for %s", resource)}
	}
	return nil
}

// accessTokenType reports whether a JWT's typ may be an access token's: at+jwt
// (RFC 9068), or none or plain JWT, as many issuers still write theirs.
// Other types (logout+jwt, secevent+jwt, dpop+jwt...) are other tokens
// signed with the same keys.
func accessTokenType(typ string) bool {
	switch strings.ToLower(typ) {
	case "", "jwt", "at+jwt", "application/at+jwt":
		return true
	}
	return false
}

// canonical reports whether each part of a compact token ends as
// base64url without padding ends: no bits set past the last byte (its
// alphabet is the decoder's to check). It reads one byte a part.
func canonical(token string) bool {
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	for part := range strings.SplitSeq(token, ".") {
		if len(part) == 0 {
			continue
		}
		v := strings.IndexByte(alphabet, part[len(part)-1])
		switch len(part) % 4 {
		case 1:
			return false
		case 2: // one byte: 4 bits past it
			if v&0xf != 0 {
				return false
			}
		case 3: // two bytes: 2 bits past them
			if v&0x3 != 0 {
				return false
			}
		}
	}
	return true
}

// parse reads token as a signed JWT access token, its signature not yet
// checked.
func parse(token string) (*jwt.JSONWebToken, error) {
	tok, err := jwt.ParseSigned(token, Algorithms)
	if err != nil {
		return nil, &Error{Reason: Malformed, Err: err}
	}
	if len(tok.Headers) != 1 {
		return nil, &Error{Reason: Malformed, Err: errors.New("the token has several signatures")}
	}
	if typ, _ := tok.Headers[0].ExtraHeaders[jose.HeaderType].(string); !accessTokenType(typ) {
		return nil, &Error{Reason: Malformed, Err: fmt.Errorf("a token of type %q is no access token", typ)}
	}
	if !canonical(token) {
		// One token, one spelling: base64 with bits set past its end is
		// the same token to the decoder, and would be remembered twice.
		return nil, &Error{Reason: Malformed, Err: errors.New("the token is not in canonical base64url")}
	}
	return tok, nil
}

// isJWS reports whether token is written as a compact JWS: three parts,
// the first a JSON object naming an alg. Any other token is opaque (a
// PASETO's "v4.local.…" has three parts too).
func isJWS(token string) bool {
	header, rest, ok := strings.Cut(token, ".")
	if !ok || strings.Count(rest, ".") != 1 || len(header) > 4<<10 {
		return false
	}
	raw, err := base64.RawURLEncoding.DecodeString(header)
	if err != nil {
		return false
	}
	alg := false
	err = jsonrpc.Members(raw, func(m jsonrpc.Member) bool {
		alg = alg || string(m.Key) == "alg"
		return true
	})
	return err == nil && alg
}

// unverifiedIssuer is the "iss" of a compact JWT, read before its
// signature is checked, to know whose keys check it. It is read by a scan
// that costs a few microseconds whatever the claims hold, rather than by
// decoding them: a forged token's claims are never decoded.
func unverifiedIssuer(token string) (string, error) {
	_, rest, _ := strings.Cut(token, ".")
	encoded, _, _ := strings.Cut(rest, ".")
	payload, err := base64.RawURLEncoding.DecodeString(encoded)
	if err != nil {
		return "", err
	}
	var iss []byte
	twice := false
	err = jsonrpc.Members(payload, func(m jsonrpc.Member) bool {
		if string(m.Key) == "iss" {
			twice = twice || iss != nil
			iss = payload[m.Start:m.End]
		}
		return true
	})
	switch {
	case err != nil:
		return "", err
	case twice:
		return "", errors.New("the token names its issuer twice")
	case len(iss) < 2 || iss[0] != '"':
		return "", errors.New("the token names no issuer")
	}
	return string(jsonrpc.AppendUnquoted(nil, iss[1:len(iss)-1])), nil
}

// issuerOf is the keys of the trusted issuer iss, configured with or
// without a trailing slash; nil when it is not trusted.
func (v *Verifier) issuerOf(iss string) *keySet {
	if keys, ok := v.issuers[iss]; ok {
		return keys
	}
	if trimmed, ok := strings.CutSuffix(iss, "/"); ok {
		return v.issuers[trimmed]
	}
	return v.issuers[iss+"/"]
}
