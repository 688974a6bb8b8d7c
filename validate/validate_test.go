package validate

import (
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/caddymcp/caddy-mcp/envelope"
	"github.com/caddymcp/caddy-mcp/feature"
	"github.com/caddymcp/caddy-mcp/feature/featuretest"
	"github.com/caddymcp/caddy-mcp/internal/panics/panicstest"
	"github.com/caddymcp/caddy-mcp/toolschema"
)

func newFeature(t *testing.T, c Config) *Feature {
	t.Helper()
	c.Catalog, c.Logger = toolschema.NewCatalog(0), zap.NewNop()
	f := New(c)
	t.Cleanup(f.Stop)
	return f
}

const (
	listRequest = `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`
	listAnswer  = `{"jsonrpc":"2.0","id":1,"result":{"tools":[{"name":"echo","inputSchema":{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]}},{"name":"admin_reset","inputSchema":{"type":"object"}}]}}`
)

// learn feeds the answer to a tools/list to the feature's hook, as the
// core does.
func learn(t *testing.T, f *Feature, answer string) {
	t.Helper()
	x := featuretest.Post(t, listRequest)
	hook := f.Open(x)
	require.Equal(t, feature.Needs{Max: MaxList}, hook.Needs(), "it watches, never edits")
	out, err := hook.Message(x, []byte(answer))
	require.NoError(t, err)
	assert.Nil(t, out)
	hook.End(x, feature.Complete)
}

// The hook learns a tools/list answer's tools for the caller, and forgets
// them when a stream says they changed; the check then refuses what the
// list says is wrong, in words, and lets the rest pass.
func TestValidateLearnsToolsAndChecksCalls(t *testing.T) {
	call := func(args string) string {
		return `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo","arguments":` + args + `}}`
	}
	tests := []struct {
		name     string
		config   Config
		learned  bool
		request  string
		wantCode envelope.Code // "" when the call passes
		wantBody string        // part of the whole answer, when it is one
	}{
		{"valid arguments pass", Config{CheckArguments: true}, true, call(`{"text":"hi"}`), "", ""},
		{"arguments that break the schema are refused with the fields", Config{CheckArguments: true}, true, call(`{"text":5}`),
			envelope.ValidationError, `<validation_error`},
		{"a tool the list lacks is unknown, with the nearest names", Config{CheckArguments: true}, true,
			`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"ecko","arguments":{}}}`, envelope.UnknownAction, ""},
		{"arguments read two ways are refused", Config{CheckArguments: true}, true, call(`{"text":"hi","Text":5}`),
			envelope.ValidationError, `Field 'Text' is given twice, or again in another letter case`},
		{"nothing learned: the call passes unchecked", Config{CheckArguments: true}, false, call(`{"text":5}`), "", ""},
		{"only absent tools refused: arguments are not checked", Config{RefuseAbsent: true}, true, call(`{"text":5}`), "", ""},
		{"a batch's arguments are not checked", Config{CheckArguments: true}, true, "[" + call(`{"text":5}`) + "]", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFeature(t, tt.config)
			if tt.learned {
				learn(t, f, listAnswer)
			}
			ref := f.Check(featuretest.Post(t, tt.request))
			if tt.wantCode == "" {
				assert.Nil(t, ref)
				return
			}
			require.NotNil(t, ref)
			assert.Equal(t, tt.wantCode, ref.Envelope.Code)
			if tt.wantBody != "" {
				assert.Contains(t, string(ref.Body), tt.wantBody)
				assert.True(t, strings.HasPrefix(string(ref.Body), `{"jsonrpc":"2.0","id":7,"result":{"content":[`), "%s", ref.Body)
			}
		})
	}
}

