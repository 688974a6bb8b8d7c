package contract

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A lockfile of one server is written as before, byte for byte; one of a
// federated endpoint records each tool's server, and reads back.
func TestALockfileRecordsAToolsServerOnlyWhenItHasOne(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	single := &Lockfile{Version: Version, Server: "http://x/mcp", LockedAt: at, Tools: []Tool{tool("b", "B", `{ "type": "object" }`), tool("a", "", "")}}
	b, err := single.Marshal()
	require.NoError(t, err)
	assert.Equal(t, `{
  "caddy_mcp_lock": 1,
  "server": "http://x/mcp",
  "locked_at": "2026-01-02T03:04:05Z",
  "tools": [
    {
      "name": "a"
    },
    {
      "name": "b",
      "description": "B",
      "inputSchema": {
        "type": "object"
      }
    }
  ]
}
`, string(b))

	federated := &Lockfile{Version: Version, LockedAt: at, Tools: []Tool{{Name: "x", Server: "a"}, {Name: "b__x", Server: "b"}}}
	b, err = federated.Marshal()
	require.NoError(t, err)
	assert.Contains(t, string(b), `"name": "b__x",
      "server": "b"`)
	path := filepath.Join(t.TempDir(), "tools.lock.json")
	require.NoError(t, os.WriteFile(path, b, 0o600))
	l, err := Load(path)
	require.NoError(t, err)
	assert.Equal(t, []Tool{{Name: "b__x", Server: "b"}, {Name: "x", Server: "a"}}, l.Tools)
}
