package oauth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-jose/go-jose/v4"
	"go.uber.org/zap"

	"github.com/caddymcp/caddy-mcp/internal/panics"
)

// An issuer's signing keys. They are fetched when first needed, not at
// start (an issuer that is down must not keep Caddy from starting), and
// fetched again when they grow old or a token names a key they do not
// hold: the issuer rotated its keys. Fetches are bounded: one at a time
// per issuer, at most one every RefetchAfter whatever the tokens name (a
// client sending made-up key ids costs no fetch storm), each within
// FetchTimeout and MaxKeySet bytes. A fetch that fails keeps the keys
// already held.

const (
	// RefetchAfter is the least time between two fetches of an issuer's
	// keys.
	RefetchAfter = 2 * time.Second
	// KeysMaxAge is how long fetched keys are used before they are
	// fetched again (a fetch that fails keeps them in use).
	KeysMaxAge = time.Hour
	// FetchTimeout bounds one fetch, discovery included; a request waits
	// no longer for keys.
	FetchTimeout = 5 * time.Second
	// MaxKeySet is the largest key set or metadata document read.
	MaxKeySet = 1 << 20
)

// siteKeys is where a panic of fetching an issuer's keys is recovered
// (package panics).
const siteKeys = "oauth_keys"

// errFetchPanicked is the outcome of a fetch that panicked.
var errFetchPanicked = errors.New("fetching the issuer's keys failed: the gateway's bug, logged")

// keySet is one issuer's keys.
type keySet struct {
	issuer string
	// jwksURL is the key set's address: configured, or discovered from
	// the issuer's metadata on the first fetch.
	jwksURL string
	client  *http.Client
	now     func() time.Time
	// logger is told of a fetch that panicked.
	logger *zap.Logger

	// fetching is held for the whole of a fetch, so that requests that
	// need one wait for the one under way rather than start their own.
	fetching sync.Mutex

	mu      sync.Mutex
	jwks    string // jwksURL, as the status shows it
	keys    []jose.JSONWebKey
	fetched time.Time // of the keys held
	tried   time.Time // the last fetch, successful or not
	err     error     // of the last fetch
}

// errUnknownKey is a token naming a key the issuer's set does not hold,
// even fetched again.
var errUnknownKey = errors.New("the token's key is not among the issuer's keys")

// lookup returns the keys a token naming kid may be signed with (kid ""
// names none: every key). It fetches the set when it must and may.
func (s *keySet) lookup(ctx context.Context, kid string) ([]jose.JSONWebKey, error) {
	if found, ok := s.held(kid); ok {
		return found, nil
	}
	if found := s.stale(kid); found != nil {
		// Keys that aged past KeysMaxAge serve at once while a fetch
		// refreshes them: a request never waits on an issuer for a key
		// it holds. The fetch serves every request after it: it keeps
		// nothing of this one's.
		if s.fetching.TryLock() {
			go func() {
				defer s.fetching.Unlock()
				s.fetch(context.Background())
			}()
		}
		return found, nil
	}
	s.fetching.Lock()
	defer s.fetching.Unlock()
	// Another request may have fetched while this one waited.
	if found, ok := s.held(kid); ok {
		return found, nil
	}
	s.mu.Lock()
	due := s.tried.IsZero() || s.now().Sub(s.tried) >= RefetchAfter
	s.mu.Unlock()
	if due {
		s.fetch(ctx)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if found := match(s.keys, kid); len(found) > 0 {
		return found, nil
	}
	if s.keys == nil && s.err != nil {
		return nil, &Error{Reason: IssuerUnavailable, Err: s.err}
	}
	return nil, &Error{Reason: UnknownKey, Err: errUnknownKey}
}

// held returns the keys held for kid, ok when they may be used without a
// fetch: they are fresh, or a fetch was just tried (stale keys serve while
// the issuer cannot be reached).
func (s *keySet) held(kid string) (found []jose.JSONWebKey, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	found = match(s.keys, kid)
	if len(found) == 0 {
		return nil, false
	}
	now := s.now()
	return found, now.Sub(s.fetched) < KeysMaxAge || now.Sub(s.tried) < RefetchAfter
}

// stale returns the keys held for kid whatever their age (held says
// whether they are fresh), nil when none is held.
func (s *keySet) stale(kid string) []jose.JSONWebKey {
	s.mu.Lock()
	defer s.mu.Unlock()
	return match(s.keys, kid)
}

// match returns the keys of set a token naming kid may be signed with. A
// token naming none is checked against a set of one key only: against a
// set of many, a forged token would cost a check per key.
func match(set []jose.JSONWebKey, kid string) []jose.JSONWebKey {
	if kid == "" {
		if len(set) == 1 {
			return set
		}
		return nil
	}
	for i := range set {
		if set[i].KeyID == kid {
			return set[i : i+1]
		}
	}
	return nil
}

// fetch fetches the issuer's key set, discovering its address first if
// need be, and records the outcome. Its context is the request's, cut
// loose from the client (the keys serve every request after it) and
// bounded by FetchTimeout. A fetch that panics (on the goroutine lookup
// starts, or on a request's) is a failed one: the keys held serve on.
func (s *keySet) fetch(ctx context.Context) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), FetchTimeout)
	defer cancel()
	var keys []jose.JSONWebKey
	err := errFetchPanicked
	defer func() { s.record(keys, err) }()
	defer panics.Recover(s.logger, siteKeys)
	keys, err = s.get(ctx)
}

