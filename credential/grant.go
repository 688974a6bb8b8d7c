package credential

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/caddyserver/caddy/v2"
	"go.uber.org/zap"
	"golang.org/x/sync/singleflight"
	"golang.org/x/time/rate"

	"github.com/caddymcp/caddy-mcp/feature"
	"github.com/caddymcp/caddy-mcp/internal/panics"
)

// grant obtains the tokens of a token_exchange or client_credentials
// handler from its issuer: each exchanged token once per caller until
// shortly before it expires, the gateway's own once for every caller, one
// request at a time per token (the first caller's; the others wait for
// it), within the rate the issuer is asked at, and for no longer than the
// timeout.
type grant struct {
	h      *Handler
	asker  *asker
	cache  *cache
	flight singleflight.Group
	limit  *rate.Limiter
	clock  func() time.Time
	wait   func(time.Duration) // time.Sleep, but in tests

	// down is why the issuer is not asked again until a time: it could
	// not be reached, or answered what cannot be used. Until then its
	// server's calls are answered at once.
	down atomic.Pointer[down]

	// refusals remembers the issuer's refusals of a caller's token for a
	// while, so that a model calling again and again is answered without
	// asking again.
	mu       sync.Mutex
	refusals map[[32]byte]refusal
}

// refusal is an issuer's refusal remembered.
type refusal struct {
	err   *issuerError
	until time.Time
}

// down is an issuer not asked until a time: out of reach (ie nil), or
// answering what the gateway cannot use (its client refused, its token not
// passed on).
type down struct {
	until time.Time
	ie    *issuerError
}

const (
	// downFor is how long an issuer that could not be reached is not
	// asked again, and what its server's callers are told to wait.
	downFor = 5 * time.Second
	// unusableFor is the same for an issuer whose answers the gateway
	// cannot use: the operator's to fix.
	unusableFor = time.Minute
	// refusedFor is how long an issuer's refusal of a caller's token is
	// remembered.
	refusedFor = 30 * time.Second
	// maxRefusals bounds the refusals remembered.
	maxRefusals = 4096
	// maxWait is the longest a caller waits for the rate the issuer is
	// asked at; past it, it is told to come back.
	maxWait = time.Second
)

func newGrant(h *Handler) (*grant, error) {
	a, err := newAsker(h)
	if err != nil {
		return nil, err
	}
	g := &grant{h: h, asker: a, clock: time.Now, wait: time.Sleep, refusals: make(map[[32]byte]refusal)}
	v, _, err := kept.LoadOrNew(h.poolKey(), func() (caddy.Destructor, error) {
		k := &keptState{limit: rate.NewLimiter(rate.Limit(orDefault(h.Rate, DefaultRate)), orDefault(h.Burst, DefaultBurst))}
		if h.Use == TokenExchange {
			k.cache = newCache(orDefault(h.Cache.Tokens, DefaultCacheTokens), orDefault(h.Cache.Bytes, DefaultCacheBytes))
		} else {
			k.cache = newCache(1, MaxTokenBytes*2)
		}
		return k, nil
	})
	if err != nil {
		return nil, err
	}
	k := v.(*keptState)
	g.cache, g.limit = k.cache, k.limit
	return g, nil
}

// kept are the tokens remembered and the rate the issuer is asked at,
// which survive config reloads, by what they are for (poolKey): a reload
// that keeps a server's credential as it was does not ask the issuer
// again for every caller.
var kept = caddy.NewUsagePool()

type keptState struct {
	cache *cache
	limit *rate.Limiter
}

func (*keptState) Destruct() error { return nil }

// poolKey is what h's tokens are for, and their bounds: every setting but
// the client's secret or key (the tokens they obtained stay good).
func (h *Handler) poolKey() string {
	return strings.Join([]string{h.Use, h.Issuer, h.TokenEndpoint, h.Client.ID, h.Audience, h.Resource,
		strings.Join(h.Scopes, " "), h.SubjectTokenType, fmt.Sprint(h.OnBehalfOf, h.Cache.Tokens, h.Cache.Bytes, h.Rate, h.Burst)}, "\x00")
}

func orDefault[T int | int64](v, d T) T {
	if v > 0 {
		return v
	}
	return d
}

// token is the token for r's server, or the refusal to answer r with.
func (g *grant) token(r *http.Request) (string, *feature.Refused) {
	server := serverOf(r)
	var subject string
	var key [32]byte
	if g.h.Use == TokenExchange {
		v := feature.VerifiedOf(r)
		if v == nil {
			count(g.h.Use, server, "unverified")
			return "", unverified(server)
		}
		if !sameIssuer(v.Principal.Issuer, g.h.Issuer) {
			count(g.h.Use, server, "other_issuer")
			return "", otherIssuer(server, g.h.Issuer)
		}
		subject, key = v.Token, callerKey(v)
	}
	now := g.clock()
	if tok, ok := g.cache.get(key, now); ok {
		count(g.h.Use, server, "remembered")
		return tok, nil
	}
	tokenKey := sha256.Sum256([]byte(subject))
	if ie := g.refused(tokenKey, now); ie != nil {
		count(g.h.Use, server, "refused")
		return "", ie.refusal(server)
	}
	if d := g.down.Load(); d != nil && now.Before(d.until) {
		if d.ie != nil {
			count(g.h.Use, server, d.ie.outcome())
			return "", d.ie.refusal(server)
		}
		count(g.h.Use, server, "unavailable")
		return "", unavailable(server, d.until.Sub(now), nil)
	}
	return g.ask(r, server, key, tokenKey, subject)
}

