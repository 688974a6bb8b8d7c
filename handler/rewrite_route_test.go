package handler

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/caddymcp/caddy-mcp/feature"
)

// A feature, built only here, that renames the tool "calc.add" to "add"
// on its way upstream, and one that answers tools/list itself, from a
// list it holds.
func init() {
	caddy.RegisterModule(renamer{})
	caddy.RegisterModule(cachedList{})
}

type renamer struct{}

func (renamer) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: feature.Namespace + ".test_renamer", New: func() caddy.Module { return renamer{} }}
}

func (r renamer) Parts(feature.Host) (feature.Parts, error) { return feature.Parts{Rewriter: r}, nil }

func (renamer) Rewrite(x *feature.Exchange, body []byte) []byte {
	if !bytes.Contains(body, []byte(`"name":"calc.add"`)) {
		return nil
	}
	return bytes.ReplaceAll(body, []byte(`"name":"calc.add"`), []byte(`"name":"add"`))
}

const cachedTools = `{"jsonrpc":"2.0","id":1,"result":{"tools":[{"name":"add","inputSchema":{"type":"object"}},{"name":"admin_reset","inputSchema":{"type":"object"}}]}}`

type cachedList struct{}

func (cachedList) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: feature.Namespace + ".test_cached_list", New: func() caddy.Module { return cachedList{} }}
}

func (c cachedList) Parts(feature.Host) (feature.Parts, error) {
	return feature.Parts{Answerer: c}, nil
}

func (cachedList) Answer(x *feature.Exchange) http.Handler {
	if m := x.Single(); m == nil || string(m.Method) != "tools/list" {
		return nil
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(cachedTools))
	})
}

// The upstream is sent the rewritten body, with its length; the features
// read the body as the client sent it, and a rewriter turns streaming off.
func TestARewriterRewritesTheBodyGoingUpstream(t *testing.T) {
	h := provision(t, &Handler{
		FeaturesRaw: guests(t, map[string]any{"feature": "test_renamer"}, map[string]any{"feature": "test_first"}),
	})
	assert.True(t, h.wholeBody, "no body streams past a rewriter")
	guestSteps()
	u := &upstream{}
	w := httptest.NewRecorder()
	call := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"calc.add","arguments":{"a":1}}}`
	require.NoError(t, h.ServeHTTP(w, post(call), u))
	assert.Equal(t, strings.Replace(call, "calc.add", "add", 1), string(u.body))
	assert.Equal(t, int64(len(u.body)), u.contentLength)
	assert.Equal(t, []string{"test_first checked", "test_first observed "}, guestSteps(), "the check read the call as sent")

	u = &upstream{}
	other := `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo"}}`
	require.NoError(t, h.ServeHTTP(httptest.NewRecorder(), post(other), u))
	assert.Equal(t, other, string(u.body), "left as it is")
}

// An answer in the upstream's place goes through the hooks as the
// upstream's would: the tool policy filters the list it answers.
func TestAnAnswerInTheUpstreamsPlaceIsReadByEveryHook(t *testing.T) {
	h := provision(t, &Handler{
		FeaturesRaw: guests(t, map[string]any{"feature": "test_cached_list"}, map[string]any{"feature": "tools", "deny": []string{"admin_*"}}),
	})
	u := &upstream{}
	w := httptest.NewRecorder()
	require.NoError(t, h.ServeHTTP(w, post(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`), u))
	assert.Zero(t, u.calls, "answered in the upstream's place")
	var list struct {
		Result struct {
			Tools []struct{ Name string } `json:"tools"`
		} `json:"result"`
	}
	require.NoError(t, json.Unmarshal(w.Body.Bytes(), &list), w.Body.String())
	require.Len(t, list.Result.Tools, 1)
	assert.Equal(t, "add", list.Result.Tools[0].Name)

	require.NoError(t, h.ServeHTTP(httptest.NewRecorder(), post(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"add"}}`), u))
	assert.Equal(t, 1, u.calls, "a call goes upstream")
}

// A rewritten request's mirror headers say what its body says.
func TestARewrittenRequestsMirrorHeadersFollowItsBody(t *testing.T) {
	h := provision(t, &Handler{FeaturesRaw: guests(t, map[string]any{"feature": "test_renamer"})})
	u := &upstream{}
	call := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"calc.add"}}`
	r := post(call, header("Mcp-Method", "tools/call"), header("Mcp-Name", "calc.add"), header("Mcp-Protocol-Version", "2026-07-28"))
	require.NoError(t, h.ServeHTTP(httptest.NewRecorder(), r, u))
	require.Equal(t, 1, u.calls)
	assert.Equal(t, "add", u.request.Header.Get("Mcp-Name"))
	assert.Equal(t, "tools/call", u.request.Header.Get("Mcp-Method"))
}
