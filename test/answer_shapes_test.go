package test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/caddymcp/caddy-mcp/envelope"
	"github.com/caddymcp/caddy-mcp/test/mcptest"
)

// Every answer a client takes for a call's response is held to what the
// features hold that response to, whatever the success status it comes
// under, and however the server spells the call's id: the bytes the
// official clients accept, read through a real Caddy in front of a server
// that answers in each shape (shapes_test.go).

// successes are the statuses the clients read an answer under.
var successes = []int{http.StatusOK, http.StatusCreated, http.StatusAccepted, http.StatusNonAuthoritativeInfo, http.StatusPartialContent}

// tsReads reports whether the TypeScript client reads an answer under
// status (it drops a 202's body) with the id spelt so (its schema refuses
// an id that is no integer).
func tsReads(status int, spelling string) bool {
	return status != http.StatusAccepted && spelling != "fraction"
}

// The TypeScript client takes a 300 KiB result, under every success status
// it reads and every spelling of the id it matches, in JSON or in an event
// stream, as RESULT_TOO_LARGE: never as the result.
func TestTheTSClientGetsNoResultOverItsBudgetWhateverItsShape(t *testing.T) {
	_, upstream := startScripted(t)
	endpoint := holdResults(t, upstream, "max 100KiB")
	var shapes []shape
	var steps []mcptest.TSStep
	for _, status := range successes {
		for _, sse := range []bool{false, true} {
			for _, spelling := range idSpellings {
				if !tsReads(status, spelling) {
					continue
				}
				sh := shape{Status: status, SSE: sse, ID: spelling, Size: 300 << 10, IDLast: spelling == "string"}
				shapes = append(shapes, sh)
				step := mcptest.CallToolStep("any", callArgs(sh))
				step.TimeoutMS = 20000
				steps = append(steps, step)
			}
		}
	}
	out := mcptest.RunTSClient(t, mcptest.TSScript{URL: endpoint, Steps: steps})
	require.Len(t, out.Results, len(shapes))
	for i, sh := range shapes {
		r := out.Results[i]
		if !assert.True(t, r.OK, "%+v: %v", sh, r.Error) {
			continue
		}
		assert.Equal(t, "RESULT_TOO_LARGE", resultCode(r.Text()), "%+v: the client took %d bytes", sh, len(r.Result))
	}
}

// The Go SDK client reads a 202's answer, and takes an id written 4.5 for
// the call 4: it gets RESULT_TOO_LARGE too.
func TestTheGoClientGetsNoResultOverItsBudgetWhateverItsShape(t *testing.T) {
	_, upstream := startScripted(t)
	endpoint := holdResults(t, upstream, "max 100KiB")
	ctx := t.Context()
	session, err := mcp.NewClient(&mcp.Implementation{Name: "shapes", Version: "0"}, nil).
		Connect(ctx, &mcp.StreamableClientTransport{Endpoint: endpoint}, nil)
	require.NoError(t, err)
	defer session.Close()
	for _, status := range []int{http.StatusOK, http.StatusCreated, http.StatusAccepted} {
		for _, sse := range []bool{false, true} {
			for _, spelling := range []string{"same", "float", "fraction"} {
				sh := shape{Status: status, SSE: sse, ID: spelling, Size: 300 << 10}
				callCtx, cancel := context.WithTimeout(ctx, 20*time.Second)
				res, err := session.CallTool(callCtx, &mcp.CallToolParams{Name: "any", Arguments: callArgs(sh)})
				cancel()
				if !assert.NoError(t, err, "%+v", sh) {
					continue
				}
				require.Len(t, res.Content, 1, "%+v", sh)
				text := res.Content[0].(*mcp.TextContent).Text
				assert.Equal(t, "RESULT_TOO_LARGE", resultCode(text), "%+v: the client took %d bytes", sh, len(text))
				if !sh.SSE {
					// The server declared its length: the words give it, and
					// the budget once.
					m := declaredSize.FindStringSubmatch(text)
					if assert.NotNil(t, m, "%+v: %s", sh, text) {
						n, _ := strconv.Atoi(m[1])
						assert.Greater(t, n, sh.Size, "%+v: the size the server declared", sh)
					}
				}
			}
		}
	}
}

