package redisstore

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// panickingConn is a client whose probe panics until told to answer, as
// a bug in the client would; its decisions fail, as with Redis down.
type panickingConn struct {
	pings   atomic.Int32
	answers atomic.Bool
}

func (c *panickingConn) buckets(context.Context, string, []string, []string) ([][3]int64, []bool, []error, error) {
	return nil, nil, nil, errors.New("redis is down")
}

func (c *panickingConn) ping(context.Context) error {
	c.pings.Add(1)
	if !c.answers.Load() {
		panic("the client panics")
	}
	return nil
}

func (c *panickingConn) close() {}

// A probe that panics is a failed one: the prober goes on, and Redis is
// used again once it answers.
func TestAProbeThatPanicsIsAFailedOne(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		core, logs := observer.New(zapcore.DebugLevel)
		c := &panickingConn{}
		b := newBackend(c, time.Second, "test-probe", zap.New(core))
		defer b.Destruct()
		b.trip(errors.New("redis is down"))
		time.Sleep(probeFirst + 2*probeFirst)
		synctest.Wait()
		assert.Equal(t, int32(2), c.pings.Load(), "probed again after a probe panicked")
		assert.True(t, b.down.Load())
		lines := logs.FilterField(zap.String("site", siteProbe)).All()
		require.Len(t, lines, 2)
		assert.Equal(t, "recovered a panic", lines[0].Message)
		_, _, lastErr := b.health()
		assert.Equal(t, errProbePanicked.Error(), lastErr)

		c.answers.Store(true)
		time.Sleep(probeEvery)
		synctest.Wait()
		assert.False(t, b.down.Load(), "Redis answers again")
	})
}
