package test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/caddymcp/caddy-mcp/internal/jsonrpc"
	"github.com/caddymcp/caddy-mcp/test/mcptest"
)

// Every feature that reads answers, against every shape of answer: status
// × body × the spelling of the id. Under a success status the clients
// read an answer under, whatever a client takes for the response holds to
// the feature's promise; under any other, the answer reaches the client as
// the server wrote it (the wire contract), which no client takes for the
// response.

// tableStatuses are the statuses the table answers under.
var tableStatuses = []int{
	http.StatusOK, http.StatusCreated, http.StatusAccepted, http.StatusNonAuthoritativeInfo,
	http.StatusNoContent, http.StatusPartialContent,
	http.StatusBadRequest, http.StatusNotFound, http.StatusInternalServerError, http.StatusServiceUnavailable,
}

// allShapes are the shapes of the table, with size bytes of result text.
func allShapes(size int) []shape {
	var shapes []shape
	for _, status := range tableStatuses {
		for _, sse := range []bool{false, true} {
			for _, spelling := range idSpellings {
				shapes = append(shapes, shape{Status: status, SSE: sse, ID: spelling, Size: size, IDLast: spelling == "exp"})
			}
		}
	}
	return shapes
}

// tableFeature is a site's feature and what it promises of each answer.
type tableFeature struct {
	name, site string
	// request is what is sent for a shape.
	request func(sh shape) string
	// check holds what a client took (nil: nothing) to the promise; answer
	// is the gateway's answer, and send sends another request in the same
	// scope.
	check func(t *testing.T, sh shape, taken []byte, send func(body string) []byte)
}

const tableBudget = 100 << 10

var tableFeatures = []tableFeature{
	{name: "results", site: "results {\n\t\tmax 100KiB\n\t}",
		request: func(sh shape) string { return shapedCall(sh) },
		check: func(t *testing.T, sh shape, taken []byte, _ func(string) []byte) {
			assert.LessOrEqual(t, len(taken), tableBudget, "%+v: a response over the budget", sh)
		}},
	{name: "results, cut", site: "results {\n\t\tmax 100KiB\n\t\ttruncate\n\t}",
		request: func(sh shape) string { return shapedCall(sh) },
		check: func(t *testing.T, sh shape, taken []byte, _ func(string) []byte) {
			assert.LessOrEqual(t, len(taken), tableBudget, "%+v: a response over the budget", sh)
			if taken != nil {
				assert.Contains(t, string(taken), "RESULT_TRUNCATED", "%+v: cut, with the warning", sh)
			}
		}},
	{name: "a tool policy that hides", site: "tools {\n\t\tdeny admin_*\n\t}",
		request: func(sh shape) string { return shapedList(sh) },
		check: func(t *testing.T, sh shape, taken []byte, _ func(string) []byte) {
			assert.NotContains(t, string(taken), "admin_reset", "%+v: a hidden tool", sh)
		}},
	{name: "validate", site: "validate",
		request: func(sh shape) string { return shapedList(sh) },
		check: func(t *testing.T, sh shape, taken []byte, send func(string) []byte) {
			if taken == nil {
				return // a list no client took: learning it or not changes nothing
			}
			answer := send(`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"small","arguments":{"n":50}}}`)
			assert.Contains(t, string(answer), "validation_error", "%+v: the list the client took is the one calls are checked against", sh)
		}},
	{name: "sessions", site: "sessions {\n\t\tsecret " + poolSecret + "\n\t}",
		request: func(sh shape) string {
			return `{"jsonrpc":"2.0","id":4,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}`
		}},
}

// clientTakes is the response a client takes from an answer: under a
// status the clients read an answer under (any success but 204: the Go
// SDK reads a 202's), the first response of its JSON body or of its
// stream's message events, whatever the spelling of its id (each spelling
// of the table is one a client matches); nil under any other status.
func clientTakes(status int, header http.Header, body []byte) []byte {
	if status < 200 || status >= 300 || status == http.StatusNoContent {
		return nil
	}
	if !strings.HasPrefix(header.Get("Content-Type"), "text/event-stream") {
		return firstResponse(body)
	}
	for _, e := range parseSSE(body) {
		if e.event == "" || e.event == "message" {
			if msg := firstResponse([]byte(e.data)); msg != nil {
				return msg
			}
		}
	}
	return nil
}

// firstResponse is data when it is a JSON-RPC response, nil otherwise.
func firstResponse(data []byte) []byte {
	var m struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
	}
	if json.Unmarshal(data, &m) != nil || m.ID == nil || m.Method != "" {
		return nil
	}
	return data
}

func TestEveryFeatureHoldsEveryAnswerShapeAsAClientTakesIt(t *testing.T) {
	_, upstream := startScripted(t)
	for _, f := range tableFeatures {
		t.Run(f.name, func(t *testing.T) {
			gw := mcptest.StartGateway(t, "mcp {\n\t"+f.site+"\n}\n"+mcptest.ProxyTo(upstream))
			endpoint := gw.URL + mcptest.MCPPath
			for i, sh := range allShapes(300 << 10) {
				scope := withHeader("Authorization", fmt.Sprintf("Bearer shape-%d", i))
				shaped := withHeader("X-Shape", shapeJSON(sh))
				body := f.request(sh)
				resp, answer := post(t, endpoint, body, scope, shaped)
				taken := clientTakes(resp.StatusCode, resp.Header, answer)
				if sid := resp.Header.Get("Mcp-Session-Id"); sid != "" {
					assert.NotEqual(t, upstreamSession, sid, "%+v: the upstream's session id is never given out unsealed", sh)
				}
				if !isSuccess(resp.StatusCode) {
					direct, directBody := post(t, upstream, body, shaped)
					require.Equal(t, direct.StatusCode, resp.StatusCode, "%+v", sh)
					assert.True(t, string(directBody) == string(answer), "%+v: an error status's answer passes as the server wrote it", sh)
					continue
				}
				if taken != nil {
					assert.True(t, jsonrpc.MayAnswer([]byte("4"), idOf(taken)), "%+v: taken for the request", sh)
				}
				if f.check != nil {
					f.check(t, sh, taken, func(b string) []byte { _, a := post(t, endpoint, b, scope); return a })
				}
			}
		})
	}
}

// isSuccess reports whether status is a success.
func isSuccess(status int) bool { return status >= 200 && status < 300 }

// idOf is the id of a JSON-RPC message.
func idOf(msg []byte) []byte {
	var m struct {
		ID json.RawMessage `json:"id"`
	}
	_ = json.Unmarshal(msg, &m)
	return m.ID
}
