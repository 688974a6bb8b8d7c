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

// poolKey is what h's tokens are for, how they were obtained, and their
// bounds: every setting.
func (h *Handler) poolKey() string {
	// The secret and the key by their digest: a reload that rotates them
	// (after a leak, say) lets go of what they obtained.
	secret := sha256.Sum256([]byte(h.Client.Secret + "\x00" + h.Client.Key))
	return strings.Join([]string{h.Use, h.Issuer, h.TokenEndpoint, h.Client.ID, string(secret[:]), h.Audience, h.Resource,
		strings.Join(h.Scopes, " "), h.SubjectTokenType, fmt.Sprint(h.OnBehalfOf, h.Cache.Tokens, h.Cache.Bytes, h.Rate, h.Burst)}, "\x00")
}

func orDefault[T int | int64](v, d T) T {
	if v > 0 {
		return v
	}
	return d
}

// call is what a request needs of the issuer: the token of the caller
// (subject: "" for the gateway's own), remembered under key until at
// most expires (the caller's token's expiry), and the resource the
// gateway verified it for, which the server's token must not be for.
type call struct {
	server  string
	subject string
	key     [32]byte
	expires time.Time
	gateway string
}

// token is the token for r's server, or the refusal to answer r with.
func (g *grant) token(r *http.Request) (string, *feature.Refused) {
	c := call{server: serverOf(r)}
	v := feature.VerifiedOf(r)
	if v != nil {
		c.gateway = v.Audience
	}
	if g.h.Use == TokenExchange {
		if v == nil {
			count(g.h.Use, c.server, "unverified")
			return "", unverified(c.server)
		}
		if !sameIssuer(v.Principal.Issuer, g.h.Issuer) {
			count(g.h.Use, c.server, "other_issuer")
			return "", otherIssuer(c.server, g.h.Issuer)
		}
		// Remembered per token, not per principal: a token of other
		// claims (another organization, a lower assurance, fewer
		// roles) never gets the token another one obtained.
		c.subject, c.key, c.expires = v.Token, sha256.Sum256([]byte(v.Token)), v.Expiry
	}
	now := g.clock()
	if tok, ok := g.cache.get(c.key, now); ok {
		count(g.h.Use, c.server, "remembered")
		return tok, nil
	}
	if ie := g.refused(c.key, now); ie != nil {
		count(g.h.Use, c.server, ie.outcome())
		return "", ie.refusal(c.server)
	}
	if d := g.down.Load(); d != nil && now.Before(d.until) {
		if d.ie != nil {
			count(g.h.Use, c.server, d.ie.outcome())
			return "", d.ie.refusal(c.server)
		}
		count(g.h.Use, c.server, "unavailable")
		return "", unavailable(c.server, d.until.Sub(now), nil)
	}
	return g.ask(r, c)
}

// errPanicked: the request to the issuer panicked (and was recovered).
var errPanicked = errors.New("asking the issuer panicked")

// ask asks the issuer for the token of c, once however many callers want
// it at once, each waiting as long as its own request may.
func (g *grant) ask(r *http.Request, c call) (string, *feature.Refused) {
	ch := g.flight.DoChan(string(c.key[:]), func() (v any, err error) {
		defer func() {
			if p := recover(); p != nil {
				panics.Report(g.h.logger, "credential", p)
				v, err = nil, errPanicked
			}
		}()
		return g.fetch(c)
	})
	select {
	case res := <-ch:
		tok, ok := res.Val.(string)
		if res.Err != nil || !ok {
			return "", g.failed(c.server, res.Err)
		}
		count(g.h.Use, c.server, "obtained")
		return tok, nil
	case <-r.Context().Done():
		if err := r.Context().Err(); !errors.Is(err, context.Canceled) {
			// The request's own deadline (the gateway's, for its own
			// requests): the issuer was too slow for it.
			count(g.h.Use, c.server, "unavailable")
			return "", unavailable(c.server, downFor, err)
		}
		return "", &feature.Refused{Refusal: feature.Refusal{Gone: true, Cause: r.Context().Err()}}
	}
}

// errLimited: the issuer is asked at its rate already.
var errLimited = errors.New("the issuer is asked for tokens at the rate allowed")

// fetch asks the issuer, under a context of its own: the first caller
// leaving does not fail the others.
func (g *grant) fetch(c call) (string, error) {
	now := g.clock()
	if tok, ok := g.cache.get(c.key, now); ok {
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
	tok, err := g.asker.ask(ctx, c.subject, c.gateway)
	now = g.clock()
	if err != nil {
		g.settle(c, err, now)
		return "", err
	}
	g.h.stat.asked(now, nil)
	expiry := tok.expiry
	if !c.expires.IsZero() && (expiry.IsZero() || c.expires.Before(expiry)) {
		expiry = c.expires // never given past the caller's own token
	}
	g.cache.put(c.key, tok.value, expiry, now)
	return tok.value, nil
}

// settle records why the issuer gave c no token, once per request to it
// (not per caller waiting): a refusal of the caller's token, for that
// token; the gateway's own client refused or an answer it cannot use, for
// every caller for a minute (the operator's to fix, logged at error); an
// issuer out of reach, for every caller for a few seconds.
func (g *grant) settle(c call, err error, now time.Time) {
	var ie *issuerError
	switch {
	case errors.As(err, &ie) && ie.code == "temporarily_unavailable":
		g.down.Store(&down{until: now.Add(downFor)})
		g.h.stat.asked(now, err)
	case errors.As(err, &ie) && ie.gateways():
		g.down.Store(&down{until: now.Add(unusableFor), ie: ie})
		g.h.stat.asked(now, err)
		g.h.logger.Error("the issuer's answer cannot be used to give a server its credential: check the gateway's client at the issuer, and what it issues", zap.String("server", c.server), zap.Error(err))
	case errors.As(err, &ie):
		// The caller's: its token refused, or an error no other caller
		// need share.
		g.remember(c.key, ie, now)
	default:
		g.down.Store(&down{until: now.Add(downFor)})
		g.h.stat.asked(now, err)
		g.h.logger.Warn("the issuer could not be asked for a server's credential", zap.String("server", c.server), zap.Error(err))
	}
}

// failed is the refusal for err, the flight's failure.
func (g *grant) failed(server string, err error) *feature.Refused {
	var ie *issuerError
	switch {
	case errors.Is(err, errLimited):
		count(g.h.Use, server, "limited")
		return limited(server)
	case errors.As(err, &ie) && ie.code != "temporarily_unavailable":
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

// sameIssuer reports whether a and b name one issuer, a trailing slash
// either side aside.
func sameIssuer(a, b string) bool {
	return strings.TrimSuffix(a, "/") == strings.TrimSuffix(b, "/")
}
