package handler

import (
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
