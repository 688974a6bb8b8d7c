package oauth

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/caddymcp/caddy-mcp/feature"
	"github.com/caddymcp/caddy-mcp/feature/featuretest"
)

func listGate(t *testing.T) *Gate {
	cfg := &Config{
		Issuers:        []IssuerConfig{{URL: "https://issuer.example.com"}},
		ToolScopes:     []ScopeRule{{Match: "admin_*", Scopes: []string{"admin"}}, {Match: "write_*", Scopes: []string{"write"}}},
		PromptScopes:   []ScopeRule{{Match: "secret", Scopes: []string{"admin"}}},
		ResourceScopes: []ScopeRule{{Match: "file:///private/*", Scopes: []string{"admin"}}},
	}
	require.NoError(t, cfg.Validate())
	return New(cfg, resource, zap.NewNop(), nil)
}

// answer is what the gate's hook makes of the upstream's answer msg to the
// request body, for a caller granted scopes; msg itself when it passes as
// written.
func answer(t *testing.T, g *Gate, x *feature.Exchange, scopes []string, msg string) string {
	t.Helper()
	x.Principal = &feature.Principal{Subject: "alice", Scopes: scopes}
	h := g.Open(x)
	require.NotNil(t, h)
	assert.Equal(t, feature.Needs{Edit: true, Max: MaxList}, h.Needs(), "an unreadable list passes: the call's check enforces")
	out, err := h.Message(x, []byte(msg))
	require.NoError(t, err)
	if out == nil {
		return msg
	}
	return string(out)
}

func TestListsLeaveOutWhatTheTokenLacksTheScopeFor(t *testing.T) {
	g := listGate(t)
	const tools = `{"jsonrpc":"2.0","id":7,"result":{"tools":[{"name":"read"},{"name":"admin_drop","description":"x"},{"name":"write_file"}],"ttlMs":60000,"cacheScope":"public"}}`
	post := func(method string) *feature.Exchange {
		return featuretest.Post(t, `{"jsonrpc":"2.0","id":7,"method":"`+method+`"}`)
	}

	assert.Equal(t, `{"jsonrpc":"2.0","id":7,"result":{"tools":[{"name":"read"}],"ttlMs":60000,"cacheScope":"private"}}`,
		answer(t, g, post("tools/list"), nil, tools))
	assert.Equal(t, `{"jsonrpc":"2.0","id":7,"result":{"tools":[{"name":"read"},{"name":"write_file"}],"ttlMs":60000,"cacheScope":"private"}}`,
		answer(t, g, post("tools/list"), []string{"write"}, tools))
	assert.Equal(t, `{"jsonrpc":"2.0","id":7,"result":{"tools":[{"name":"read"},{"name":"admin_drop","description":"x"},{"name":"write_file"}],"ttlMs":60000,"cacheScope":"private"}}`,
		answer(t, g, post("tools/list"), []string{"admin", "write"}, tools),
		"nothing left out, but another token's list differs: private")

	assert.Equal(t, `{"jsonrpc":"2.0","id":7,"result":{"prompts":[{"name":"hello"}]}}`,
		answer(t, g, post("prompts/list"), nil, `{"jsonrpc":"2.0","id":7,"result":{"prompts":[{"name":"hello"},{"name":"secret"}]}}`))
	assert.Equal(t, `{"jsonrpc":"2.0","id":7,"result":{"resources":[{"uri":"file:///public/a","name":"private"}]}}`,
		answer(t, g, post("resources/list"), nil, `{"jsonrpc":"2.0","id":7,"result":{"resources":[{"uri":"file:///public/a","name":"private"},{"name":"b","uri":"file:///private/b"}]}}`),
		"resources are named by their uri")
}

func TestListsPassAsWrittenWhatTheScopesDoNotGovern(t *testing.T) {
	g := listGate(t)
	post := featuretest.Post(t, `{"jsonrpc":"2.0","id":7,"method":"tools/list"}`)
	for _, msg := range []string{
		`{"jsonrpc":"2.0","id":7,"result":{"tools":[{"name":"read"}],"cacheScope":"public"}}`,             // no rule names a scope for it
		`{"jsonrpc":"2.0","id":8,"result":{"tools":[{"name":"admin_drop"}]}}`,                             // not the answer owed
		`{"jsonrpc":"2.0","id":7,"error":{"code":-32603,"message":"admin_drop"}}`,                         // an error
		`{"jsonrpc":"2.0","id":7,"result":{"tools":[{"name":"admin_drop"}],"Tools":[]}}`,                  // unreadable with certainty
		`{"jsonrpc":"2.0","id":7,"result":{"tools":[{"name":"admin_drop","Name":"x"},{"name":1},"str"]}}`, // names unreadable: nothing to judge
	} {
		assert.Equal(t, msg, answer(t, g, post, nil, msg))
	}

	assert.Nil(t, g.Open(featuretest.Post(t, `{"jsonrpc":"2.0","id":7,"method":"tools/list"}`)), "no principal: nothing to edit for")
	x := featuretest.Post(t, `{"jsonrpc":"2.0","id":7,"method":"resources/templates/list"}`)
	x.Principal = &feature.Principal{}
	assert.Nil(t, g.Open(x), "templates name many URIs: not filtered")
	x = featuretest.Post(t, `[{"jsonrpc":"2.0","id":7,"method":"tools/list"}]`)
	x.Principal = &feature.Principal{}
	assert.Nil(t, g.Open(x), "a batch: what each answer answers is not known")
}

func TestAResumedStreamHasItsListsEditedWhereverFound(t *testing.T) {
	g := listGate(t)
	before := featuretest.Counted(t, hidden.WithLabelValues("prompts"))
	got := answer(t, g, featuretest.Get(t), nil, `{"jsonrpc":"2.0","id":3,"result":{"prompts":[{"name":"secret"}],"tools":[{"name":"admin_x"},{"name":"ok"}]}}`)
	assert.Equal(t, `{"jsonrpc":"2.0","id":3,"result":{"prompts":[],"tools":[{"name":"ok"}]}}`, got)
	assert.Equal(t, before+1, featuretest.Counted(t, hidden.WithLabelValues("prompts")))
}

func TestAListInABatchIsRefusedAndAnAmbiguousCacheScopeKeepsTheFilter(t *testing.T) {
	g := listGate(t)
	x := featuretest.Post(t, `[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","id":2,"method":"tools/list"}]`)
	x.Principal = &feature.Principal{Subject: "alice"}
	ref := g.Check(x)
	require.NotNil(t, ref, "its answer would not be edited")
	assert.Contains(t, ref.Envelope.Message, "tools/list")
	x = featuretest.Post(t, `[{"jsonrpc":"2.0","id":1,"method":"resources/templates/list"}]`)
	x.Principal = &feature.Principal{Subject: "alice"}
	assert.Nil(t, g.Check(x), "templates are not edited")

	x = featuretest.Post(t, `{"jsonrpc":"2.0","id":7,"method":"tools/list"}`)
	assert.Equal(t, `{"jsonrpc":"2.0","id":7,"result":{"tools":[{"name":"read"}],"cacheScope":"public","CacheScope":"public"}}`,
		answer(t, g, x, nil, `{"jsonrpc":"2.0","id":7,"result":{"tools":[{"name":"read"},{"name":"admin_drop"}],"cacheScope":"public","CacheScope":"public"}}`))
}
