package federation

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// asked is a JSON-RPC request a test server reads.
type asked struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params struct {
		Cursor string `json:"cursor"`
	} `json:"params"`
}

// answering is a route that answers each request with what answer
// writes, given the request as read.
func answering(answer func(w http.ResponseWriter, r *http.Request, req asked) error) caddyhttp.Handler {
	return handlerOf(func(w http.ResponseWriter, r *http.Request) error {
		var req asked
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			return caddyhttp.Error(http.StatusBadRequest, err)
		}
		return answer(w, r, req)
	})
}

func writeRPC(w http.ResponseWriter, id json.RawMessage, result string) error {
	w.Header().Set("Content-Type", "application/json")
	_, err := fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":%s}`, id, result)
	return err
}

// wellBehaved answers tools/list with one tool, in an event stream with
// CRLF line ends, a comment and a request of its own before the answer.
var wellBehaved = answering(func(w http.ResponseWriter, _ *http.Request, req asked) error {
	w.Header().Set("Content-Type", "text/event-stream")
	_, err := fmt.Fprintf(w, ": hello\r\n\r\nevent: message\r\ndata: {\"jsonrpc\":\"2.0\",\"id\":99,\"method\":\"ping\"}\r\n\r\n"+
		"data: {\"jsonrpc\":\"2.0\",\"id\":%s,\r\ndata: \"result\":{\"tools\":[{\"name\":\"good_tool\"}]}}\r\n\r\n", req.ID)
	return err
})

// hostile is a server that answers tools/list with more than the gateway
// reads, never ends, or answers something else.
type hostile struct {
	name  string
	route caddyhttp.Handler
	bound func(f *federation)
	want  func(t *testing.T, err error)
}

func wantIs(target error) func(t *testing.T, err error) {
	return func(t *testing.T, err error) { assert.ErrorIs(t, err, target) }
}

func wantSays(text string) func(t *testing.T, err error) {
	return func(t *testing.T, err error) { assert.ErrorContains(t, err, text) }
}

// pagesForever answers every page with the entries page gives, and a
// next cursor.
func pagesForever(page func(n int) string) caddyhttp.Handler {
	var n atomic.Int64
	return answering(func(w http.ResponseWriter, _ *http.Request, req asked) error {
		i := int(n.Add(1))
		return writeRPC(w, req.ID, fmt.Sprintf(`{"tools":[%s],"nextCursor":"c%d"}`, page(i), i))
	})
}

