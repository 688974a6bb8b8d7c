package test

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/caddymcp/caddy-mcp/test/mcptest"
	"github.com/caddymcp/caddy-mcp/test/wire"
)

// Event streams a tools policy must read, as upstreams write them: what a
// hidden tool's name never crosses, and what a stream's client still gets.

const hidingPolicy = "mcp {\n\ttools {\n\t\tdeny admin_*\n\t}\n}\n"

// listResult is a tools/list result holding a hidden tool and an allowed one.
const listResult = `{"tools":[{"name":"admin_reset","inputSchema":{"type":"object"}},{"name":"search","inputSchema":{"type":"object"}}]}`

// streamUpstream answers every POST and GET with the event stream
// write writes, under status and the given headers.
func streamUpstream(t *testing.T, status int, header http.Header, write func(w io.Writer, id string, done <-chan struct{})) string {
	return mcptest.ServeMCP(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := "null"
		if r.Method == http.MethodPost {
			b, _ := io.ReadAll(r.Body)
			if _, rest, ok := strings.Cut(string(b), `"id":`); ok {
				id, _, _ = strings.Cut(rest, ",")
			}
		}
		for k, v := range header {
			w.Header()[k] = v
		}
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(status)
		write(w, id, r.Context().Done())
	}))
}

// getStream sends a GET resuming a stream, and returns what came of it; a
// stream that has not ended in 30 seconds fails the test.
func getStream(t *testing.T, endpoint string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, endpoint, nil)
	require.NoError(t, err)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Mcp-Session-Id", "s1")
	req.Header.Set("Last-Event-ID", "e1")
	client := &http.Client{Timeout: 30 * time.Second}
	resp, err := client.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err, "the stream ends")
	return resp.StatusCode, string(b)
}

// A priming event (an id, and empty data: what the TypeScript SDK's server
// writes first on every stream once it keeps events) is no message: the
// list after it is filtered and delivered, not refused as unreadable.
func TestAPrimingEventDoesNotSpoilTheList(t *testing.T) {
	up := streamUpstream(t, http.StatusOK, nil, func(w io.Writer, id string, _ <-chan struct{}) {
		fmt.Fprintf(w, "id: e0\ndata: \n\nid: e1\nevent: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":%s,\"result\":%s}\n\n", id, listResult)
	})
	g := mcptest.StartGateway(t, hidingPolicy+mcptest.ProxyTo(up))
	_, body := post(t, g.URL+"/mcp", `{"jsonrpc":"2.0","id":3,"method":"tools/list"}`)
	assert.Contains(t, string(body), `"search"`)
	assert.NotContains(t, string(body), "admin_reset")
	assert.NotContains(t, string(body), "INTERNAL_ERROR")
	assert.Contains(t, string(body), "id: e0\ndata: \n\n", "the priming event passes as it came")
}