// A tool the policy hides is never suggested, and a notification that the
// tools changed makes the list unknown again: calls pass unchecked until
// it is listed anew.
func TestValidateSuggestsOnlyAllowedToolsAndForgetsChangedLists(t *testing.T) {
	f := newFeature(t, Config{CheckArguments: true, Allowed: func(tool string) bool { return !strings.HasPrefix(tool, "admin_") }})
	learn(t, f, listAnswer)
	x := featuretest.Post(t, `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"admin_rese","arguments":{}}}`)
	ref := f.Check(x)
	require.NotNil(t, ref)
	assert.Equal(t, envelope.UnknownAction, ref.Envelope.Code)
	assert.NotContains(t, ref.Envelope.Text(), "admin_reset", "a hidden tool is never named")

	stream := featuretest.Post(t, `{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"echo","arguments":{"text":"x"}}}`)
	hook := f.Open(stream)
	assert.Equal(t, feature.Needs{}, hook.Needs(), "reads only a stream's events")
	_, err := hook.Message(stream, []byte(`{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}`))
	require.NoError(t, err)
	hook.End(stream, feature.Complete)
	assert.Nil(t, f.Check(x), "the list is forgotten: the call passes unchecked")
}

// A list the gateway cannot read with certainty teaches nothing: a result
// given twice, a cursor under another letter case, tools or a tool's name
// given twice or in another letter case.
func TestValidateLearnsNothingFromWhatItCannotReadWithCertainty(t *testing.T) {
	for name, tt := range map[string]struct{ request, answer string }{
		"a result given twice":      {listRequest, `{"jsonrpc":"2.0","id":1,"result":{"tools":[]},"result":` + listAnswer[strings.Index(listAnswer, `{"tools"`):]},
		"another id":                {listRequest, strings.Replace(listAnswer, `"id":1`, `"id":2`, 1)},
		"a Cursor":                  {`{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"Cursor":"x"}}`, listAnswer},
		"a cursor given twice":      {`{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"cursor":null,"cursor":"x"}}`, listAnswer},
		"tools in another case":     {listRequest, strings.Replace(listAnswer, `{"tools":[`, `{"Tools":[],"tools":[`, 1)},
		"a tool's name given twice": {listRequest, strings.Replace(listAnswer, `{"name":"echo",`, `{"name":"nope","name":"echo",`, 1)},
	} {
		t.Run(name, func(t *testing.T) {
			f := newFeature(t, Config{CheckArguments: true})
			x := featuretest.Post(t, tt.request)
			hook := f.Open(x)
			_, err := hook.Message(x, []byte(tt.answer))
			require.NoError(t, err)
			assert.Nil(t, f.Check(featuretest.Post(t, `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"nope","arguments":{}}}`)), "nothing learned: an unknown name passes")
		})
	}
}

// The count of calls passed unchecked is written on the log sampler's
// timer, a goroutine of its own: a log that panics there costs the line,
// and the sampler goes on.
func TestALogThatPanicsOnTheSamplersTimerCostsTheLineOnly(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		log, logger := panicstest.New("more calls' arguments")
		f := New(Config{Catalog: toolschema.NewCatalog(0), Logger: logger})
		defer f.Stop()
		for range 2 {
			for range 3 {
				f.logOverBudget("big", 1<<20)
			}
			// Off the sampler's ticks: its windows are over, and the next
			// call is logged at once.
			time.Sleep(2*overBudgetEvery + overBudgetEvery/2)
			synctest.Wait()
		}
		const checking = "checking a call's arguments would cost more than their budget: the call passes unchecked"
		assert.Equal(t, []string{checking, "recovered a panic", checking, "recovered more panics"}, log.Lines(),
			"the first call of each minute logged; the panic of each count recovered and told")
	})
}

// A tool whose inputSchema is read two ways is not learned: its calls pass
// unchecked, and the other tools of its list are checked.
func TestValidateLeavesASchemaReadTwoWaysUnchecked(t *testing.T) {
	f := newFeature(t, Config{CheckArguments: true})
	learn(t, f, strings.Replace(listAnswer, `"properties":{"text":{"type":"string"}}`, `"properties":{"text":{"type":"string","Type":"integer"}}`, 1))
	assert.Nil(t, f.Check(featuretest.Post(t, `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo","arguments":{"text":5}}}`)), "unchecked")
	ref := f.Check(featuretest.Post(t, `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"ecko","arguments":{}}}`))
	require.NotNil(t, ref, "the list is learned")
	assert.Equal(t, envelope.UnknownAction, ref.Envelope.Code)
}
