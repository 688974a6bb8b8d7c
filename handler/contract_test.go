package handler

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/caddymcp/caddy-mcp/contract"
	"github.com/caddymcp/caddy-mcp/toolschema"
)

// uniqueEndpoint is an endpoint no other test, nor another run of this one
// (go test -count), has listed tools for: the lists compared with a
// lockfile are the process's.
func uniqueEndpoint(t *testing.T) string {
	return fmt.Sprintf("test-%s-%d", t.Name(), endpoints.Add(1))
}

var endpoints atomic.Int64

// newTestContract is a contract approving one tool, echo, whose text may
// be at most 100 characters.
func newTestContract(t *testing.T) *contractState {
	t.Helper()
	l := &contract.Lockfile{Version: contract.Version, Tools: []contract.Tool{{Name: "echo",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"text":{"type":"string","maxLength":100}}}`)}}}
	b, err := l.Marshal()
	require.NoError(t, err)
	file := filepath.Join(t.TempDir(), "tools.lock.json")
	require.NoError(t, os.WriteFile(file, b, 0o644))
	s, err := newContractState(&Contract{File: file}, zap.NewNop())
	require.NoError(t, err)
	return s
}

func listResult(maxLength int) []byte {
	return fmt.Appendf(nil, `{"tools":[{"name":"echo","inputSchema":{"type":"object","properties":{"text":{"type":"string","maxLength":%d}}}}]}`, maxLength)
}

// A caller's own list that matches the contract is what holds for its
// calls, even while another scope's list drifted.
func TestAMatchingPrivateListHidesNoPublicDrift(t *testing.T) {
	s := newTestContract(t)
	endpoint := uniqueEndpoint(t)
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
	key := toolschema.ListKey{Endpoint: uniqueEndpoint(t)}
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