// Streams the gateway reads for a policy, and what each gives the client.
func TestResumedStreamsAHidingPolicyReads(t *testing.T) {
	big := strings.Repeat("x", 1100<<10)
	tests := []struct {
		name   string
		status int
		header http.Header
		write  func(w io.Writer, id string, done <-chan struct{})
		check  func(t *testing.T, status int, body string)
	}{
		{"a call result over 1 MiB is answered for, not sent unread", http.StatusOK, nil, func(w io.Writer, _ string, _ <-chan struct{}) {
			fmt.Fprintf(w, "id: e2\nevent: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":5,\"result\":{\"content\":[{\"type\":\"text\",\"text\":%q}]}}\n\n", big)
		}, func(t *testing.T, status int, body string) {
			assert.Equal(t, http.StatusOK, status)
			assert.False(t, strings.Contains(body, big[:1000]), "the result is not sent")
			events := parseSSE([]byte(body))
			require.Len(t, events, 1)
			assert.Equal(t, "e2", events[0].id, "the event's id is kept: resuming goes on after it")
			reply, err := wire.Read([]byte(events[0].data))
			require.NoError(t, err)
			assert.Equal(t, "5", string(reply.ID))
			require.NotNil(t, reply.Error)
			assert.Equal(t, "INTERNAL_ERROR", reply.Error.Data.Code)
		}},
		{"a list over 1 MiB is not sent", http.StatusOK, nil, func(w io.Writer, _ string, _ <-chan struct{}) {
			fmt.Fprintf(w, "id: e2\nevent: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":5,\"result\":{\"tools\":[{\"name\":\"admin_reset\",\"description\":%q}]}}\n\n", big)
		}, func(t *testing.T, _ int, body string) {
			assert.NotContains(t, body, "admin_reset")
			assert.Contains(t, body, "INTERNAL_ERROR")
		}},
		{"a byte order mark first hides no event", http.StatusOK, nil, func(w io.Writer, _ string, _ <-chan struct{}) {
			fmt.Fprintf(w, "\xef\xbb\xbfid: e2\nevent: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":5,\"result\":%s}\n\n", listResult)
		}, func(t *testing.T, _ int, body string) {
			assert.Contains(t, body, `"search"`)
			assert.NotContains(t, body, "admin_reset")
		}},
		{"an edited stream loses its Content-Length", http.StatusOK, nil, func(w io.Writer, _ string, _ <-chan struct{}) {
			fmt.Fprintf(w, "id: e2\nevent: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":5,\"result\":%s}\n\n", listResult)
		}, func(t *testing.T, _ int, body string) {
			assert.Contains(t, body, `"search"`, "the whole edited event, not cut at the upstream's length")
			assert.NotContains(t, body, "admin_reset")
		}},
		{"a stream under another success status is read as a 200's", http.StatusNonAuthoritativeInfo, nil, func(w io.Writer, _ string, _ <-chan struct{}) {
			fmt.Fprintf(w, "id: e2\nevent: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":5,\"result\":%s}\n\n", listResult)
		}, func(t *testing.T, status int, body string) {
			assert.Equal(t, http.StatusNonAuthoritativeInfo, status)
			assert.Contains(t, body, `"search"`)
			assert.NotContains(t, body, "admin_reset")
		}},
		{"a compressed stream is answered at once", http.StatusOK, http.Header{"Content-Encoding": {"br"}}, func(w io.Writer, _ string, done <-chan struct{}) {
			fmt.Fprint(w, "not really brotli")
			w.(http.Flusher).Flush()
			<-done // an upstream that never ends its stream
		}, func(t *testing.T, _ int, body string) {
			assert.Contains(t, body, "INTERNAL_ERROR")
			assert.NotContains(t, body, "not really brotli")
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			header := tt.header
			if tt.name == "an edited stream loses its Content-Length" {
				n := len(fmt.Sprintf("id: e2\nevent: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":5,\"result\":%s}\n\n", listResult))
				header = http.Header{"Content-Length": {fmt.Sprint(n)}}
			}
			up := streamUpstream(t, tt.status, header, tt.write)
			g := mcptest.StartGateway(t, hidingPolicy+mcptest.ProxyTo(up))
			status, body := getStream(t, g.URL+"/mcp")
			tt.check(t, status, body)
		})
	}
}

// Hidden and missing tools look alike in a batch, in a call too large to
// validate, and a call sent as a notification naming a hidden tool is
// refused too.
func TestHiddenAndMissingToolsLookAlikeEverywhere(t *testing.T) {
	g := mcptest.StartGateway(t, "mcp {\n\tvalidate\n\tmax_batch 4\n\ttools {\n\t\tdeny delete_*\n\t}\n}\n"+mcptest.ProxyTo(listServer(t)))
	url := g.URL + "/mcp"
	postAs(t, url, "Bearer alice", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)

	batch := func(tool string) string {
		return postAs(t, url, "Bearer alice", `[{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"`+tool+`","arguments":{}}},{"jsonrpc":"2.0","id":3,"method":"ping"}]`)
	}
	hidden, missing := batch("delete_invoice"), batch("remove_invoice")
	assert.Contains(t, hidden, "nothing in the batch ran")
	assert.Equal(t, hidden, strings.ReplaceAll(missing, "remove_invoice", "delete_invoice"), "a batch: the same answer, but for the name")

	large := func(tool string) string {
		return postAs(t, url, "Bearer alice", `{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"`+tool+`","arguments":{"pad":"`+strings.Repeat("p", 300<<10)+`"}}}`)
	}
	hidden, missing = large("delete_invoice"), large("remove_invoice")
	assert.Contains(t, hidden, "UNKNOWN_ACTION")
	assert.Equal(t, hidden, strings.ReplaceAll(missing, "remove_invoice", "delete_invoice"), "over the size validate checks: the same answer")

	resp, body := post(t, url, `{"jsonrpc":"2.0","method":"tools/call","params":{"name":"delete_invoice","arguments":{}}}`, withHeader("Authorization", "Bearer alice"))
	assert.Equal(t, http.StatusBadRequest, resp.StatusCode, "a call sent as a notification")
	assert.Equal(t, "UNKNOWN_ACTION", envelopeCode(t, body))
}

