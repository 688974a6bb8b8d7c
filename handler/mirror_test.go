package handler

import (
	"encoding/base64"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/caddymcp/caddy-mcp/internal/mirror"
)

func b64(s string) string { return "=?base64?" + base64.StdEncoding.EncodeToString([]byte(s)) + "?=" }

func TestMirrorHeadersMustAgreeWithTheBody(t *testing.T) {
	const (
		call     = `{"jsonrpc":"2.0","id":"c-1","method":"tools/call","params":{"name":"résumé","arguments":{"q":"x"}}}`
		spaced   = `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"my tool"}}`
		prompt   = `{"jsonrpc":"2.0","id":3,"method":"prompts/get","params":{"name":"caf\u00e9 menu"}}`
		read     = `{"jsonrpc":"2.0","id":4,"method":"resources/read","params":{"uri":"file:///etc/passwd","name":"ignored"}}`
		task     = `{"jsonrpc":"2.0","id":5,"method":"tasks/cancel","params":{"taskId":"t-9"}}`
		list     = `{"jsonrpc":"2.0","id":6,"method":"tools/list"}`
		note     = `{"jsonrpc":"2.0","method":"notifications/initialized"}`
		sentinel = `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"=?base64?x?="}}`
		noName   = `{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"arguments":{}}}`
	)
	const v2026, v2025 = "2026-07-28", "2025-11-25"
	tests := []struct {
		name, version, body, method, mirror string
		// refused: the answer's message contains it; "" passes.
		refused string
		id      string
	}{
		// What the official clients send.
		{name: "plain name", version: v2026, body: spaced, method: "tools/call", mirror: "my tool"},
		{name: "base64 name", version: v2026, body: call, method: "tools/call", mirror: b64("résumé")},
		{name: "raw UTF-8 name, as sent", version: v2026, body: call, method: "tools/call", mirror: "résumé"},
		{name: "prompt, escaped in the body", version: v2026, body: prompt, method: "prompts/get", mirror: b64("café menu")},
		{name: "resource uri", version: v2026, body: read, method: "resources/read", mirror: "file:///etc/passwd"},
		{name: "task id", version: v2026, body: task, method: "tasks/cancel", mirror: "t-9"},
		{name: "task id may be left out", version: v2026, body: task, method: "tasks/cancel"},
		{name: "a literal marked name sent in base64", version: v2026, body: sentinel, method: "tools/call", mirror: b64("=?base64?x?=")},
		{name: "no name to mirror", version: v2026, body: list, method: "tools/list"},
		{name: "notification", version: v2026, body: note, method: "notifications/initialized"},
		{name: "older era without headers", version: v2025, body: call},
		{name: "no version without headers", body: read},
		{name: "markers in another case are a plain value", version: v2026, body: `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"=?BASE64?eA==?="}}`, method: "tools/call", mirror: "=?BASE64?eA==?="},

		// Disagreements, in every era.
		{name: "method", version: v2026, body: call, method: "tools/list", mirror: b64("résumé"), refused: `Mcp-Method header says "tools/list" but the body's method is "tools/call"`, id: `"c-1"`},
		{name: "plain name", version: v2026, body: spaced, method: "tools/call", mirror: "my_tool", refused: `Mcp-Name header says "my_tool" but the body's params.name is "my tool"`, id: `2`},
		{name: "base64 name", version: v2026, body: call, method: "tools/call", mirror: b64("resume"), refused: `says "resume" but the body's params.name is "résumé"`, id: `"c-1"`},
		{name: "undecoded base64 is not the name", version: v2026, body: sentinel, method: "tools/call", mirror: "=?base64?x?=", refused: "not valid base64", id: `7`},
		{name: "bad base64", version: v2026, body: call, method: "tools/call", mirror: "=?base64?***?=", refused: "not valid base64", id: `"c-1"`},
		{name: "prompt", version: v2026, body: prompt, method: "prompts/get", mirror: b64("cafe menu"), refused: "params.name is \"café menu\"", id: `3`},
		{name: "resource uri", version: v2026, body: read, method: "resources/read", mirror: "file:///other", refused: `says "file:///other" but the body's params.uri is "file:///etc/passwd"`, id: `4`},
		{name: "resource uri matched against params.name", version: v2026, body: read, method: "resources/read", mirror: "ignored", refused: "params.uri", id: `4`},
		{name: "resource uri in base64", version: v2026, body: read, method: "resources/read", mirror: b64("file:///other"), refused: "params.uri", id: `4`},
		{name: "task id", version: v2026, body: task, method: "tasks/cancel", mirror: "t-1", refused: `params.taskId is "t-9"`, id: `5`},
		{name: "task id in base64", version: v2026, body: task, method: "tasks/cancel", mirror: b64("t-1"), refused: `params.taskId is "t-9"`, id: `5`},
		{name: "name where nothing is named", version: v2026, body: list, method: "tools/list", mirror: "search", refused: "names nothing", id: `6`},
		{name: "name absent from the body", version: v2026, body: noName, method: "tools/call", mirror: "search", refused: "the body has no params.name", id: `8`},
		{name: "older era: method", version: v2025, body: call, method: "tools/list", refused: "Mcp-Method header says", id: `"c-1"`},
		{name: "no version: name", body: read, mirror: "file:///other", refused: "params.uri", id: `4`},
		{name: "batch", version: v2025, body: "[" + call + "]", method: "tools/call", refused: "a batch cannot carry", id: `null`},

		// What the stateless era requires.
		{name: "missing method", version: v2026, body: list, refused: "Mcp-Method header is missing", id: `6`},
		{name: "missing method on a notification", version: v2026, body: note, refused: "Mcp-Method header is missing"},
		{name: "missing name", version: v2026, body: call, method: "tools/call", refused: "Mcp-Name header is missing", id: `"c-1"`},
		{name: "missing uri", version: "2026-12-01", body: read, method: "resources/read", refused: "equal to the body's params.uri", id: `4`},
		{name: "a version that is not a date requires nothing", version: "2026-07-28x", body: call},
	}
	for _, tt := range tests {
		verdict := "passes"
		if tt.refused != "" {
			verdict = "refused"
		}
		t.Run(verdict+"/"+tt.name, func(t *testing.T) {
			h := provision(t, &Handler{})
			u := &upstream{}
			var opts []func(*http.Request)
			for name, v := range map[string]string{"Mcp-Protocol-Version": tt.version, "Mcp-Method": tt.method, "Mcp-Name": tt.mirror} {
				if v != "" {
					opts = append(opts, header(name, v))
				}
			}
			w := serve(t, h, post(tt.body, opts...), u)
			if tt.refused == "" {
				requireForwarded(t, u, 1, w)
				return
			}
			assert.Equal(t, 0, u.calls)
			assert.Equal(t, http.StatusBadRequest, w.Code)
			m := members(t, w.Body.Bytes())
			if tt.id == "" {
				assert.NotContains(t, m, "id", "a notification's answer has no id")
			} else {
				assert.Equal(t, tt.id, string(m["id"]))
			}
			e := decodeRPCError(t, m["error"])
			assert.Equal(t, mirror.Code, e.Code)
			assert.Equal(t, "VALIDATION_ERROR", e.Data.Code)
			assert.Contains(t, e.Message, "Request headers disagree with its body: ")
			assert.Contains(t, e.Message, tt.refused)
		})
	}
}

