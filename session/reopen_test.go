package session

import (
	"net/http"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestATokenCarriesTheParamsOfOneInitializeRequestOnly(t *testing.T) {
	long := `{"clientInfo":{"name":"` + strings.Repeat("n", maxInit) + `"}}`
	spaced := `{"capabilities": {},` + strings.Repeat(" ", maxInit) + `"clientInfo": {"name": "a"}}`
	tests := []struct {
		name string
		body string
		// want is the params carried, nil: none.
		want []byte
	}{
		{"an initialize", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":` + clientInit + `}`, []byte(clientInit)},
		{"an initialize written with whitespace, compacted", "{\"jsonrpc\": \"2.0\", \"params\": {\n  \"capabilities\": { },\n  \"clientInfo\": {\"name\": \"a b\"}\n}, \"id\": 1, \"method\": \"initialize\"}",
			[]byte(`{"capabilities":{},"clientInfo":{"name":"a b"}}`)},
		{"params under an escaped key", `{"jsonrpc":"2.0","id":1,"method":"initialize","par\u0061ms":{"a":1}}`, []byte(`{"a":1}`)},
		{"spaced params that fit once compacted", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":` + spaced + `}`,
			[]byte(`{"capabilities":{},"clientInfo":{"name":"a"}}`)},
		{"params over the bound", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":` + long + `}`, nil},
		{"params read past what is compacted", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"a":1` + strings.Repeat(" ", maxInitRead) + `}}`, nil},
		{"an initialize in a batch", `[{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"a":1}}]`, nil},
		{"params that are an array", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":[1]}`, nil},
		{"params that are null", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":null}`, nil},
		{"no params", `{"jsonrpc":"2.0","id":1,"method":"initialize"}`, nil},
		{"an initialize notification", `{"jsonrpc":"2.0","method":"initialize","params":{"a":1}}`, nil},
		{"another request", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a"}}`, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := testPins(t, "")
			x := exchange(t, tt.body, nil)
			selected := "10.0.0.7:8080"
			caddyhttp.SetVar(x.Request.Context(), SelectedVar, &selected)
			hdr := http.Header{"Mcp-Session-Id": {"upstream-own-id"}}
			hooked(t, p, x).Header(x, http.StatusOK, hdr)
			s, err := p.ring().Open(hdr.Get("Mcp-Session-Id"), x.Start, p.ttl, nil)
			require.NoError(t, err, "a session is opened whatever its initialize carried")
			assert.Equal(t, "upstream-own-id", s.ID)
			assert.Equal(t, tt.want, s.Params)
		})
	}
}

func TestParamsThatLeaveNoRoomForTheSessionIdAreNotCarried(t *testing.T) {
	p := testPins(t, "")
	x := exchange(t, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":`+clientInit+`}`, nil)
	id := strings.Repeat("i", 6000)
	hdr := http.Header{"Mcp-Session-Id": {id}}
	hooked(t, p, x).Header(x, http.StatusOK, hdr)
	token := hdr.Get("Mcp-Session-Id")
	require.NotEmpty(t, token, "the session is opened")
	s, err := p.ring().Open(token, x.Start, p.ttl, nil)
	require.NoError(t, err)
	assert.Equal(t, id, s.ID)
	assert.Nil(t, s.Params, "it will not be reopened")
}
