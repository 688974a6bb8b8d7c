package federation

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/caddymcp/caddy-mcp/envelope"
	"github.com/caddymcp/caddy-mcp/feature"
	"github.com/caddymcp/caddy-mcp/internal/jsonrpc"
)

// discovering is a server that answers server/discover with versions and
// capabilities.
func discovering(versions, capabilities string) *server {
	return testServer("", answering(func(w http.ResponseWriter, _ *http.Request, req asked) error {
		return writeRPC(w, req.ID, `{"supportedVersions":`+versions+`,"capabilities":`+capabilities+`,"serverInfo":{"name":"s","version":"1"}}`)
	}), nil)
}

func discover(t *testing.T, f *federation) []byte {
	t.Helper()
	body := []byte(`{"jsonrpc":"2.0","id":1,"method":"server/discover"}`)
	msgs, _, err := jsonrpc.Parse(body, nil, 1)
	require.NoError(t, err)
	r := httptest.NewRequest(http.MethodPost, "/mcp", strings.NewReader(string(body)))
	x := &feature.Exchange{Request: r, Messages: msgs, Body: body}
	w := httptest.NewRecorder()
	f.discoverAll(w, r, x)
	return w.Body.Bytes()
}

// server/discover answers the versions every server supports, and their
// capabilities merged; servers that share none are refused in words.
func TestDiscoverMergesTheServersAndRefusesThoseThatShareNoVersion(t *testing.T) {
	a := discovering(`["2026-07-28","2025-11-25"]`, `{"tools":{"listChanged":true}}`)
	b := discovering(`["2026-07-28"]`, `{"prompts":{}}`)
	a.name, b.name = "a", "b"
	var got struct {
		Result struct {
			SupportedVersions []string                   `json:"supportedVersions"`
			Capabilities      map[string]json.RawMessage `json:"capabilities"`
			ServerInfo        struct{ Name string }      `json:"serverInfo"`
		} `json:"result"`
	}
	require.NoError(t, json.Unmarshal(discover(t, testFederation(a, b)), &got))
	assert.Equal(t, []string{"2026-07-28"}, got.Result.SupportedVersions)
	assert.JSONEq(t, `{"listChanged":true}`, string(got.Result.Capabilities["tools"]))
	assert.Contains(t, got.Result.Capabilities, "prompts")
	assert.Equal(t, "caddy-mcp", got.Result.ServerInfo.Name)

	old := discovering(`["2025-11-25"]`, `{}`)
	old.name = "old"
	a = discovering(`["2026-07-28"]`, `{}`)
	a.name = "a"
	answer := discover(t, testFederation(a, old))
	var rpc struct {
		Error struct {
			Data struct{ Envelope string } `json:"data"`
		} `json:"error"`
	}
	require.NoError(t, json.Unmarshal(answer, &rpc))
	p, err := envelope.Parse(rpc.Error.Data.Envelope)
	require.NoError(t, err, "%s", answer)
	assert.Equal(t, envelope.InternalError, p.Code)
	assert.Contains(t, p.Message, "share no protocol version")
}

// A server of the older era refuses server/discover: no version serves
// every server, and the client falls back to initialize. When every
// server refuses it, the client gets their words.
func TestDiscoverWithAServerOfTheOlderEra(t *testing.T) {
	refusing := func(name string) *server {
		return testServer(name, answering(func(w http.ResponseWriter, _ *http.Request, req asked) error {
			w.Header().Set("Content-Type", "application/json")
			_, err := w.Write([]byte(`{"jsonrpc":"2.0","id":` + string(req.ID) + `,"error":{"code":-32601,"message":"Method not found"}}`))
			return err
		}), nil)
	}
	modern := discovering(`["2026-07-28"]`, `{}`)
	modern.name = "modern"
	answer := discover(t, testFederation(modern, refusing("old")))
	assert.Contains(t, string(answer), "share no protocol version")

	answer = discover(t, testFederation(refusing("a"), refusing("b")))
	assert.JSONEq(t, `{"jsonrpc":"2.0","id":1,"error":{"code":-32601,"message":"Method not found"}}`, string(answer))
}