func TestMirrorHeadersGivenTwiceAreRefusedUnread(t *testing.T) {
	for _, name := range []string{"Mcp-Method", "Mcp-Name", "Mcp-Param-Region", "mcp-param-region"} {
		t.Run(name, func(t *testing.T) {
			h := provision(t, &Handler{})
			u := &upstream{}
			r := post(toolsCall(`1`, "search"), header("Mcp-Protocol-Version", "2026-07-28"))
			r.Header.Add(name, "a")
			r.Header.Add(name, "b")
			body := &countingBody{Reader: r.Body}
			r.Body = body
			w := serve(t, h, r, u)
			assert.Equal(t, 0, u.calls)
			assert.Equal(t, 0, body.reads, "refused before the body is read")
			assert.Equal(t, http.StatusBadRequest, w.Code)
			e := decodeRPCError(t, members(t, w.Body.Bytes())["error"])
			assert.Contains(t, e.Message, "is given 2 times")
		})
	}
}

func TestMirroredParamHeadersPassUntouched(t *testing.T) {
	h := provision(t, &Handler{})
	u := &upstream{}
	r := post(toolsCall(`1`, "search"), header("Mcp-Protocol-Version", "2026-07-28"), header("Mcp-Method", "tools/call"),
		header("Mcp-Name", "search"), header("Mcp-Param-Region", "=?base64?IHBhZGRlZCA=?="), header("Mcp-Param-Count", "42.0"))
	requireForwarded(t, u, 1, serve(t, h, r, u))
	assert.Equal(t, "=?base64?IHBhZGRlZCA=?=", u.request.Header.Get("Mcp-Param-Region"))
	assert.Equal(t, "42.0", u.request.Header.Get("Mcp-Param-Count"))
}

