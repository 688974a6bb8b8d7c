package tracing

import (
	"crypto/sha256"
	"encoding/hex"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A session id is the client's to choose: one that looks like a digest
// ("sha256:…", short or long) is digested like any other on the spans,
// never shown nor sliced as it is.
func TestASpanNamesTheDigestOfAnySessionID(t *testing.T) {
	for _, sid := range []string{"sha256:", "sha256:0123456789abcdef-the-rest-of-a-secret", "s1"} {
		s, rec := tracedWith(t, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x"}}`, map[string]string{"Mcp-Session-Id": sid})
		s.Finish(time.Now())
		ended := rec.Ended()
		require.Len(t, ended, 1, sid)
		sum := sha256.Sum256([]byte(sid))
		got := ""
		for _, a := range ended[0].Attributes() {
			if a.Key == "mcp.session.id" {
				got = a.Value.AsString()
			}
		}
		assert.Equal(t, "sha256:"+hex.EncodeToString(sum[:])[:16], got, sid)
	}
}
