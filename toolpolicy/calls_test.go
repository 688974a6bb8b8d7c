package toolpolicy

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/caddymcp/caddy-mcp/envelope"
	"github.com/caddymcp/caddy-mcp/feature"
	"github.com/caddymcp/caddy-mcp/feature/featuretest"
)

// listedTools are the tools the upstream listed, as validate would say.
type listedTools []string

func (l listedTools) Absent(_ *feature.Exchange, tool string) bool {
	for _, t := range l {
		if t == tool {
			return false
		}
	}
	return true
}

func (l listedTools) Nearest(*feature.Exchange, string) []string { return []string(l) }

// A call to a hidden tool is refused as one to a tool that does not exist;
// in a batch, the whole batch is, and so is a call to a tool the list lacks
// (the two must look alike); a batch holding a tools/list is refused when
// the policy edits lists.
func TestThePolicyRefusesCallsToHiddenTools(t *testing.T) {
	call := func(id, tool string) string {
		return `{"jsonrpc":"2.0",` + id + `"method":"tools/call","params":{"name":"` + tool + `"}}`
	}
	tests := []struct {
		name       string
		body       string
		wantCode   envelope.Code // "" when it passes
		wantStatus int
		denied     bool // counted as a call to a hidden tool
	}{
		{"an allowed call passes", call(`"id":1,`, "search"), "", 0, false},
		{"a hidden call is unknown", call(`"id":1,`, "admin_reset"), envelope.UnknownAction, http.StatusOK, true},
		{"a hidden call as a notification is refused", call("", "admin_reset"), envelope.UnknownAction, http.StatusBadRequest, true},
		{"a batch with a hidden call is refused whole", "[" + call(`"id":1,`, "search") + "," + call(`"id":2,`, "admin_x") + "]", envelope.UnknownAction, http.StatusBadRequest, true},
		{"a batch with a call the list lacks looks alike", "[" + call(`"id":1,`, "nope") + "]", envelope.UnknownAction, http.StatusBadRequest, false},
		{"a batch holding a tools/list", `[{"jsonrpc":"2.0","id":1,"method":"tools/list"}]`, envelope.ValidationError, http.StatusOK, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := &Calls{Rules: testAnswers(t).Rules, Tools: listedTools{"search", "admin_reset"}}
			before := featuretest.Counted(t, toolCalls.WithLabelValues("denied"))
			ref := c.Check(featuretest.Post(t, tt.body))
			if tt.denied {
				assert.Equal(t, before+1, featuretest.Counted(t, toolCalls.WithLabelValues("denied")))
			}
			if tt.wantCode == "" {
				assert.Nil(t, ref)
				return
			}
			require.NotNil(t, ref)
			assert.Equal(t, tt.wantCode, ref.Envelope.Code)
			assert.Equal(t, tt.wantStatus, ref.Status)
			assert.NotContains(t, ref.Envelope.Text(), "hidden", "the words never say a tool is hidden")
		})
	}
}

func TestACallsDeadlineIsItsToolsTimeout(t *testing.T) {
	rules, err := New(nil, nil, nil, []Deadline{{Tools: "slow_*", After: 30 * time.Second}})
	require.NoError(t, err)
	c := &Calls{Rules: rules}
	tests := []struct {
		name string
		body string
		want time.Duration
	}{
		{"a call to a tool with a timeout", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"slow_search"}}`, 30 * time.Second},
		{"a call to another tool", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"search"}}`, 0},
		{"a batch: a deadline cuts one call's answer", `[{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"slow_search"}}]`, 0},
		{"a list", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, 0},
		{"a notification", `{"jsonrpc":"2.0","method":"tools/call","params":{"name":"slow_search"}}`, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			x := featuretest.Post(t, tt.body)
			assert.Equal(t, tt.want, c.Deadline(x))
		})
	}
	env := c.TimedOut(featuretest.Post(t, tests[0].body), 30*time.Second)
	assert.Equal(t, envelope.Timeout, env.Code)
	assert.Equal(t, `The tool "slow_search" did not answer within 30s, the longest this gateway lets it run; the gateway asked the MCP server to stop it`, env.Message)
}