// Found by an attacker's review: values a hop reads differently from the
// gateway.
func TestMirrorHeadersAreReadAsTheNextHopReadsThem(t *testing.T) {
	echo := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo"}}`
	padded := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":" echo"}}`
	tests := []struct {
		name, body, mirror string
		passes             bool
	}{
		// HTTP/2 keeps the spaces around a value; an HTTP/1.1 hop drops
		// them.
		{"a trailing space, as HTTP/1.1 reads it", echo, "echo ", true},
		{"a tab", echo, "\techo", true},
		{"a name with a leading space must be encoded", padded, " echo", false},
		{"and passes encoded", padded, b64(" echo"), true},
		// Base64 with stray padding bits decodes to the same bytes; a router
		// comparing encoded values would see another name.
		{"non-canonical base64", echo, "=?base64?ZWNobx==?=", false},
		{"canonical base64", echo, "=?base64?ZWNobw==?=", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := provision(t, &Handler{})
			u := &upstream{}
			w := serve(t, h, post(tt.body, header("Mcp-Protocol-Version", " 2026-07-28 "), header("Mcp-Method", "tools/call "), header("Mcp-Name", tt.mirror)), u)
			if tt.passes {
				requireForwarded(t, u, 1, w)
				return
			}
			assert.Equal(t, http.StatusBadRequest, w.Code)
			assert.Equal(t, mirror.Code, decodeRPCError(t, members(t, w.Body.Bytes())["error"]).Code)
		})
	}
}

func TestMCPHeadersSpelledWithUnderscoresAreRefused(t *testing.T) {
	for _, name := range []string{"Mcp_Name", "mcp_method", "Mcp_Protocol_Version", "Mcp_Param_Region", "MCP_SESSION_ID"} {
		t.Run(name, func(t *testing.T) {
			h := provision(t, &Handler{})
			u := &upstream{}
			r := post(toolsCall(`1`, "search"), header("Mcp-Name", "search"))
			r.Header[name] = []string{"admin_tool"} // as net/http keeps a name with an underscore
			w := serve(t, h, r, u)
			assert.Equal(t, 0, u.calls)
			assert.Equal(t, http.StatusBadRequest, w.Code)
			assert.Contains(t, decodeRPCError(t, members(t, w.Body.Bytes())["error"]).Message, "spelled with underscores")
		})
	}
	h := provision(t, &Handler{})
	u := &upstream{}
	r := post(toolsCall(`1`, "search"), header("X_Other", "fine"), header("Mcpx_Thing", "fine"))
	requireForwarded(t, u, 1, serve(t, h, r, u))
}

func TestARepeatedMCPHeaderIsAHeaderMismatchInTheStatelessEra(t *testing.T) {
	for version, code := range map[string]int{"2026-07-28": mirror.Code, "2025-11-25": -32600} {
		h := provision(t, &Handler{})
		r := post(toolsCall(`1`, "search"), header("Mcp-Protocol-Version", version))
		r.Header["Mcp-Name"] = []string{"search", "other"}
		w := serve(t, h, r, &upstream{})
		assert.Equal(t, http.StatusBadRequest, w.Code)
		assert.Equal(t, code, decodeRPCError(t, members(t, w.Body.Bytes())["error"]).Code, version)
	}
}

// The largest mirror header a client can send (Caddy takes up to 1 MB of
// headers) is read once: decoded into one buffer of its size at most, and
// repeated in the answer cut to maxEchoed bytes.
func TestAHugeMirrorHeaderIsAnsweredInFewBytes(t *testing.T) {
	huge := strings.Repeat("x", 512<<10)
	for name, value := range map[string]string{"plain": huge, "base64": b64(huge), "bad base64": "=?base64?" + huge + "?="} {
		t.Run(name, func(t *testing.T) {
			h := provision(t, &Handler{})
			u := &upstream{}
			w := serve(t, h, post(toolsCall(`1`, "search"), header("Mcp-Protocol-Version", "2026-07-28"),
				header("Mcp-Method", "tools/call"), header("Mcp-Name", value)), u)
			assert.Equal(t, 0, u.calls)
			assert.Equal(t, http.StatusBadRequest, w.Code)
			assert.Less(t, w.Body.Len(), 4<<10, "the answer repeats the value cut short")
			assert.Equal(t, mirror.Code, decodeRPCError(t, members(t, w.Body.Bytes())["error"]).Code)
		})
	}
}
