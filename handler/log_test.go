package handler

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/caddymcp/caddy-mcp/feature/featuretest"
	"github.com/caddymcp/caddy-mcp/internal/envlog"
	"github.com/caddymcp/caddy-mcp/keys"
)

// jsonLog is a JSON log in memory, encoded as Caddy's `format json` does,
// safe for the sampler's timer to write to.
type jsonLog struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *jsonLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *jsonLog) logger() *zap.Logger {
	return zap.New(zapcore.NewCore(zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig()), zapcore.AddSync(l), zapcore.InfoLevel))
}

// size is the bytes written so far.
func (l *jsonLog) size() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Len()
}

// lines are the lines written so far, decoded.
func (l *jsonLog) lines(t *testing.T) []map[string]any {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []map[string]any
	for line := range bytes.Lines(l.buf.Bytes()) {
		var m map[string]any
		require.NoError(t, json.Unmarshal(line, &m), "%s", line)
		out = append(out, m)
	}
	return out
}

// logged sums up a log's lines: the first line of each refusal logged, by
// key, and the refusals the other lines counted, by key.
func logged(t *testing.T, lines []map[string]any) (firsts map[string][]string, repeated map[string]int) {
	t.Helper()
	firsts, repeated = make(map[string][]string), make(map[string]int)
	for _, l := range lines {
		key, _ := l["key"].(string)
		switch l["msg"] {
		case "answered with an envelope":
			id, _ := l["id"].(string)
			firsts[key] = append(firsts[key], id)
		case "answered with more envelopes of this kind":
			n, ok := l["repeated"].(float64)
			require.True(t, ok, "a count line says how many: %v", l)
			repeated[key] += int(n)
		default:
			t.Errorf("unexpected line: %v", l)
		}
	}
	return firsts, repeated
}

// 10,000 refused calls in 10 seconds from one client, and one from another
// in their midst, cost the log the first refusal of each key, as it is
// logged without sampling, and one line counting the client's other
// refusals: a few hundred bytes. The metrics count every refusal.
func TestARefusalStormIsLoggedAsItsFirstRefusalAndItsCount(t *testing.T) {
	for _, tt := range []struct {
		name   string
		logKey bool
		shown  func(string) string
	}{
		{"keys shown as digests", false, keys.Shown},
		{"keys shown as they are, with log_key", true, func(k string) string { return k }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				const storm = 10_000
				log := &jsonLog{}
				h := provision(t, &Handler{
					FeaturesRaw: features(t, "rate_limits", map[string]*RateLimit{"storm_limit": {Rate: "1/1h", Key: "{header.X-Client}"}}),
					LogKey:      tt.logKey,
					logger:      log.logger(),
				})
				u := &upstream{}
				for i, c := range []string{"client-a", "client-b"} {
					requireForwarded(t, u, i+1, serve(t, h, post(toolsCall(`"spend"`, "echo"), header("X-Client", c)), u))
				}
				refusals := envelopesTotal.WithLabelValues("RATE_LIMITED")
				before := featuretest.Counted(t, refusals)

				for i := range storm {
					serve(t, h, post(toolsCall(fmt.Sprintf(`"a-%d"`, i), "echo"), header("X-Client", "client-a")), u)
					if i == storm/2 {
						serve(t, h, post(toolsCall(`"b"`, "echo"), header("X-Client", "client-b")), u)
					}
					time.Sleep(time.Millisecond)
				}
				time.Sleep(2 * envlog.Every)
				synctest.Wait()
				assert.Equal(t, 2, u.calls, "every call of the storm refused")
				assert.Equal(t, float64(storm+1), featuretest.Counted(t, refusals)-before, "the metrics count every refusal")

				assert.Less(t, log.size(), 100<<10, "the log lines of %d refusals", storm+1)
				lines := log.lines(t)
				for _, l := range lines {
					t.Logf("%v", l)
				}
				a, b := tt.shown("client-a"), tt.shown("client-b")
				firsts, repeated := logged(t, lines)
				assert.Equal(t, map[string][]string{a: {"a-0"}, b: {"b"}}, firsts, "the first refusal of each key")
				assert.Equal(t, map[string]int{a: storm - 1}, repeated, "the others counted")
				assert.Len(t, lines, 3, "the storm's first refusal and its count, the other client's refusal")
			})
		})
	}
}

