package envlog

import (
	"net/http/httptest"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/caddymcp/caddy-mcp/envelope"
	"github.com/caddymcp/caddy-mcp/feature"
	"github.com/caddymcp/caddy-mcp/internal/panics/panicstest"
)

// The envelopes not logged are counted on the sampler's timer, a goroutine
// of its own: a log that panics there costs that line, and Caddy and the
// sampler go on.
func TestALogThatPanicsOnTheSamplersTimerCostsTheLineOnly(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		log, logger := panicstest.New("answered with more envelopes")
		l := New(logger, false)
		defer l.Stop()
		x := &feature.Exchange{Request: httptest.NewRequest("POST", "/mcp", nil), Start: time.Now()}
		env := envelope.New(envelope.RateLimited, "too many calls").Envelope()
		rule := feature.Rule{Kind: "limit", Name: "per_client", Keyed: true, Key: "k"}
		before := panicstest.RecoveredAt(PanicSite)
		for range 2 {
			for range 3 {
				l.Write(x, &env, rule, nil)
			}
			time.Sleep(2 * Every)
			synctest.Wait()
		}
		const line = "answered with an envelope"
		assert.Equal(t, []string{line, "recovered a panic", line, "recovered more panics"}, log.Lines())
		assert.Equal(t, before+2, panicstest.RecoveredAt(PanicSite), "the sampler's timer runs on")
	})
}
