package oauth

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// panickingTransport is the client's transport, which panics once told
// to, as a bug under the fetch would; it tells whether each request it
// saw carried the value of requestKey.
type panickingTransport struct {
	base      http.RoundTripper
	panicking atomic.Bool
	mu        sync.Mutex
	ofRequest []bool
}

type requestKey struct{}

var errTransportPanics = errors.New("the transport panics")

func (p *panickingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	p.mu.Lock()
	p.ofRequest = append(p.ofRequest, r.Context().Value(requestKey{}) != nil)
	p.mu.Unlock()
	if p.panicking.Load() {
		panic(errTransportPanics)
	}
	return p.base.RoundTrip(r)
}

func (p *panickingTransport) seen() []bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]bool(nil), p.ofRequest...)
}

// panicsLogged is the lines logs holds of panics recovered in fetches of
// keys.
func panicsLogged(logs *observer.ObservedLogs) []observer.LoggedEntry {
	return logs.FilterField(zap.String("site", siteKeys)).All()
}

// A fetch of keys that panics, on the goroutine that refreshes aged keys
// or on a request's, is a failed fetch: it is logged, the keys held serve
// on, and the next fetch may run.
func TestAKeyFetchThatPanicsIsAFailedOne(t *testing.T) {
	is, _, c, claims := setup(t)
	core, logs := observer.New(zapcore.DebugLevel)
	tr := &panickingTransport{base: is.srv.Client().Transport}
	v := NewVerifier([]Issuer{{URL: is.srv.URL}}, 30*time.Second, &http.Client{Transport: tr}, c.Now, zap.New(core))
	ctx := context.WithValue(t.Context(), requestKey{}, "the request's")
	_, err := v.Verify(ctx, is.sign(t, "k1", claims), resource)
	require.NoError(t, err)

	t.Run("refreshing aged keys", func(t *testing.T) {
		tr.panicking.Store(true)
		c.advance(KeysMaxAge)
		claims["iat"], claims["exp"] = c.Now().Unix(), c.Now().Add(time.Hour).Unix()
		_, err := v.Verify(ctx, is.sign(t, "k1", claims), resource)
		require.NoError(t, err, "the aged keys serve")
		require.Eventually(t, func() bool { return len(panicsLogged(logs)) == 1 }, 10*time.Second, time.Millisecond)
		keys := v.issuers[is.srv.URL]
		require.Eventually(t, func() bool { // the fetch is over, and lets the next one run
			if !keys.fetching.TryLock() {
				return false
			}
			keys.fetching.Unlock()
			return true
		}, 10*time.Second, time.Millisecond)
		keys.mu.Lock()
		assert.Equal(t, errFetchPanicked, keys.err, "a failed fetch, as the status shows it")
		keys.mu.Unlock()
		seen := tr.seen()
		assert.False(t, seen[len(seen)-1], "the refresh keeps nothing of the request that started it")
		require.Equal(t, "recovered a panic", panicsLogged(logs)[0].Message)
		line := panicsLogged(logs)[0].ContextMap()
		assert.Equal(t, errTransportPanics.Error(), line["panic"])
		assert.Contains(t, line["stack"], "oauth.(*panickingTransport).RoundTrip")
	})
	t.Run("on a request", func(t *testing.T) {
		fresh := NewVerifier([]Issuer{{URL: is.srv.URL}}, 30*time.Second, &http.Client{Transport: tr}, c.Now, zap.New(core))
		_, err := fresh.Verify(ctx, is.sign(t, "k1", claims), resource)
		assert.Equal(t, IssuerUnavailable, reason(t, err), "no keys: the issuer is as good as unreachable")
		assert.Len(t, panicsLogged(logs), 2)
	})
}