func envelopeCode(t *testing.T, body []byte) string {
	t.Helper()
	env, err := wire.ErrorEnvelope(body)
	require.NoError(t, err, "%s", body)
	return string(env.Code)
}

// What a hiding policy's reader makes of a result it must filter, on every
// stream that may carry one: filtered when it can be read with certainty,
// replaced by INTERNAL_ERROR for its id when it cannot, whatever its size,
// its lines, or where its tools sit. The upstream answers the variant the
// request names (X-Variant), the request's id being id (1 on a GET).
func TestAResultAHidingPolicyCannotReadNeverPasses(t *testing.T) {
	const tools = `[{"name":"admin_reset","inputSchema":{"type":"object"}},{"name":"search","inputSchema":{"type":"object"}}]`
	pad := func(n int) string { return strings.Repeat("x", n) }
	event := func(lines ...string) string {
		return "id: e2\nevent: message\ndata: " + strings.Join(lines, "\ndata: ") + "\n\n"
	}
	type outcome int
	const (
		filtered outcome = iota // the list arrives without the hidden tool
		replaced                // INTERNAL_ERROR for its id arrives instead
	)
	tests := []struct {
		name  string
		json  bool // a JSON answer, not an event stream
		write func(id string) string
		want  outcome
	}{
		{"a list", false, func(id string) string {
			return event(`{"jsonrpc":"2.0","id":` + id + `,"result":{"tools":` + tools + `}}`)
		}, filtered},
		{"a 2 MiB pad before the tools", false, func(id string) string {
			return event(`{"jsonrpc":"2.0","id":` + id + `,"result":{"pad":"` + pad(2<<20) + `","tools":` + tools + `}}`)
		}, replaced},
		{"a 9 MiB pad before the tools", false, func(id string) string {
			return event(`{"jsonrpc":"2.0","id":` + id + `,"result":{"pad":"` + pad(9<<20) + `","tools":` + tools + `}}`)
		}, replaced},
		{"the tools before a 2 MiB pad", false, func(id string) string {
			return event(`{"jsonrpc":"2.0","id":` + id + `,"result":{"tools":` + tools + `,"pad":"` + pad(2<<20) + `"}}`)
		}, replaced},
		{"the tools before a 9 MiB pad", false, func(id string) string {
			return event(`{"jsonrpc":"2.0","id":` + id + `,"result":{"tools":` + tools + `,"pad":"` + pad(9<<20) + `"}}`)
		}, replaced},
		{"the id after a 2 MiB result, as the TypeScript SDK writes it", false, func(id string) string {
			return event(`{"result":{"pad":"` + pad(2<<20) + `","tools":` + tools + `},"jsonrpc":"2.0","id":` + id + `}`)
		}, replaced},
		{"an escaped tools key before a 2 MiB pad", false, func(id string) string {
			return event(`{"jsonrpc":"2.0","id":` + id + `,"result":{"tool\u0073":` + tools + `,"pad":"` + pad(2<<20) + `"}}`)
		}, replaced},
		{"a 2 MiB pad in lines ended by CR LF", false, func(id string) string {
			return strings.ReplaceAll(event(`{"jsonrpc":"2.0","id":`+id+`,"result":{"pad":"`+pad(2<<20)+`","tools":`+tools+`}}`), "\n", "\r\n")
		}, replaced},
		{"a result split over several data lines", false, func(id string) string {
			return event(`{"jsonrpc":"2.0",`, `"id":`+id+`,"result":{"tools":`, tools+`}}`)
		}, filtered},
		{"a result split over data lines ended by CR", false, func(id string) string {
			return strings.ReplaceAll(event(`{"jsonrpc":"2.0",`, `"id":`+id+`,"result":{"tools":`, tools+`}}`), "\n", "\r")
		}, filtered},
		{"an event over the bound in lines under it", false, func(id string) string {
			return event(`{"jsonrpc":"2.0","id":`+id+`,"result":{"a":"`+pad(600<<10)+`",`, `"b":"`+pad(600<<10)+`",`, `"tools":`+tools+`}}`)
		}, replaced},
		{"a list after an oversized call result", false, func(id string) string {
			return event(`{"jsonrpc":"2.0","id":5,"result":{"content":[{"type":"text","text":"`+pad(2<<20)+`"}]}}`) +
				event(`{"jsonrpc":"2.0","id":`+id+`,"result":{"tools":`+tools+`}}`)
		}, filtered},
		{"a JSON answer with a 2 MiB pad", true, func(id string) string {
			return `{"jsonrpc":"2.0","id":` + id + `,"result":{"pad":"` + pad(2<<20) + `","tools":` + tools + `}}`
		}, filtered},
		{"a JSON answer with a 9 MiB pad", true, func(id string) string {
			return `{"jsonrpc":"2.0","id":` + id + `,"result":{"pad":"` + pad(9<<20) + `","tools":` + tools + `}}`
		}, replaced},
	}
	variants := make(map[string]int)
	for i, tt := range tests {
		variants[tt.name] = i
	}
	up := mcptest.ServeMCP(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tt := tests[variants[r.Header.Get("X-Variant")]]
		id := "1"
		if r.Method == http.MethodPost {
			id = "3"
		}
		w.Header().Set("Content-Type", "text/event-stream")
		if tt.json {
			w.Header().Set("Content-Type", "application/json")
		}
		_, _ = io.WriteString(w, tt.write(id))
	}))
	g := mcptest.StartGateway(t, hidingPolicy+mcptest.ProxyTo(up))

	paths := []struct {
		name string
		id   string
		opts []sendOption
	}{
		{"the answer to a POST", "3", nil},
		{"a resumed GET stream", "1", []sendOption{withMethod(http.MethodGet), withHeader("Accept", "text/event-stream", "Mcp-Session-Id", "s1", "Last-Event-ID", "e1")}},
		{"the standalone GET stream", "1", []sendOption{withMethod(http.MethodGet), withHeader("Accept", "text/event-stream", "Mcp-Session-Id", "s1")}},
	}
	for _, p := range paths {
		for _, tt := range tests {
			t.Run(p.name+"/"+tt.name, func(t *testing.T) {
				body := ""
				if p.opts == nil {
					body = `{"jsonrpc":"2.0","id":3,"method":"tools/list"}`
				}
				_, b := post(t, g.URL+"/mcp", body, append([]sendOption{withHeader("X-Variant", tt.name)}, p.opts...)...)
				assert.False(t, strings.Contains(string(b), "admin_reset"), "the hidden tool never crosses")
				messages := []string{string(b)}
				if !tt.json {
					messages = messages[:0]
					for _, ev := range parseSSE(b) {
						messages = append(messages, ev.data)
					}
				}
				var list, failed []wire.Reply
				for _, m := range messages {
					reply, err := wire.Read([]byte(m))
					require.NoError(t, err, "every message the client reads is JSON (%d bytes)", len(m))
					switch {
					case string(reply.ID) == p.id && reply.Result != nil:
						list = append(list, reply)
					case reply.Error != nil && reply.Error.Data.Code == "INTERNAL_ERROR":
						failed = append(failed, reply)
					}
				}
				if tt.want == filtered {
					require.Len(t, list, 1, "the list arrives")
					assert.True(t, strings.Contains(string(list[0].Result), `"search"`), "the allowed tool is listed")
					return
				}
				assert.Empty(t, list, "no list arrives")
				require.Len(t, failed, 1, "INTERNAL_ERROR arrives in its place")
				want := p.id
				if tt.json && p.id == "1" {
					// A GET's JSON answer (no server gives one) is held
					// whole, up to 8 MiB: one beyond is answered id-less.
					want = ""
				}
				assert.Equal(t, want, string(failed[0].ID), "for the result's id")
			})
		}
	}
}