// A tool the policy hides is not in any tools/list answer the TypeScript
// client takes, whatever its status and however its id is spelt.
func TestAHiddenToolIsInNoListAClientTakes(t *testing.T) {
	_, upstream := startScripted(t)
	gw := mcptest.StartGateway(t, "mcp {\n\ttools {\n\t\tdeny admin_*\n\t}\n}\n"+mcptest.ProxyTo(upstream))
	var shapes []shape
	var steps []mcptest.TSStep
	for _, status := range successes {
		for _, sse := range []bool{false, true} {
			for _, spelling := range idSpellings {
				if !tsReads(status, spelling) {
					continue
				}
				sh := shape{Status: status, SSE: sse, ID: spelling, IDLast: spelling == "exp"}
				shapes = append(shapes, sh)
				step := mcptest.TSStep{Op: "listTools", Params: map[string]any{"cursor": shapeJSON(sh)}, TimeoutMS: 20000}
				steps = append(steps, step)
			}
		}
	}
	out := mcptest.RunTSClient(t, mcptest.TSScript{URL: gw.URL + mcptest.MCPPath, Steps: steps})
	require.Len(t, out.Results, len(shapes))
	for i, sh := range shapes {
		r := out.Results[i]
		if !assert.True(t, r.OK, "%+v: %v", sh, r.Error) {
			continue
		}
		assert.True(t, strings.Contains(string(r.Result), `"visible"`) && !strings.Contains(string(r.Result), "admin_reset"),
			"%+v: the client took %.300s", sh, r.Result)
	}
}

// An event that never ends, or that trickles past the budget and stops,
// is read no further than the budget: the client is answered
// RESULT_TOO_LARGE at once, the server is left (its answer's connection
// closed), and told to stop the call.
func TestAResponseEventPastItsBudgetIsNotReadOn(t *testing.T) {
	for _, sh := range []shape{
		{SSE: true, IDLast: true, Endless: true},
		{SSE: true, ID: "same", Endless: true},
		{SSE: true, IDLast: true, Trickle: true, Size: 256 << 10},
	} {
		t.Run(fmt.Sprintf("endless=%v,idLast=%v", sh.Endless, sh.IDLast), func(t *testing.T) {
			s, upstream := startScripted(t)
			endpoint := holdResults(t, upstream, "max 100KiB")
			out := mcptest.RunTSClient(t, mcptest.TSScript{URL: endpoint, Steps: []mcptest.TSStep{
				{Op: "callTool", Name: "any", Arguments: callArgs(sh), TimeoutMS: 30000},
			}})
			require.Len(t, out.Results, 1)
			require.True(t, out.Results[0].OK, "%v", out.Results[0].Error)
			assert.Equal(t, "RESULT_TOO_LARGE", resultCode(out.Results[0].Text()))
			cancelled := s.waitCancelled(t, 1)
			assert.Equal(t, []string{"1"}, cancelled, "the call (the client's second request) is cancelled upstream")
			_, wrote, stopped := s.seen()
			assert.Equal(t, 1, stopped, "the gateway left the answer before its end")
			assert.Less(t, wrote, 32<<20, "what the server could write before the gateway stopped reading")
		})
	}
}

// shapeJSON is sh as the cursor of a tools/list asks for it.
func shapeJSON(sh shape) string {
	b, _ := json.Marshal(sh)
	return string(b)
}

// declaredSize finds the size a refusal names, and its budget once.
var declaredSize = regexp.MustCompile(`too large to be given to you: (\d+) bytes, over its budget of 102400 bytes \(about 25600 tokens\)</message>`)

// resultCode is the code of the envelope a CallToolResult's text holds,
// "" when it holds none.
func resultCode(text string) string {
	p, err := envelope.Parse(text)
	if err != nil {
		return ""
	}
	return string(p.Code)
}