func hostiles() []hostile {
	small := func(f *federation) { f.maxList, f.maxItems = 64<<10, 50 }
	return []hostile{{
		name: "100,000 tools, under the size bound",
		route: answering(func(w http.ResponseWriter, _ *http.Request, req asked) error {
			var b strings.Builder
			for i := range 100_000 {
				if i > 0 {
					b.WriteByte(',')
				}
				fmt.Fprintf(&b, `{"name":"t%d"}`, i)
			}
			return writeRPC(w, req.ID, `{"tools":[`+b.String()+`]}`)
		}),
		bound: func(f *federation) { f.maxList, f.maxItems = 8<<20, 50 },
		want:  wantSays("over 50 entries"),
	}, {
		name: "100,000 tools, over the size bound",
		route: answering(func(w http.ResponseWriter, _ *http.Request, req asked) error {
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"tools":[`, req.ID)
			for i := range 100_000 {
				if _, err := fmt.Fprintf(w, `{"name":"t%d"},`, i); err != nil {
					return err
				}
			}
			_, err := io.WriteString(w, `{"name":"last"}]}}`)
			return err
		}),
		bound: small,
		want:  wantIs(errTooLarge),
	}, {
		name: "a 10 MiB body",
		route: answering(func(w http.ResponseWriter, _ *http.Request, req asked) error {
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"tools":[],"padding":"`, req.ID)
			chunk := strings.Repeat("x", 64<<10)
			for range 160 {
				if _, err := io.WriteString(w, chunk); err != nil {
					return err
				}
			}
			_, err := io.WriteString(w, `"}}`)
			return err
		}),
		bound: small,
		want:  wantIs(errTooLarge),
	}, {
		name:  "pages that never end, empty",
		route: pagesForever(func(int) string { return "" }),
		bound: small,
		want:  wantSays("does not end"),
	}, {
		name:  "pages that never end, a tool each",
		route: pagesForever(func(i int) string { return fmt.Sprintf(`{"name":"t%d"}`, i) }),
		bound: small,
		want:  wantSays("over 50 entries"),
	}, {
		name:  "pages that never end, under a size bound",
		route: pagesForever(func(int) string { return `{"description":"` + strings.Repeat("x", 1000) + `"}` }),
		bound: func(f *federation) { f.maxList, f.maxItems = 16<<10, 5000 },
		want:  wantIs(errTooLarge),
	}, {
		name: "an answer to another id",
		route: answering(func(w http.ResponseWriter, _ *http.Request, _ asked) error {
			return writeRPC(w, []byte(`"someone-else"`), `{"tools":[{"name":"stolen"}]}`)
		}),
		bound: small,
		want:  wantSays("to another request"),
	}, {
		name: "a stream whose one answer is to another id",
		route: answering(func(w http.ResponseWriter, _ *http.Request, _ asked) error {
			w.Header().Set("Content-Type", "text/event-stream")
			_, err := io.WriteString(w, "data: {\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{\"tools\":[{\"name\":\"stolen\"}]}}\n\n")
			return err
		}),
		bound: small,
		want:  wantSays("held no response"),
	}, {
		name: "not JSON",
		route: answering(func(w http.ResponseWriter, _ *http.Request, _ asked) error {
			w.Header().Set("Content-Type", "application/json")
			_, err := io.WriteString(w, "{\"jsonrpc\":\"2.0\",\"id\":")
			return err
		}),
		bound: small,
		want:  wantSays("no JSON-RPC response"),
	}, {
		name: "JSON, but no response",
		route: answering(func(w http.ResponseWriter, _ *http.Request, req asked) error {
			w.Header().Set("Content-Type", "application/json")
			_, err := fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s}`, req.ID)
			return err
		}),
		bound: small,
		want:  wantSays("no JSON-RPC response"),
	}, {
		name: "a result with no tools",
		route: answering(func(w http.ResponseWriter, _ *http.Request, req asked) error {
			return writeRPC(w, req.ID, `{"tools":{"name":"x"}}`)
		}),
		bound: small,
		want:  wantSays("holds no tools array"),
	}, {
		name: "an HTML 502",
		route: handlerOf(func(w http.ResponseWriter, _ *http.Request) error {
			w.Header().Set("Content-Type", "text/html")
			w.WriteHeader(http.StatusBadGateway)
			_, err := io.WriteString(w, "<html><body>502 Bad Gateway</body></html>")
			return err
		}),
		bound: small,
		want:  wantSays("HTTP 502"),
	}, {
		name:  "a route that fails",
		route: nil, // unanswered
		bound: small,
		want:  wantSays("did not answer"),
	}, {
		name:  "a route that panics",
		route: handlerOf(func(http.ResponseWriter, *http.Request) error { panic(http.ErrAbortHandler) }),
		bound: small,
		want:  wantSays("panicked"),
	}, {
		name: "a JSON-RPC error",
		route: answering(func(w http.ResponseWriter, _ *http.Request, req asked) error {
			w.Header().Set("Content-Type", "application/json")
			_, err := fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"error":{"code":-32601,"message":"no tools here"}}`, req.ID)
			return err
		}),
		bound: small,
		want:  wantSays("no tools here"),
	}}
}

