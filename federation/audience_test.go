package federation

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/caddymcp/caddy-mcp/feature"
	"github.com/caddymcp/caddy-mcp/session"
)

// A session id of one federated site does not open at another that shares
// its keys (the default keys, kept in one storage): each names its site.
func TestASessionIDOpensOnlyAtTheSiteThatSealedIt(t *testing.T) {
	ring, err := session.FromSecrets([]string{"a secret both sites share, 32 b"})
	require.NoError(t, err)
	site := func(origin string) *federation {
		f := testFederation(testServer("s", nil, nil))
		f.ring, f.ttl, f.audience = func() *session.Keyring { return ring }, time.Hour, tokenUpstream+" "+origin
		return f
	}
	a, b := site("https://a.example"), site("https://b.example")
	x := &feature.Exchange{Request: httptest.NewRequest(http.MethodPost, "/mcp", strings.NewReader("{}")), Start: a.now()}
	token, err := a.seal(x, sessionIDs{"s": "its-own"}, nil, []byte(`{}`))
	require.NoError(t, err)

	x.Request.Header.Set("Mcp-Session-Id", token)
	o, err := a.open(x)
	require.NoError(t, err)
	assert.Equal(t, "its-own", o.ids["s"])
	_, err = b.open(x)
	assert.ErrorIs(t, err, session.ErrMalformed, "another site's session id is none of this one's")
}
