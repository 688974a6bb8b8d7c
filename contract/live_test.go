package contract

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/caddymcp/caddy-mcp/envelope"
	"github.com/caddymcp/caddy-mcp/feature"
	"github.com/caddymcp/caddy-mcp/feature/featuretest"
	"github.com/caddymcp/caddy-mcp/toolschema"
	"github.com/caddymcp/caddy-mcp/validate"
)

// newTestContract is a contract approving one tool, echo, whose text may
// be at most 100 characters.
func newTestContract(t *testing.T) *Live {
	t.Helper()
	l := &Lockfile{Version: Version, Tools: []Tool{{Name: "echo",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"text":{"type":"string","maxLength":100}}}`)}}}
	b, err := l.Marshal()
	require.NoError(t, err)
	file := filepath.Join(t.TempDir(), "tools.lock.json")
	require.NoError(t, os.WriteFile(file, b, 0o644))
	loaded, err := Load(file)
	require.NoError(t, err)
	return NewLive(loaded, false, NewLists(), nil, zap.NewNop())
}

func listResult(maxLength int) []byte {
	return fmt.Appendf(nil, `{"tools":[{"name":"echo","inputSchema":{"type":"object","properties":{"text":{"type":"string","maxLength":%d}}}}]}`, maxLength)
}

// A caller's own list that matches the contract is what holds for its
// calls, even while another scope's list drifted.
func TestAMatchingPrivateListHidesNoPublicDrift(t *testing.T) {
	s := newTestContract(t)
	endpoint := "https example.com/mcp"
	public, private := toolschema.ListKey{Endpoint: endpoint}, toolschema.ListKey{Endpoint: endpoint, Scope: "alice"}
	s.learn(public, listResult(50), true)
	require.Len(t, s.deltas(public, "echo"), 1, "the public list drifted")
	assert.Len(t, s.deltas(private, "echo"), 1, "a scope with no list of its own reads the public one")

	s.learn(private, listResult(100), true)
	assert.Empty(t, s.deltas(private, "echo"), "alice's list matches the contract")
}

// A list longer than the gateway keeps is not compared: its tools beyond
// the bound would read as removed.
func TestAListTooLongIsNotCompared(t *testing.T) {
	s := newTestContract(t)
	key := toolschema.ListKey{Endpoint: "https example.com/mcp"}
	s.learn(key, listResult(50), true)
	require.Len(t, s.deltas(key, "echo"), 1)

	var page strings.Builder
	page.WriteString(`{"tools":[`)
	for i := range toolschema.MaxTools {
		fmt.Fprintf(&page, `{"name":"t%d","inputSchema":{"type":"object"}},`, i)
	}
	page.WriteString(`{"name":"echo","inputSchema":{"type":"object"}}]}`)
	s.learn(key, []byte(page.String()), true)
	assert.Empty(t, s.deltas(key, "echo"), "nothing told or refused for a list not compared")
}

// The contract's hook compares a tools/list answer with the lockfile as
// the core feeds it, without Caddy; its check then refuses calls to a tool
// that broke, under on_breaking refuse, and its awareness says what
// changed. A list it cannot read with certainty (a member under another
// letter case, which encoding/json would read) is not compared.
func TestTheContractComparesListsAndRefusesBrokenTools(t *testing.T) {
	const call = `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo","arguments":{}}}`
	tests := []struct {
		name    string
		result  string
		refused bool
	}{
		{"a list that tightens a bound breaks the tool", string(listResult(50)), true},
		{"a list that matches breaks nothing", string(listResult(100)), false},
		{"a list whose tools are given under another case is not read", strings.Replace(string(listResult(50)), `"tools"`, `"Tools"`, 1), false},
		{"a tool whose schema is given twice is not read", strings.Replace(string(listResult(50)), `"inputSchema"`, `"inputSchema":{},"inputSchema"`, 1), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tools := validate.New(validate.Config{Catalog: toolschema.NewCatalog(0), Logger: zap.NewNop()})
			t.Cleanup(tools.Stop)
			locked := newTestContract(t)
			s := NewLive(&Lockfile{Version: Version, Tools: locked.locked}, true, NewLists(), tools, zap.NewNop())

			list := featuretest.Post(t, `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)
			hook := s.Open(list)
			require.NotNil(t, hook)
			out, err := hook.Message(list, []byte(`{"jsonrpc":"2.0","id":1,"result":`+tt.result+`}`))
			require.NoError(t, err)
			assert.Nil(t, out, "the contract never edits an answer")
			hook.End(list, feature.Complete)

			x := featuretest.Post(t, call)
			ref := s.Check(x)
			if !tt.refused {
				assert.Nil(t, ref)
				assert.Empty(t, s.Annotate(x, "echo"))
				return
			}
			require.NotNil(t, ref)
			assert.Equal(t, envelope.Forbidden, ref.Envelope.Code)
			assert.Contains(t, s.Annotate(x, "echo"), "<contract_awareness")
			batch := featuretest.Post(t, "["+call+"]")
			require.NotNil(t, s.Check(batch))
			assert.Contains(t, s.Check(batch).Envelope.Message, "nothing in the batch ran")
		})
	}
}

// Reading a list with certainty before comparing it costs no memory that
// grows with the list: a server (or whoever stands in for it) that lists
// many tools costs the gateway the bytes it holds and one pass over them.
func TestReadingAListWithCertaintyAllocatesNothingPerTool(t *testing.T) {
	page := func(n int) []byte {
		var b strings.Builder
		b.WriteString(`{"tools":[`)
		for i := range n {
			if i > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, `{"name":"t%d","description":"d","inputSchema":{"type":"object","properties":{"a":{"type":"string"}}}}`, i)
		}
		b.WriteString(`],"nextCursor":"c"}`)
		return []byte(b.String())
	}
	small, large := page(10), page(toolschema.MaxTools)
	require.True(t, certain(large))
	assert.Equal(t, testing.AllocsPerRun(5, func() { certain(small) }), testing.AllocsPerRun(5, func() { certain(large) }),
		"allocations do not grow with the tools listed")
}