// The lines of one kind come at most once per interval, each counting the
// refusals since the last.
func TestARefusalThatRepeatsIsCountedOncePerInterval(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		log := &jsonLog{}
		h := provision(t, &Handler{
			FeaturesRaw: features(t, "rate_limits", map[string]*RateLimit{"interval_limit": {Rate: "1/1h"}}),
			logger:      log.logger(),
		})
		u := &upstream{}
		requireForwarded(t, u, 1, serve(t, h, post(callOne), u))
		start := time.Now()
		// Three refusals a second for 25 seconds, then a pause, then one.
		for range 75 {
			serve(t, h, post(callOne), u)
			time.Sleep(time.Second / 3)
		}
		time.Sleep(3 * envlog.Every)
		serve(t, h, post(callOne), u)

		var lines []string
		for _, l := range log.lines(t) {
			at := time.Unix(0, int64(l["ts"].(float64)*1e9)).Sub(start).Round(time.Second)
			n, _ := l["repeated"].(float64)
			lines = append(lines, fmt.Sprintf("%s %s %v", at, l["msg"], n))
		}
		assert.Equal(t, []string{
			"0s answered with an envelope 0",
			"10s answered with more envelopes of this kind 30",
			"20s answered with more envelopes of this kind 30",
			"30s answered with more envelopes of this kind 14",
			"55s answered with an envelope 0",
		}, lines, "after a quiet interval, a refusal is logged at once")
	})
}

// A client that changes its key at every call cannot grow what the log
// keeps: beyond envlog.MaxKinds kinds, a refusal is counted with the others of
// its code and limit, and the lines say so.
func TestAClientRotatingItsKeyIsCountedPerLimitBeyondTheKindsKept(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const rotating = envlog.MaxKinds + 500
		log := &jsonLog{}
		h := provision(t, &Handler{
			FeaturesRaw: features(t, "rate_limits", map[string]*RateLimit{"rotated_limit": {Rate: "1/1h", Key: "{header.X-Client}"}}),
			logger:      log.logger(),
		})
		u := &upstream{}
		for i := range rotating {
			r := func() *http.Request {
				return post(toolsCall(fmt.Sprintf(`"%d"`, i), "echo"), header("X-Client", fmt.Sprint("rotating-", i)))
			}
			serve(t, h, r(), u)
			serve(t, h, r(), u)
		}
		require.Equal(t, rotating, u.calls, "each key's first call passes, its second is refused")
		time.Sleep(2 * envlog.Every)
		synctest.Wait()

		lines := log.lines(t)
		var first, overflowFirst, counted int
		for _, l := range lines {
			assert.Equal(t, "rotated_limit", l["limit"])
			switch {
			case l["msg"] == "answered with an envelope" && l["overflow"] == nil:
				first++
			case l["msg"] == "answered with an envelope":
				overflowFirst++
				assert.Equal(t, keys.Shown(fmt.Sprint("rotating-", envlog.MaxKinds)), l["key"], "the first refusal beyond, with its key")
			default:
				assert.Equal(t, true, l["overflow"])
				assert.NotContains(t, l, "key", "a count for the whole limit")
				n, _ := l["repeated"].(float64)
				counted += int(n)
			}
		}
		assert.Equal(t, envlog.MaxKinds, first, "one line for each key kept")
		assert.Equal(t, 1, overflowFirst)
		assert.Equal(t, rotating-envlog.MaxKinds-1, counted, "every refusal beyond counted")
		assert.Len(t, lines, envlog.MaxKinds+2)
	})
}