// What no hiding policy governs passes byte for byte, events too large to
// read included: every stream without a tools block, a GET's stream under
// a policy that only deprecates, and the answer to a call (its own result,
// whatever it holds) under one that hides.
func TestStreamsNoHidingPolicyGovernsPassByteForByte(t *testing.T) {
	const tools = `[{"name":"admin_reset","inputSchema":{"type":"object"}},{"name":"search","inputSchema":{"type":"object"}}]`
	stream := ": first\n\n" +
		"id: e1\nevent: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{\"content\":[{\"type\":\"text\",\"text\":\"" + strings.Repeat("x", 2<<20) + "\"}],\"tools\":" + tools + "}}\n\n" +
		"id: e2\r\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\r\ndata: \"params\":{\"data\":\"" + strings.Repeat("y", 9<<20) + "\"}}\r\n\r\n" +
		"id: e3\nretry: 10\ndata: {\"jsonrpc\":\"2.0\",\ndata: \"id\":7,\"result\":{\"tools\":" + tools + "}}\n\n"
	up := mcptest.ServeMCP(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, stream)
	}))
	call := `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"search","arguments":{}}}`
	resumed := []sendOption{withMethod(http.MethodGet), withHeader("Accept", "text/event-stream", "Mcp-Session-Id", "s1", "Last-Event-ID", "e0")}
	standalone := []sendOption{withMethod(http.MethodGet), withHeader("Accept", "text/event-stream", "Mcp-Session-Id", "s1")}
	tests := []struct {
		name, policy string
		paths        map[string][]sendOption
	}{
		{"no tools block", "mcp\n", map[string][]sendOption{"a call": nil, "a resumed GET stream": resumed, "the standalone GET stream": standalone}},
		{"a policy that only deprecates", "mcp {\n\ttools {\n\t\tdeprecate old_search \"Use search\"\n\t}\n}\n", map[string][]sendOption{"a resumed GET stream": resumed, "the standalone GET stream": standalone}},
		{"a policy that hides", hidingPolicy, map[string][]sendOption{"a call": nil}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := mcptest.StartGateway(t, tt.policy+mcptest.ProxyTo(up))
			for path, opts := range tt.paths {
				body := ""
				if opts == nil {
					body = call
				}
				_, got := post(t, g.URL+"/mcp", body, opts...)
				assert.True(t, string(got) == stream, "%s: %d bytes as the upstream wrote them, not %d: %.300q", path, len(stream), len(got), got)
			}
		})
	}
}