// ask asks the issuer for the token of key, once however many callers
// want it at once, each waiting as long as its own request may.
func (g *grant) ask(r *http.Request, server string, key, tokenKey [32]byte, subject string) (string, *feature.Refused) {
	ch := g.flight.DoChan(string(key[:]), func() (v any, err error) {
		defer panics.Recover(g.h.logger, "credential")
		return g.fetch(server, key, tokenKey, subject)
	})
	select {
	case res := <-ch:
		if res.Err != nil {
			return "", g.failed(server, res.Err)
		}
		count(g.h.Use, server, "obtained")
		return res.Val.(string), nil
	case <-r.Context().Done():
		return "", &feature.Refused{Refusal: feature.Refusal{Gone: true, Cause: r.Context().Err()}}
	}
}

// errLimited: the issuer is asked at its rate already.
var errLimited = errors.New("the issuer is asked for tokens at the rate allowed")

// fetch asks the issuer, under a context of its own: the first caller
// leaving does not fail the others.
func (g *grant) fetch(server string, key, tokenKey [32]byte, subject string) (string, error) {
	now := g.clock()
	if tok, ok := g.cache.get(key, now); ok {
		return tok, nil // a flight that ended as this one began
	}
	res := g.limit.ReserveN(now, 1)
	if d := res.DelayFrom(now); d > maxWait {
		res.CancelAt(now)
		return "", errLimited
	} else if d > 0 {
		g.wait(d)
	}
	ctx, cancel := context.WithTimeout(context.Background(), g.asker.timeout)
	defer cancel()
	tok, err := g.asker.ask(ctx, subject)
	now = g.clock()
	g.h.stat.asked(now, err)
	if err != nil {
		// Logged once per request to the issuer, not per caller waiting.
		var ie *issuerError
		switch {
		case errors.As(err, &ie) && ie.refused():
			g.remember(tokenKey, ie, now)
		case errors.As(err, &ie):
			g.down.Store(&down{until: now.Add(unusableFor), ie: ie})
			g.h.logger.Error("the issuer's answer cannot be used to give a server its credential: check the gateway's client at the issuer, and what it issues", zap.String("server", server), zap.Error(err))
		default:
			g.down.Store(&down{until: now.Add(downFor)})
			g.h.logger.Warn("the issuer could not be asked for a server's credential", zap.String("server", server), zap.Error(err))
		}
		return "", err
	}
	g.cache.put(key, tok.value, tok.expiry, now)
	return tok.value, nil
}

// failed is the refusal for err, the flight's failure.
func (g *grant) failed(server string, err error) *feature.Refused {
	var ie *issuerError
	switch {
	case errors.Is(err, errLimited):
		count(g.h.Use, server, "limited")
		return limited(server)
	case errors.As(err, &ie):
		count(g.h.Use, server, ie.outcome())
		return ie.refusal(server)
	}
	count(g.h.Use, server, "unavailable")
	return unavailable(server, downFor, err)
}

func (g *grant) refused(k [32]byte, now time.Time) *issuerError {
	g.mu.Lock()
	defer g.mu.Unlock()
	r, ok := g.refusals[k]
	if !ok {
		return nil
	}
	if now.After(r.until) {
		delete(g.refusals, k)
		return nil
	}
	return r.err
}

func (g *grant) remember(k [32]byte, ie *issuerError, now time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.refusals) >= maxRefusals {
		for old := range g.refusals { // one at random
			delete(g.refusals, old)
			break
		}
	}
	g.refusals[k] = refusal{err: ie, until: now.Add(refusedFor)}
}

// callerKey is the key of the caller's exchanged token: its issuer,
// subject, client and scopes (the server is the handler's own).
func callerKey(v *feature.Verified) [32]byte {
	p := v.Principal
	h := sha256.New()
	for _, s := range []string{p.Issuer, p.Subject, p.ClientID, strings.Join(p.Scopes, " ")} {
		h.Write([]byte(s))
		h.Write([]byte{0})
	}
	var k [32]byte
	h.Sum(k[:0])
	return k
}

// sameIssuer reports whether a and b name one issuer, a trailing slash
// either side aside.
func sameIssuer(a, b string) bool {
	return strings.TrimSuffix(a, "/") == strings.TrimSuffix(b, "/")
}
