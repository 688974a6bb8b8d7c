package oauth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"sync"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/modelcontextprotocol/go-sdk/auth"
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

// keySet is one issuer's keys.
type keySet struct {
	issuer string
	// jwksURL is the key set's address: configured, or discovered from
	// the issuer's metadata on the first fetch.
	jwksURL string
	client  *http.Client
	now     func() time.Time

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

// match returns the keys of set a token naming kid may be signed with.
func match(set []jose.JSONWebKey, kid string) []jose.JSONWebKey {
	if kid == "" {
		return set
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
// bounded by FetchTimeout.
func (s *keySet) fetch(ctx context.Context) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), FetchTimeout)
	defer cancel()
	keys, err := s.get(ctx)
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
		meta, err := auth.GetAuthServerMetadata(ctx, s.issuer, s.client)
		switch {
		case err != nil:
			return nil, fmt.Errorf("discovering the issuer's metadata: %w", err)
		case meta == nil:
			return nil, errors.New("the issuer publishes no metadata (RFC 8414 or OpenID discovery); configure its jwks")
		case meta.JWKSURI == "":
			return nil, errors.New("the issuer's metadata names no jwks_uri; configure its jwks")
		}
		s.jwksURL = meta.JWKSURI
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.jwksURL, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	res, err := s.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("fetching the issuer's keys: %w", err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("fetching the issuer's keys: %s answered %d", s.jwksURL, res.StatusCode)
	}
	if mt, _, _ := mime.ParseMediaType(res.Header.Get("Content-Type")); mt != "application/json" && mt != "application/jwk-set+json" {
		return nil, fmt.Errorf("fetching the issuer's keys: %s answered %q, not JSON", s.jwksURL, mt)
	}
	body, err := io.ReadAll(io.LimitReader(res.Body, MaxKeySet+1))
	if err != nil {
		return nil, fmt.Errorf("fetching the issuer's keys: %w", err)
	}
	if len(body) > MaxKeySet {
		return nil, fmt.Errorf("the issuer's key set is over %d bytes", MaxKeySet)
	}
	var set jose.JSONWebKeySet
	if err := json.Unmarshal(body, &set); err != nil {
		return nil, fmt.Errorf("the issuer's key set: %w", err)
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