// A result too large to read is not buffered while the gateway waits for
// its end: streams held in the middle of a 9 MiB event cost the heap what
// the reader keeps, not what they carried.
func TestAResultTooLargeToReadIsNotBuffered(t *testing.T) {
	const streams = 8
	pad := strings.Repeat("x", 64<<10)
	written, release := make(chan struct{}, streams), make(chan struct{})
	up := mcptest.ServeMCP(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get("X-Id")
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprintf(w, "id: e2\nevent: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":%s,\"result\":{\"pad\":\"", id)
		for range 9 * 16 {
			if _, err := io.WriteString(w, pad); err != nil {
				return
			}
			w.(http.Flusher).Flush()
		}
		written <- struct{}{}
		select {
		case <-release:
		case <-r.Context().Done():
			return
		}
		_, _ = io.WriteString(w, `","tools":[{"name":"admin_reset"}]}}`+"\n\n")
	}))
	g := mcptest.StartGateway(t, hidingPolicy+mcptest.ProxyTo(up))
	get := func(id int) []byte {
		_, b, err := send(g.URL+"/mcp", "", withContext(t.Context()), withMethod(http.MethodGet),
			withHeader("Accept", "text/event-stream", "Mcp-Session-Id", "s1", "Last-Event-ID", "e1", "X-Id", fmt.Sprint(id)))
		if err != nil {
			return []byte(err.Error())
		}
		return b
	}
	// Warm up: the first stream allocates what later ones reuse.
	go func() { <-written; release <- struct{}{} }()
	require.Contains(t, string(get(0)), "INTERNAL_ERROR")
	before := heapObjects()

	bodies := make(chan []byte, streams)
	for id := 1; id <= streams; id++ {
		go func() { bodies <- get(id) }()
	}
	for range streams {
		select {
		case <-written:
		case <-time.After(30 * time.Second):
			t.Fatal("the upstream could not write its events")
		}
	}
	held := heapObjects()
	close(release)
	for range streams {
		b := <-bodies
		assert.False(t, strings.Contains(string(b), "admin_reset"), "the hidden tool never crosses")
		assert.Contains(t, string(b), "INTERNAL_ERROR")
	}
	growth := int64(held) - int64(before)
	t.Logf("heap held by %d streams in the middle of a 9 MiB event: %d KiB (%d KiB each)", streams, growth>>10, growth/streams>>10)
	assert.Less(t, growth/streams, int64(1<<20), "each stream holds less than the 1 MiB an event may hold, not the 9 MiB it carried")
}
