package redisstore

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// On a single Redis, keys go in runs of maxScriptKeys, each run holding its
// keys' four arguments after the op; on a cluster, one run a key.
func TestScriptRuns(t *testing.T) {
	keys := make([]string, maxScriptKeys+2)
	args := make([]string, 0, 4*len(keys))
	for i := range keys {
		keys[i] = string(rune('a' + i%26))
		args = append(args, "1", "10", "1", "60000000000")
	}
	runs := scriptRuns("take", keys, args, true)
	if assert.Len(t, runs, 2) {
		assert.Len(t, runs[0].keys, maxScriptKeys)
		assert.Len(t, runs[0].argv, 1+4*maxScriptKeys)
		assert.Equal(t, "take", runs[0].argv[0])
		assert.Len(t, runs[1].keys, 2)
		assert.Equal(t, []string{"take", "1", "10", "1", "60000000000", "1", "10", "1", "60000000000"}, runs[1].argv)
	}
	assert.Len(t, scriptRuns("refund", keys[:3], args[:12], false), 3, "a cluster: a run a key")
	assert.Len(t, scriptRuns("take", keys[:1], args[:4], true), 1)
}