// listedBy asks f, whose servers are a hostile one then a well-behaved
// one, for its tools, and checks that the well-behaved server's are
// listed.
func listedBy(t *testing.T, f *federation) error {
	t.Helper()
	from := httptest.NewRequest(http.MethodPost, "/mcp", strings.NewReader("{}"))
	from.Header.Set("Mcp-Session-Id", "the client's")
	out := f.listAll(context.Background(), from, nil, toolsList)
	require.Len(t, out, 2)
	require.NoError(t, out[1].err, "the well-behaved server")
	require.Len(t, out[1].entries, 1)
	assert.Equal(t, "good_tool", out[1].entries[0].own)
	assert.Nil(t, out[0].entries, "the hostile server's entries are left out whole")
	require.Error(t, out[0].err, "the hostile server")
	return out[0].err
}

// A server that answers too much, never ends its list, or answers
// something else is left out of the merged list within its bounds, and
// the others are listed.
func TestAHostileServerIsLeftOutOfTheListAndTheOthersListed(t *testing.T) {
	for _, h := range hostiles() {
		t.Run(h.name, func(t *testing.T) {
			f := testFederation(testServer("hostile", h.route, nil), testServer("good", wellBehaved, nil))
			h.bound(f)
			err := listedBy(t, f)
			t.Log(err)
			h.want(t, err)
		})
	}
}

// A server that never answers is left out when list_timeout ends, and
// the others are listed; the server sees its request cancelled.
func TestAServerThatNeverAnswersIsLeftOutAtItsDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var cancelled atomic.Bool
		never := handlerOf(func(_ http.ResponseWriter, r *http.Request) error {
			<-r.Context().Done()
			cancelled.Store(true)
			return r.Context().Err()
		})
		f := testFederation(testServer("never", never, nil), testServer("good", wellBehaved, nil))
		err := listedBy(t, f)
		assert.ErrorIs(t, err, context.DeadlineExceeded)
		assert.True(t, cancelled.Load())
	})
}

// A server that writes its status and nothing more, until its request
// ends, is left out too.
func TestAServerThatStallsAfterItsHeaderIsLeftOutAtItsDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		stalls := handlerOf(func(w http.ResponseWriter, r *http.Request) error {
			w.Header().Set("Content-Type", "text/event-stream")
			w.WriteHeader(http.StatusOK)
			_, _ = io.WriteString(w, ": still here\n\n")
			<-r.Context().Done()
			return nil
		})
		f := testFederation(testServer("stalls", stalls, nil), testServer("good", wellBehaved, nil))
		err := listedBy(t, f)
		assert.ErrorContains(t, err, "held no response")
	})
}

// The gateway's request to a server carries the server's own session,
// none of the client's, and the list's method.
func TestTheListRequestCarriesTheServersSession(t *testing.T) {
	var got http.Header
	spy := answering(func(w http.ResponseWriter, r *http.Request, req asked) error {
		got = r.Header.Clone()
		return writeRPC(w, req.ID, `{"tools":[{"name":"good_tool"}]}`)
	})
	f := testFederation(testServer("spy", spy, nil), testServer("good", wellBehaved, nil))
	from := httptest.NewRequest(http.MethodPost, "/mcp", strings.NewReader("{}"))
	from.Header.Set("Mcp-Session-Id", "the client's")
	from.Header.Set("Authorization", "Bearer t")
	from.Header.Set("Cookie", "c=1")
	o := &opened{ids: sessionIDs{"spy": "spy-session", "good": ""}}
	out := f.listAll(context.Background(), from, o, toolsList)
	require.NoError(t, out[0].err)
	require.NoError(t, out[1].err)
	assert.Equal(t, []string{"spy-session"}, got["Mcp-Session-Id"])
	assert.Equal(t, "tools/list", got.Get("Mcp-Method"))
	assert.Equal(t, "Bearer t", got.Get("Authorization"))
	assert.Empty(t, got.Get("Cookie"))

	// A server not connected in the session is not asked.
	out = f.listAll(context.Background(), from, &opened{ids: sessionIDs{"good": ""}}, toolsList)
	assert.True(t, errors.Is(out[0].err, errNotConnected))
	assert.NoError(t, out[1].err)
}
