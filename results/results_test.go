package results

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/caddymcp/caddy-mcp/feature"
	"github.com/caddymcp/caddy-mcp/feature/featuretest"
)

// newBudgets returns the budgets of cfg, stopped with the test.
func newBudgets(t *testing.T, cfg *Config) *Budgets {
	t.Helper()
	require.NoError(t, cfg.Validate())
	b := New(cfg, nil, zap.NewNop())
	t.Cleanup(b.Stop)
	return b
}

func TestEachToolHasTheBudgetOfItsFirstRuleOrTheDefaultAndTokensCap(t *testing.T) {
	b := newBudgets(t, &Config{Max: 100 << 10, Tools: []Rule{{Match: "search_*", Max: 20 << 10}, {Match: "*_all", Max: 1 << 20}}, Tokens: 25000})
	for tool, want := range map[string]struct {
		budget int
		rule   string
	}{
		"read":       {100 << 10, "tokens"}, // 100,000 bytes of tokens < 100 KiB
		"search_web": {20 << 10, "search_*"},
		"dump_all":   {100000, "*_all"}, // capped by the tokens
	} {
		budget, rule := b.Budget(tool)
		if tool == "read" {
			assert.Equal(t, 100000, budget, tool)
		} else {
			assert.Equal(t, want.budget, budget, tool)
		}
		assert.Equal(t, want.rule, rule, tool)
	}
	budget, _ := newBudgets(t, &Config{Tools: []Rule{{Match: "a", Max: 10}}}).Budget("b")
	assert.Zero(t, budget, "no default: no budget")
}

func TestABudgetIsValidOrRefused(t *testing.T) {
	for _, c := range []Config{{}, {Max: -1}, {Max: 1, Truncate: []string{""}}, {Max: MaxBudget + 1}, {Tokens: MaxBudget}, {Tools: []Rule{{Match: "", Max: 1}}}, {Tools: []Rule{{Match: "a"}}}} {
		assert.Error(t, c.Validate(), "%+v", c)
	}
	assert.NoError(t, (&Config{Max: 1, Tokens: 2, Tools: []Rule{{Match: "a", Max: 3}}}).Validate())
}

func TestOnlyTheCallsResponseIsHeldToTheBudget(t *testing.T) {
	b := newBudgets(t, &Config{Max: 100})
	x := featuretest.Post(t, `{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"big"}}`)
	h := b.Open(x)
	require.NotNil(t, h)
	assert.Equal(t, feature.Needs{Edit: true, Max: 100, MaxEvent: 100, FailClosed: true}, h.Needs())
	long := `"` + strings.Repeat("x", 110) + `"`
	out, err := h.Message(x, []byte(`{"jsonrpc":"2.0","method":"notifications/progress","params":{"message":`+long+`}}`))
	assert.NoError(t, err, "progress passes")
	assert.Nil(t, out)
	out, err = h.Message(x, []byte(`{"jsonrpc":"2.0","id":9,"result":{"content":[{"type":"text","text":`+long+`}]}}`))
	assert.NoError(t, err, "another request's response passes")
	assert.Nil(t, out)
	_, err = h.Message(x, []byte(`{"jsonrpc":"2.0","id":9,"id":4,"result":{"content":[{"type":"text","text":`+long+`}]}}`))
	assert.Error(t, err, "an id given twice may be read as the call's: held to its budget")
	_, err = h.Message(x, []byte(`{"jsonrpc":"2.0","id":4,"result":{"content":[{"type":"text","text":`+long+`}]}}`))
	require.Error(t, err)
	env := h.Unreadable(x, err)
	assert.Equal(t, TooLarge, env.Code)
	assert.Contains(t, env.Message, "bytes, over its budget of 100 bytes")
	assert.Equal(t, TooLarge, h.Unreadable(x, feature.ErrTooLarge).Code)
	assert.NotEqual(t, TooLarge, h.Unreadable(x, errors.New("compressed")).Code)

	assert.Nil(t, b.Open(featuretest.Post(t, `{"jsonrpc":"2.0","id":4,"method":"tools/list"}`)))
	batch := featuretest.Post(t, `[{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"big"}}]`)
	assert.Nil(t, b.Open(batch))
	require.NotNil(t, b.Check(batch), "a batch of calls with budgets is refused: they are held only alone")
	assert.Nil(t, b.Check(x))
}

// On a GET's stream, where nothing says which call a response answers,
// every response is held to the strictest budget any tool has; the
// server's notifications pass.
func TestAResponseOnAGETsStreamIsHeldToTheStrictestBudget(t *testing.T) {
	b := newBudgets(t, &Config{Max: 1000, Tokens: 500, Tools: []Rule{{Match: "small", Max: 100}}})
	x := featuretest.Get(t)
	h := b.Open(x)
	require.NotNil(t, h)
	assert.Equal(t, feature.Needs{Edit: true, Max: 100, MaxEvent: 100, FailClosed: true}, h.Needs(), "the strictest budget: small's")
	long := `"` + strings.Repeat("x", 110) + `"`
	_, err := h.Message(x, []byte(`{"jsonrpc":"2.0","method":"notifications/message","params":{"data":`+long+`}}`))
	assert.NoError(t, err, "a notification passes")
	_, err = h.Message(x, []byte(`{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"short"}]}}`))
	assert.NoError(t, err, "a response within the budget passes")
	_, err = h.Message(x, []byte(`{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":`+long+`}]}}`))
	require.Error(t, err, "any response over it is refused")
	env := h.Unreadable(x, err)
	assert.Equal(t, TooLarge, env.Code)
	assert.Contains(t, env.Message, "sent on a resumed stream is too large to be given to you")
	assert.Contains(t, h.Unreadable(x, feature.ErrTooLarge).Message, "larger than 100 bytes")
}
