package results

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/caddymcp/caddy-mcp/resultstore"
)

// A session id is the client's to choose: one that looks like a digest
// ("sha256:…", short or long) is digested like any other in the audit
// log, never shown nor sliced as it is.
func TestAReadLogsTheDigestOfAnySessionID(t *testing.T) {
	b, _, _ := pager(t, 4096, resultstore.Limits{})
	core, logs := observer.New(zap.InfoLevel)
	b.logger = zap.New(core)
	for _, sid := range []string{"sha256:", "sha256:0123456789abcdef-the-rest-of-a-secret", "s1"} {
		body := string(read(t, b, URIPrefix+exampleID, sid))
		assert.Contains(t, body, "NOT_FOUND", sid)
		entries := logs.TakeAll()
		require.Len(t, entries, 1, sid)
		sum := sha256.Sum256([]byte(sid))
		want := "sha256:" + hex.EncodeToString(sum[:])[:16]
		assert.Equal(t, want, entries[0].ContextMap()["session"], sid)
		for _, f := range entries[0].Context {
			assert.False(t, strings.Contains(f.String, "0123456789abcdef"), "%s holds the session's id", f.Key)
		}
	}
}