// record records the outcome of a fetch.
func (s *keySet) record(keys []jose.JSONWebKey, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.jwks = s.jwksURL
	s.tried, s.err = s.now(), err
	if err == nil {
		s.keys, s.fetched = keys, s.tried
	}
}

func (s *keySet) get(ctx context.Context) ([]jose.JSONWebKey, error) {
	if s.jwksURL == "" {
		jwks, err := s.discover(ctx)
		if err != nil {
			return nil, err
		}
		s.jwksURL = jwks
	}
	var set jose.JSONWebKeySet
	found, err := s.getJSON(ctx, s.jwksURL, &set)
	switch {
	case err != nil:
		return nil, fmt.Errorf("fetching the issuer's keys: %w", err)
	case !found:
		return nil, fmt.Errorf("fetching the issuer's keys: %s has none", s.jwksURL)
	}
	keys := set.Keys[:0]
	for _, k := range set.Keys {
		// Public signing keys only: a symmetric key in a published set
		// would let anyone who read the set sign tokens.
		if k.Valid() && k.IsPublic() && (k.Use == "" || k.Use == "sig") && signs(k) {
			keys = append(keys, k)
		}
	}
	if len(keys) == 0 {
		return nil, errors.New("the issuer's key set holds no public signing key")
	}
	return keys, nil
}

// signs reports whether k's algorithm, when it names one, is one tokens
// are accepted in.
func signs(k jose.JSONWebKey) bool {
	if k.Algorithm == "" {
		return true
	}
	for _, a := range Algorithms {
		if string(a) == k.Algorithm {
			return true
		}
	}
	return false
}

// discover finds the address of the issuer's key set in its metadata.
func (s *keySet) discover(ctx context.Context) (string, error) {
	meta, err := s.metadata(ctx)
	if err != nil {
		return "", err
	}
	if meta.JWKSURI == "" {
		return "", errors.New("the issuer's metadata names no jwks_uri; configure its jwks")
	}
	if err := checkFetchable(meta.JWKSURI); err != nil {
		return "", fmt.Errorf("the issuer's jwks_uri %q: %w", meta.JWKSURI, err)
	}
	return meta.JWKSURI, nil
}

// serverMetadata is what the gateway reads of an issuer's metadata.
type serverMetadata struct {
	Issuer                string `json:"issuer"`
	JWKSURI               string `json:"jwks_uri"`
	IntrospectionEndpoint string `json:"introspection_endpoint"`
}

// metadata is the issuer's metadata: RFC 8414's, then OpenID discovery's,
// at the addresses the MCP specification lists (path insertion first for
// an issuer with a path). The issuer it names must be this one. Unlike a
// client's discovery, it asks nothing of the issuer's flows (PKCE
// support): a resource server only needs its keys and introspection.
func (s *keySet) metadata(ctx context.Context) (*serverMetadata, error) {
	for _, u := range metadataURLs(s.issuer) {
		var meta serverMetadata
		found, err := s.getJSON(ctx, u, &meta)
		switch {
		case err != nil:
			return nil, fmt.Errorf("discovering the issuer's metadata at %s: %w", u, err)
		case !found:
			continue
		case strings.TrimSuffix(meta.Issuer, "/") != strings.TrimSuffix(s.issuer, "/"):
			return nil, fmt.Errorf("the metadata at %s is issuer %q's, not this one's", u, meta.Issuer)
		}
		return &meta, nil
	}
	return nil, errors.New("the issuer publishes no metadata (RFC 8414 or OpenID discovery); configure its jwks")
}

// metadataURLs are where an issuer's metadata may be.
func metadataURLs(issuer string) []string {
	u, err := url.Parse(issuer)
	if err != nil {
		return nil
	}
	path := strings.Trim(u.Path, "/")
	at := func(p string) string { c := *u; c.Path = p; return c.String() }
	if path == "" {
		return []string{at("/.well-known/oauth-authorization-server"), at("/.well-known/openid-configuration")}
	}
	return []string{
		at("/.well-known/oauth-authorization-server/" + path),
		at("/.well-known/openid-configuration/" + path),
		at("/" + path + "/.well-known/openid-configuration"),
	}
}

// getJSON reads the JSON document at u into v, within MaxKeySet bytes;
// found is false when u answers 404 (or another 4xx).
func (s *keySet) getJSON(ctx context.Context, u string, v any) (found bool, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return false, err
	}
	return readJSON(s.client, req, MaxKeySet, v, "application/jwk-set+json")
}

// readJSON sends req and reads the JSON document it is answered with into
// v, within max bytes, in application/json or another of types; found is
// false when it is answered 4xx.
func readJSON(client *http.Client, req *http.Request, max int, v any, types ...string) (found bool, err error) {
	u := req.URL.Redacted()
	req.Header.Set("Accept", "application/json")
	res, err := client.Do(req)
	if err != nil {
		return false, err
	}
	defer res.Body.Close()
	if res.StatusCode >= 400 && res.StatusCode < 500 {
		return false, nil
	}
	if res.StatusCode != http.StatusOK {
		return false, fmt.Errorf("%s answered %d", u, res.StatusCode)
	}
	if mt, _, _ := mime.ParseMediaType(res.Header.Get("Content-Type")); mt != "application/json" && !slices.Contains(types, mt) {
		return false, fmt.Errorf("%s answered %q, not JSON", u, mt)
	}
	body, err := io.ReadAll(io.LimitReader(res.Body, int64(max)+1))
	if err != nil {
		return false, err
	}
	if len(body) > max {
		return false, fmt.Errorf("%s answered over %d bytes", u, max)
	}
	return true, json.Unmarshal(body, v)
}
