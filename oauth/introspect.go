package oauth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/go-jose/go-jose/v4/jwt"
	"golang.org/x/sync/singleflight"
	"golang.org/x/time/rate"
)

// Opaque access tokens, checked at their issuer's introspection endpoint
// (RFC 7662), for the issuer configured to introspect: a token that is
// not a JWT is asked about there, with the gateway's own client
// credentials. It must be active, for this resource (its aud, RFC 8707),
// a bearer token (not bound to a key), and within its lifetime give or
// take the leeway; if it names an issuer, the one asked.
//
// What it costs is bounded whoever sends tokens. An answer is remembered
// like a verified JWT (at most CacheFor, never past its exp); a refused
// token is remembered RefusedFor, so that one client resending it costs
// one request to the issuer; requests for one token at once share one
// introspection. Tokens never seen before (the only ones that cost a
// request) are introspected at most IntrospectionRate a second: past it,
// and while the issuer cannot be reached, they are answered 503
// SERVER_BUSY, never 401 (the token may well be valid).

const (
	// IntrospectionRate is how many tokens a second may be introspected,
	// with bursts of IntrospectionBurst.
	IntrospectionRate  = 20
	IntrospectionBurst = 40
	// RefusedFor is how long a token found inactive, or not for this
	// resource, is refused without asking again.
	RefusedFor = time.Minute
	// MaxIntrospection bounds an introspection answer read.
	MaxIntrospection = 16 << 10
	// MaxOpaqueToken bounds an opaque token asked about.
	MaxOpaqueToken = 4 << 10
)

// Introspection is how the gateway asks an issuer about opaque tokens.
type Introspection struct {
	// Endpoint is the introspection endpoint; "" for the one the issuer's
	// metadata names (introspection_endpoint).
	Endpoint string
	// ClientID and ClientSecret are the gateway's credentials at the
	// issuer, sent with HTTP Basic (client_secret_basic).
	ClientID, ClientSecret string
}

// introspector asks one issuer about opaque tokens.
type introspector struct {
	keys    *keySet // the issuer's: its metadata, its client and clock
	cfg     Introspection
	leeway  time.Duration
	timeout time.Duration // of one request: FetchTimeout
	limit   *rate.Limiter
	flights singleflight.Group
	refused tokenCache
	// known are the tokens found valid, until their exp: asking about one
	// again once it is no longer remembered as valid does not wait for
	// the rate of tokens never seen, which a flood of made-up ones spends.
	known tokenCache

	// discovering is held while the endpoint is discovered, so that mu,
	// which the status takes, is never held across the network.
	discovering sync.Mutex
	mu          sync.Mutex
	endpoint    string    // configured, or discovered
	tried       time.Time // the last discovery, or the last request
	err         error     // of the last discovery or request
}

func newIntrospector(keys *keySet, cfg Introspection, leeway time.Duration) *introspector {
	return &introspector{
		keys: keys, cfg: cfg, leeway: leeway, timeout: FetchTimeout, endpoint: cfg.Endpoint,
		limit: rate.NewLimiter(IntrospectionRate, IntrospectionBurst),
	}
}

var (
	errTooMany  = fmt.Errorf("over %d tokens a second to introspect", IntrospectionRate)
	errInactive = errors.New("the issuer says the token is not active")
)

// check checks the opaque token, whose digest for resource is key.
func (in *introspector) check(ctx context.Context, token, resource string, key digest, now time.Time) (*Principal, error) {
	if e, ok := in.refused.get(key, now); ok {
		return nil, e.err
	}
	if len(token) > MaxOpaqueToken || !isB64Token(token) {
		return nil, &Error{Reason: Malformed, Err: errors.New("not a bearer token this resource accepts (RFC 6750 b64token, at most 4 KiB)")}
	}
	v, err, _ := in.flights.Do(string(key[:]), func() (any, error) {
		if _, known := in.known.get(key, now); !known && !in.limit.AllowN(now, 1) {
			return nil, &Error{Reason: IntrospectionLimited, Err: errTooMany}
		}
		return in.ask(ctx, token)
	})
	if err != nil {
		return nil, err
	}
	p, err := in.principal(v.(json.RawMessage), resource, now)
	var e *Error
	switch {
	case err == nil:
		in.known.put(key, cached{until: p.Expiry.Add(in.leeway)}, now)
	case errors.As(err, &e) && settled(e.Reason):
		in.refused.put(key, cached{err: e, until: now.Add(RefusedFor)}, now)
	}
	return p, err
}

// settled reports whether a token refused for r stays refused however
// often it is asked about: not one whose answer could not be read, nor
// one not valid yet.
func settled(r Reason) bool {
	switch r {
	case Inactive, WrongAudience, WrongIssuer, Expired, Malformed:
		return true
	}
	return false
}

