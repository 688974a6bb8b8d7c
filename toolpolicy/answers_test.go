package toolpolicy

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/caddymcp/caddy-mcp/envelope"
	"github.com/caddymcp/caddy-mcp/feature"
	"github.com/caddymcp/caddy-mcp/feature/featuretest"
)

func testAnswers(t *testing.T) *Answers {
	t.Helper()
	rules, err := New(nil, []string{"admin_*"}, []Deprecation{{Tool: "old", Message: "use new", Replacements: []string{"new"}}}, nil)
	require.NoError(t, err)
	return &Answers{Rules: rules, Logger: zap.NewNop()}
}

// Each hook of the policy, fed the messages of an answer and its end as
// the core feeds them, without Caddy: what it sends in their place, what
// it needs, and what it counts.
func TestThePolicysHooksReadAnswers(t *testing.T) {
	const (
		list     = `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`
		callOld  = `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"old"}}`
		callNew  = `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"new"}}`
		progress = `{"jsonrpc":"2.0","method":"notifications/progress","params":{"progress":1}}`
	)
	tests := []struct {
		name     string
		request  string // "" for a GET
		messages []string
		ending   feature.Ending
		want     []string // what each message becomes; "" for as it is
		wantErr  []bool
		needs    feature.Needs
		outcome  string // the call outcome counted, "" for none
	}{
		{name: "a list loses its hidden tools", request: list,
			messages: []string{progress, `{"jsonrpc":"2.0","id":1,"result":{"tools":[{"name":"admin_reset"},{"name":"search"}]}}`},
			want:     []string{"", `{"jsonrpc":"2.0","id":1,"result":{"tools":[{"name":"search"}]}}`},
			needs:    feature.Needs{Edit: true, Max: MaxList, FailClosed: true}},
		{name: "a list answering another id is not read", request: list,
			messages: []string{`{"jsonrpc":"2.0","id":9,"result":{"tools":[{"name":"admin_reset"}]}}`},
			want:     []string{""}, needs: feature.Needs{Edit: true, Max: MaxList, FailClosed: true}},
		{name: "a list whose result is given twice cannot be read", request: list,
			messages: []string{`{"jsonrpc":"2.0","id":1,"result":{"tools":[]},"result":{"tools":[{"name":"admin_reset"}]}}`},
			want:     []string{""}, wantErr: []bool{true}, needs: feature.Needs{Edit: true, Max: MaxList, FailClosed: true}},
		{name: "a GET's stream is filtered whatever the id", request: "",
			messages: []string{`{"jsonrpc":"2.0","id":"x","result":{"tools":[{"name":"admin_reset"},{"name":"a"}]}}`},
			want:     []string{`{"jsonrpc":"2.0","id":"x","result":{"tools":[{"name":"a"}]}}`},
			needs:    feature.Needs{Edit: true, Max: MaxList, FailClosed: true}},
		{name: "a deprecated tool's success gets a warning", request: callOld,
			messages: []string{progress, `{"jsonrpc":"2.0","id":2,"result":{"content":[]}}`},
			want:     []string{"", "DEPRECATED"}, needs: feature.Needs{Edit: true, Max: MaxEditedResult}, outcome: "success"},
		{name: "a deprecated tool's failure gets none", request: callOld,
			messages: []string{`{"jsonrpc":"2.0","id":2,"result":{"content":[],"isError":true}}`},
			want:     []string{""}, needs: feature.Needs{Edit: true, Max: MaxEditedResult}, outcome: "is_error"},
		{name: "a JSON-RPC error is counted", request: callNew,
			messages: []string{`{"jsonrpc":"2.0","id":3,"error":{"code":-32603,"message":"x"}}`},
			want:     []string{""}, needs: feature.Needs{Edit: true, Max: MaxEditedResult}, outcome: "rpc_error"},
		{name: "a call cut at its deadline is a timeout", request: callNew,
			ending: feature.DeadlinePassed, needs: feature.Needs{Edit: true, Max: MaxEditedResult}, outcome: "timeout"},
		{name: "a call whose answer broke is unread", request: callNew,
			messages: []string{progress}, want: []string{""}, ending: feature.Broken,
			needs: feature.Needs{Edit: true, Max: MaxEditedResult}, outcome: "unread"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := testAnswers(t)
			x := featuretest.Get(t)
			if tt.request != "" {
				x = featuretest.Post(t, tt.request)
			}
			hook := a.Open(x)
			require.NotNil(t, hook)
			assert.Equal(t, tt.needs, hook.Needs())
			before := featuretest.Counted(t, toolCalls.WithLabelValues(tt.outcome))
			for i, msg := range tt.messages {
				out, err := hook.Message(x, []byte(msg))
				if len(tt.wantErr) > i && tt.wantErr[i] {
					assert.ErrorIs(t, err, ErrUnreadable)
					env := hook.Unreadable(x, err)
					assert.Equal(t, envelope.InternalError, env.Code)
					continue
				}
				require.NoError(t, err)
				switch want := tt.want[i]; {
				case want == "":
					assert.Nil(t, out, "message %d passes as it is", i)
				case want == "DEPRECATED":
					assert.Contains(t, string(out), `DEPRECATED`)
					assert.True(t, strings.HasPrefix(string(out), `{"jsonrpc":"2.0","id":2,"result":{"content":[{"type":"text","text":"<tool_error`), "%s", out)
				default:
					assert.Equal(t, want, string(out))
				}
			}
			hook.End(x, tt.ending)
			if tt.outcome != "" {
				assert.Equal(t, before+1, featuretest.Counted(t, toolCalls.WithLabelValues(tt.outcome)), "counted once as %s", tt.outcome)
			}
		})
	}
}

// The policy has no say in answers it does not edit: a batch, another
// method, a GET when it only hides nothing.
func TestThePolicyOpensNoHookWhereItHasNoSay(t *testing.T) {
	a := testAnswers(t)
	for _, body := range []string{
		`[{"jsonrpc":"2.0","id":1,"method":"tools/list"}]`,
		`{"jsonrpc":"2.0","id":1,"method":"resources/list"}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
	} {
		assert.Nil(t, a.Open(featuretest.Post(t, body)), body)
	}
	none, err := New(nil, nil, nil, nil)
	require.NoError(t, err)
	assert.Nil(t, (&Answers{Rules: none}).Open(featuretest.Get(t)), "a GET under rules that edit no list")
	assert.Nil(t, (&Answers{Rules: none}).Open(featuretest.Post(t, `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)))
}
