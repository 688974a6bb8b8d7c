package handler

import (
	"bytes"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// A call to a tool the policy hides is the gateway's own policy at work,
// logged at info as the limits' refusals are; whether the call is alone or
// in a batch.
func TestAHiddenToolsRefusalIsLoggedAtInfo(t *testing.T) {
	for name, body := range map[string]string{
		"alone":    toolsCall(`1`, "admin_reset"),
		"in batch": "[" + toolsCall(`1`, "search") + "," + toolsCall(`2`, "admin_reset") + "]",
	} {
		t.Run(name, func(t *testing.T) {
			core, logs := observer.New(zapcore.DebugLevel)
			h := provision(t, &Handler{FeaturesRaw: features(t, "tools", &Tools{Deny: []string{"admin_*"}}), logger: zap.New(core)})
			u := &upstream{}
			w := serve(t, h, post(body), u)
			assert.Zero(t, u.calls, "a hidden tool's call never reaches the upstream")
			assert.Contains(t, []int{http.StatusOK, http.StatusBadRequest}, w.Code)
			assert.Contains(t, w.Body.String(), "UNKNOWN_ACTION")

			entries := logs.FilterMessage("answered with an envelope").All()
			require.Len(t, entries, 1)
			assert.Equal(t, zapcore.InfoLevel, entries[0].Level)
			assert.Equal(t, "UNKNOWN_ACTION", entries[0].ContextMap()["code"])
		})
	}
}

// An answer is held as it arrives, however it is cut, in chunks whose
// room never passes the bound: one that outgrows the bound, or declares
// it will, is refused having cost at most the bound.
func TestHeldBytesKeepWhatArrivesWithinTheBound(t *testing.T) {
	body := bytes.Repeat([]byte("0123456789abcdef"), 40_000) // 640,000 bytes
	room := func(h *heldBytes) (n int) {
		for _, c := range h.chunks {
			n += cap(c)
		}
		return n
	}
	for _, write := range []int{1, 1000, 32 << 10, len(body)} {
		for _, c := range []struct {
			name  string
			limit int
			want  int64
			fits  bool
		}{
			{"no length declared", len(body), -1, true},
			{"its length declared", len(body), int64(len(body)), true},
			{"no length declared, over the bound", len(body) - 1, -1, false},
			{"declared over the bound", len(body) - 1, int64(len(body)), false},
		} {
			var h heldBytes
			fits := true
			for p := body; len(p) > 0 && fits; p = p[min(write, len(p)):] {
				fits = h.add(p[:min(write, len(p))], c.limit, c.want)
			}
			assert.Equal(t, c.fits, fits, "%s, written %d at a time", c.name, write)
			assert.LessOrEqual(t, room(&h), c.limit, "%s, written %d at a time", c.name, write)
			if c.fits {
				assert.Equal(t, body, h.bytes(), "%s, written %d at a time", c.name, write)
			}
			if c.want >= 0 && c.fits {
				assert.Len(t, h.chunks, 1, "a declared length is held in one chunk")
			}
			if c.want > int64(c.limit) {
				assert.Zero(t, room(&h), "an answer declared too long costs nothing")
			}
		}
	}
}
