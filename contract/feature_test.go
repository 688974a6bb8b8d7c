package contract

import (
	"context"
	"encoding/hex"
	"os"
	"path/filepath"
	"testing"

	"github.com/caddyserver/caddy/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/caddymcp/caddy-mcp/feature/featuretest"
)

// writeLockfile writes a lockfile of one tool, and returns its path and the
// key of its lists.
func writeLockfile(t *testing.T) (path, key string) {
	t.Helper()
	path = filepath.Join(t.TempDir(), "mcp.lock.json")
	raw, err := (&Lockfile{Version: Version, Server: "http://pools.test/mcp", Tools: []Tool{{Name: "pools_test_tool"}}}).Marshal()
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(path, raw, 0o600))
	l, err := Load(path)
	require.NoError(t, err)
	digest, err := l.Digest()
	require.NoError(t, err)
	return path, hex.EncodeToString(digest[:])
}

// The lists compared with a lockfile are kept while a config uses it, and
// let go with the last that does.
func TestTheListsAreLetGoWithTheLastConfigThatUsesThem(t *testing.T) {
	lockfile, key := writeLockfile(t)
	references := func() int {
		n, _ := contractLists.References(key)
		return n
	}
	var features []*Feature
	var cancels []context.CancelFunc
	for range 2 { // an old config and the new one, during a reload
		ctx, cancel := caddy.NewContext(caddy.Context{Context: context.Background()})
		cancels = append(cancels, cancel)
		f := &Feature{File: lockfile}
		require.NoError(t, f.Provision(ctx))
		host := &featuretest.Host{}
		t.Cleanup(host.Close)
		parts, err := f.Parts(host)
		require.NoError(t, err)
		assert.Nil(t, parts.Check, "on_breaking warn refuses nothing")
		assert.NotNil(t, parts.Annotator)
		features = append(features, f)
	}
	assert.Equal(t, 2, references())
	assert.Same(t, features[0].lists, features[1].lists, "a reload keeps what the lists learned")
	for i, f := range features {
		require.NoError(t, f.Cleanup())
		cancels[i]()
		assert.Equal(t, 1-i, references())
	}
	_, kept := contractLists.References(key)
	assert.False(t, kept, "the lockfile's entry is gone with the last config")
}