// ask sends token to the introspection endpoint and returns its answer's
// members. Its context is the request's, cut loose from the client (the
// answer serves every request waiting on it) and bounded by FetchTimeout.
func (in *introspector) ask(ctx context.Context, token string) (_ json.RawMessage, err error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), in.timeout)
	defer cancel()
	defer func() { in.record(err) }()
	endpoint, err := in.where(ctx)
	if err != nil {
		return nil, &Error{Reason: IssuerUnavailable, Err: err}
	}
	form := url.Values{"token": {token}, "token_type_hint": {"access_token"}}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, strings.NewReader(form.Encode()))
	if err != nil {
		return nil, &Error{Reason: IssuerUnavailable, Err: err}
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	// RFC 6749 §2.3.1: each form-encoded before Basic.
	req.SetBasicAuth(url.QueryEscape(in.cfg.ClientID), url.QueryEscape(in.cfg.ClientSecret))
	var answer json.RawMessage
	found, err := readJSON(in.keys.client, req, MaxIntrospection, &answer)
	switch {
	case err != nil:
		return nil, &Error{Reason: IssuerUnavailable, Err: fmt.Errorf("introspecting a token: %w", err)}
	case !found:
		return nil, &Error{Reason: IssuerUnavailable, Err: fmt.Errorf("%s did not introspect a token (a 4xx): check the endpoint and the gateway's client credentials", endpoint)}
	}
	return answer, nil
}

// where is the introspection endpoint: configured, or discovered from the
// issuer's metadata, at most once per RefetchAfter while it fails.
func (in *introspector) where(ctx context.Context) (string, error) {
	in.discovering.Lock()
	defer in.discovering.Unlock()
	in.mu.Lock()
	endpoint, tried, lastErr := in.endpoint, in.tried, in.err
	in.mu.Unlock()
	if endpoint != "" {
		return endpoint, nil
	}
	if now := in.keys.now(); !tried.IsZero() && now.Sub(tried) < RefetchAfter {
		return "", lastErr
	}
	meta, err := in.keys.metadata(ctx)
	switch {
	case err != nil:
	case meta.IntrospectionEndpoint == "":
		err = errors.New("the issuer's metadata names no introspection_endpoint; configure it")
	default:
		if err = checkFetchable(meta.IntrospectionEndpoint); err != nil {
			err = fmt.Errorf("the issuer's introspection_endpoint %q: %w", meta.IntrospectionEndpoint, err)
		}
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	if err != nil {
		in.tried, in.err = in.keys.now(), err
		return "", err
	}
	in.endpoint = meta.IntrospectionEndpoint
	return in.endpoint, nil
}

// record records the outcome of a request to the issuer, for the status.
func (in *introspector) record(err error) {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.tried, in.err = in.keys.now(), err
}

// principal is who an introspection answer says the token speaks for, or
// why it is refused.
func (in *introspector) principal(raw json.RawMessage, resource string, now time.Time) (*Principal, error) {
	var (
		answer map[string]json.RawMessage
		claims jwt.Claims
		active bool
	)
	if err := json.Unmarshal(raw, &answer); err != nil {
		return nil, &Error{Reason: IssuerUnavailable, Err: fmt.Errorf("the issuer's introspection answer: %w", err)}
	}
	if json.Unmarshal(answer["active"], &active) != nil || !active {
		return nil, &Error{Reason: Inactive, Err: errInactive}
	}
	if err := json.Unmarshal(raw, &claims); err != nil {
		return nil, &Error{Reason: IssuerUnavailable, Err: fmt.Errorf("the issuer's introspection answer: %w", err)}
	}
	if claims.Issuer != "" && in.keys.issuer != claims.Issuer && strings.TrimSuffix(claims.Issuer, "/") != strings.TrimSuffix(in.keys.issuer, "/") {
		return nil, &Error{Reason: WrongIssuer, Err: fmt.Errorf("the introspected token is issuer %q's", claims.Issuer)}
	}
	if typ := firstString(answer, "token_type"); (answer["token_type"] != nil && !strings.EqualFold(typ, "bearer")) || answer["cnf"] != nil {
		return nil, &Error{Reason: Malformed, Err: fmt.Errorf("the token is bound to a key (token_type %q): not a bearer token", typ)}
	}
	if err := current(&claims, resource, now, in.leeway); err != nil {
		return nil, err
	}
	p := &Principal{
		Issuer: in.keys.issuer, Subject: claims.Subject, ClientID: firstString(answer, "client_id"),
		Scopes: scopes(answer), Expiry: now.Add(CacheFor), Claims: kept(answer),
	}
	if claims.Expiry != nil {
		p.Expiry = claims.Expiry.Time()
	}
	if p.Subject == "" && p.ClientID != "" {
		// A client's own token (client credentials) may name no sub: the
		// client is who it speaks for, named apart from the issuer's
		// subjects, so that a client called as a user is not that user.
		p.Subject = ClientSubject + p.ClientID
	}
	if p.Subject == "" {
		return nil, &Error{Reason: Malformed, Err: errors.New("the introspected token names neither sub nor client_id")}
	}
	return p.complete(), nil
}

// ClientSubject begins the subject of an introspected token that names
// no sub: its client_id follows.
const ClientSubject = "client:"

// MaxClaim bounds a claim an introspected principal keeps (placeholders
// read at most 256 bytes of one): the answer itself is read within
// MaxIntrospection, and the principal is remembered.
const MaxClaim = 1 << 10

// kept are the claims of answer a principal keeps: each within MaxClaim.
func kept(answer map[string]json.RawMessage) map[string]json.RawMessage {
	for k, v := range answer {
		if len(v) > MaxClaim {
			delete(answer, k)
		}
	}
	return answer
}

// isB64Token reports whether token is an RFC 6750 b64token: what a
// bearer token may hold.
func isB64Token(token string) bool {
	body := strings.TrimRight(token, "=")
	if body == "" {
		return false
	}
	for i := 0; i < len(body); i++ {
		c := body[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("-._~+/", c) >= 0) {
			return false
		}
	}
	return true
}
