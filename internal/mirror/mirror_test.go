package mirror

import (
	"encoding/base64"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/caddymcp/caddy-mcp/feature"
	"github.com/caddymcp/caddy-mcp/internal/jsonrpc"
)

func b64(s string) string { return "=?base64?" + base64.StdEncoding.EncodeToString([]byte(s)) + "?=" }

// The check reads only the headers, the messages and the era it is given;
// the handler's tests send the same requests through the gateway.
func TestCheck(t *testing.T) {
	const call = `{"jsonrpc":"2.0","id":"c-1","method":"tools/call","params":{"name":"résumé"}}`
	tests := []struct {
		name, body, method, mirror string
		era                        feature.Era
		// refused: the mismatch's words contain it; "" passes.
		refused, id string
	}{
		{name: "agreeing, in base64", body: call, method: "tools/call", mirror: b64("résumé"), era: feature.StatelessEra},
		{name: "no headers in the session era", body: call, era: feature.SessionEra},
		{name: "a response mirrors nothing", body: `{"jsonrpc":"2.0","id":1,"result":{}}`, era: feature.StatelessEra},
		{name: "a batch without headers", body: "[" + call + "]", era: feature.StatelessEra},
		{name: "another method", body: call, method: "tools/list", era: feature.SessionEra,
			refused: `the Mcp-Method header says "tools/list" but the body's method is "tools/call"`, id: `"c-1"`},
		{name: "a missing name", body: call, method: "tools/call", era: feature.StatelessEra,
			refused: "the Mcp-Name header is missing; MCP 2026-07-28 requires it on tools/call, equal to the body's params.name", id: `"c-1"`},
		{name: "a batch with headers", body: "[" + call + "]", method: "tools/call", era: feature.SessionEra,
			refused: "a batch cannot carry Mcp-Method or Mcp-Name headers", id: `null`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			msgs, batch, err := jsonrpc.Parse([]byte(tt.body), nil, 16)
			require.NoError(t, err)
			h := http.Header{}
			for name, v := range map[string]string{"Mcp-Method": tt.method, "Mcp-Name": tt.mirror} {
				if v != "" {
					h.Set(name, v)
				}
			}
			err = Check(h, msgs, batch, tt.era)
			if tt.refused == "" {
				assert.NoError(t, err)
				return
			}
			var e *Mismatch
			require.ErrorAs(t, err, &e)
			assert.Contains(t, e.Msg, tt.refused)
			assert.Equal(t, tt.id, string(e.ID))
		})
	}
}

func TestDecode(t *testing.T) {
	for in, want := range map[string]string{
		"plain": "plain", "": "", "=?base64?": "=?base64?", "=?base64?=": "=?base64?=", "=?base64??=": "",
		b64("Hello, 世界"): "Hello, 世界", b64(" padded "): " padded ", "=?base64?YQ?=": "",
	} {
		got, ok := decode(in)
		if in == "=?base64?YQ?=" {
			assert.False(t, ok, "unpadded base64 is not what clients send")
			continue
		}
		require.True(t, ok, in)
		assert.Equal(t, want, got, in)
	}
	_, ok := decode("=?base64?" + strings.Repeat("*", 10) + "?=")
	assert.False(t, ok)
}

// A value is written in a mirror header so that it reads back as itself.
func TestAMirroredValueReadsBackAsItself(t *testing.T) {
	for _, v := range []string{"add", "calc add", " lead", "trail ", "naïve", "tab\tbed", "=?base64?YQ==?=", "日本"} {
		said, ok := decode(Encode([]byte(v)))
		assert.True(t, ok, v)
		assert.Equal(t, v, said, v)
	}
	assert.Equal(t, "add", Encode([]byte("add")))
}
