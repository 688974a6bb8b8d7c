package test

import (
	"bytes"
	"cmp"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/caddymcp/caddy-mcp/test/mcptest"
)

// MCP has two protocol eras. Up to 2025-11-25 a client opens a session with
// initialize; from 2026-07-28 it asks server/discover once and every request
// carries its version in _meta and mirrors its method and name into the
// Mcp-Method and Mcp-Name headers (Mcp-Param-* for tool arguments a tool
// marks with x-mcp-header). The specification has values that are not plain
// ASCII sent base64-encoded as =?base64?...?=; the Go SDK client sends names
// raw (see goClientMirrors2026). A gateway that reads the body and compares
// it with the headers must let every client of both eras through exactly as
// the server answers it directly, whatever the names.

// The server's tools, prompts and resources: one plain ASCII control of
// each, and names or URIs that are awkward in a header: an inner space,
// accents (which a header carries only base64-encoded), a percent-encoded
// URI, and a URI with raw non-ASCII and a space.
var (
	erasTools = []struct {
		name   string
		schema string
		args   map[string]any
	}{
		{"echo", `{"type":"object","properties":{"text":{"type":"string"}}}`,
			map[string]any{"text": "hello"}},
		{"my tool", `{"type":"object","properties":{"region":{"type":"string","x-mcp-header":"Region"},"text":{"type":"string"}}}`,
			map[string]any{"region": "us-west1", "text": "two words"}},
		// Text is not ASCII, so a 2026-07-28 client sends Mcp-Param-Text
		// base64-encoded.
		{"résumé", `{"type":"object","properties":{"text":{"type":"string","x-mcp-header":"Text"},"n":{"type":"integer","x-mcp-header":"N"}}}`,
			map[string]any{"text": "naïve café", "n": 3}},
	}
	erasPrompts = []struct {
		name string
		args map[string]string
	}{
		{"greeting", map[string]string{"who": "world"}},
		{"résumé", map[string]string{"who": "Zoë"}},
		{"café menu", map[string]string{"dish": "crème brûlée"}},
	}
	erasResources = []string{
		"file:///docs/readme.txt",
		"file:///docs/r%C3%A9sum%C3%A9.txt",
		"file:///docs/naïve notes.txt",
	}
)

// erasServer is the official Go SDK server with the tools, prompts and
// resources above. It is stateless: the SDK serves 2026-07-28 requests only
// without sessions, and serves initialize and the requests of a 2025 client
// the same way.
func erasServer() http.Handler {
	s := mcp.NewServer(&mcp.Implementation{Name: "eras", Version: "1"}, nil)
	for _, tool := range erasTools {
		s.AddTool(&mcp.Tool{Name: tool.name, InputSchema: json.RawMessage(tool.schema)},
			func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: echoed(req.Params.Name, req.Params.Arguments)}}}, nil
			})
	}
	for _, p := range erasPrompts {
		var args []*mcp.PromptArgument
		for name := range p.args {
			args = append(args, &mcp.PromptArgument{Name: name})
		}
		s.AddPrompt(&mcp.Prompt{Name: p.name, Arguments: args},
			func(_ context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
				return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{{
					Role: "user", Content: &mcp.TextContent{Text: echoed(req.Params.Name, req.Params.Arguments)},
				}}}, nil
			})
	}
	for _, uri := range erasResources {
		s.AddResource(&mcp.Resource{URI: uri, Name: uri, MIMEType: "text/plain"},
			func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
				return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, Text: "contents of " + req.Params.URI}}}, nil
			})
	}
	return mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, &mcp.StreamableHTTPOptions{Stateless: true})
}

// echoed is what a tool or prompt answers: its name and its arguments, the
// arguments re-encoded with sorted keys so that every client's spelling of
// the same arguments gives the same answer.
func echoed(name string, args any) string {
	if raw, ok := args.(json.RawMessage); ok {
		var v any
		if err := json.Unmarshal(raw, &v); err != nil {
			return name + " " + err.Error()
		}
		args = v
	}
	b, err := json.Marshal(args)
	if err != nil {
		return name + " " + err.Error()
	}
	return name + " " + string(b)
}

// erasExpected is the transcript every client must see, directly and
// through the gateway, at protocol version version.
func erasExpected(version string) []string {
	lines := []string{"protocol " + version}
	var names []string
	for _, tool := range erasTools {
		names = append(names, tool.name)
	}
	lines = append(lines, "tools/list "+sortedList(names))
	for _, tool := range erasTools {
		lines = append(lines, "tools/call "+tool.name+" → "+echoed(tool.name, tool.args))
	}
	names = nil
	for _, p := range erasPrompts {
		names = append(names, p.name)
	}
	lines = append(lines, "prompts/list "+sortedList(names))
	for _, p := range erasPrompts {
		lines = append(lines, "prompts/get "+p.name+" → user: "+echoed(p.name, p.args))
	}
	lines = append(lines, "resources/list "+sortedList(erasResources))
	for _, uri := range erasResources {
		lines = append(lines, "resources/read "+uri+" → "+uri+" text/plain: contents of "+uri)
	}
	return lines
}

func sortedList(names []string) string {
	names = slices.Clone(names)
	sort.Strings(names)
	return strings.Join(names, " | ")
}

// A transcript line for a failed step says so, so that a failure shows as
// a difference from the expected transcript at its place.
func failedLine(what string, err any) string { return fmt.Sprintf("%s → FAILED: %v", what, err) }

// runGoScenario runs the scenario with the Go SDK client asking for version
// (the SDK's default when ""), and returns its transcript.
func runGoScenario(t *testing.T, endpoint, version string, client *http.Client) []string {
	t.Helper()
	ctx := t.Context()
	c := mcp.NewClient(&mcp.Implementation{Name: "eras-client", Version: "1"}, nil)
	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: endpoint, HTTPClient: client},
		&mcp.ClientSessionOptions{ProtocolVersion: version})
	require.NoError(t, err)
	defer cs.Close()

	lines := []string{"protocol " + cs.InitializeResult().ProtocolVersion}
	if tools, err := cs.ListTools(ctx, nil); err != nil {
		lines = append(lines, failedLine("tools/list", err))
	} else {
		lines = append(lines, toolsLine(tools))
	}
	for _, tool := range erasTools {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool.name, Arguments: tool.args})
		lines = append(lines, callLine(tool.name, res, err))
	}
	if prompts, err := cs.ListPrompts(ctx, nil); err != nil {
		lines = append(lines, failedLine("prompts/list", err))
	} else {
		lines = append(lines, promptsLine(prompts))
	}
	for _, p := range erasPrompts {
		res, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: p.name, Arguments: p.args})
		lines = append(lines, promptLine(p.name, res, err))
	}
	if resources, err := cs.ListResources(ctx, nil); err != nil {
		lines = append(lines, failedLine("resources/list", err))
	} else {
		lines = append(lines, resourcesLine(resources))
	}
	for _, uri := range erasResources {
		res, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: uri})
		lines = append(lines, readLine(uri, res, err))
	}
	return lines
}

// runTSScenario runs the scenario with the TypeScript SDK client and
// returns its transcript.
func runTSScenario(t *testing.T, endpoint string) []string {
	t.Helper()
	steps := []mcptest.TSStep{mcptest.ListToolsStep()}
	for _, tool := range erasTools {
		steps = append(steps, mcptest.CallToolStep(tool.name, tool.args))
	}
	steps = append(steps, mcptest.RequestStep("prompts/list", nil))
	for _, p := range erasPrompts {
		steps = append(steps, mcptest.RequestStep("prompts/get", map[string]any{"name": p.name, "arguments": p.args}))
	}
	steps = append(steps, mcptest.RequestStep("resources/list", nil))
	for _, uri := range erasResources {
		steps = append(steps, mcptest.RequestStep("resources/read", map[string]any{"uri": uri}))
	}
	out := mcptest.RunTSClient(t, mcptest.TSScript{URL: endpoint, Steps: steps})
	require.Len(t, out.Results, len(steps))
	assert.Empty(t, out.TransportErrors)

	lines := []string{"protocol " + out.Session.ProtocolVersion}
	results := out.Results
	next := func(v any) error {
		r := results[0]
		results = results[1:]
		return r.Decode(v)
	}
	var tools mcp.ListToolsResult
	if err := next(&tools); err != nil {
		lines = append(lines, failedLine("tools/list", err))
	} else {
		lines = append(lines, toolsLine(&tools))
	}
	for _, tool := range erasTools {
		var res mcp.CallToolResult
		err := next(&res)
		lines = append(lines, callLine(tool.name, &res, err))
	}
	var prompts mcp.ListPromptsResult
	if err := next(&prompts); err != nil {
		lines = append(lines, failedLine("prompts/list", err))
	} else {
		lines = append(lines, promptsLine(&prompts))
	}
	for _, p := range erasPrompts {
		var res mcp.GetPromptResult
		err := next(&res)
		lines = append(lines, promptLine(p.name, &res, err))
	}
	var resources mcp.ListResourcesResult
	if err := next(&resources); err != nil {
		lines = append(lines, failedLine("resources/list", err))
	} else {
		lines = append(lines, resourcesLine(&resources))
	}
	for _, uri := range erasResources {
		var res mcp.ReadResourceResult
		err := next(&res)
		lines = append(lines, readLine(uri, &res, err))
	}
	return lines
}

func toolsLine(res *mcp.ListToolsResult) string {
	var names []string
	for _, tool := range res.Tools {
		names = append(names, tool.Name)
	}
	return "tools/list " + sortedList(names)
}

func callLine(name string, res *mcp.CallToolResult, err error) string {
	what := "tools/call " + name
	switch {
	case err != nil:
		return failedLine(what, err)
	case res.IsError || len(res.Content) != 1:
		b, _ := json.Marshal(res)
		return failedLine(what, string(b))
	}
	text, ok := res.Content[0].(*mcp.TextContent)
	if !ok {
		return failedLine(what, fmt.Sprintf("content %T", res.Content[0]))
	}
	return what + " → " + text.Text
}

func promptsLine(res *mcp.ListPromptsResult) string {
	var names []string
	for _, p := range res.Prompts {
		names = append(names, p.Name)
	}
	return "prompts/list " + sortedList(names)
}

func promptLine(name string, res *mcp.GetPromptResult, err error) string {
	what := "prompts/get " + name
	if err != nil {
		return failedLine(what, err)
	}
	if len(res.Messages) != 1 {
		return failedLine(what, fmt.Sprintf("%d messages", len(res.Messages)))
	}
	text, ok := res.Messages[0].Content.(*mcp.TextContent)
	if !ok {
		return failedLine(what, fmt.Sprintf("content %T", res.Messages[0].Content))
	}
	return what + " → " + string(res.Messages[0].Role) + ": " + text.Text
}

func resourcesLine(res *mcp.ListResourcesResult) string {
	var uris []string
	for _, r := range res.Resources {
		uris = append(uris, r.URI)
	}
	return "resources/list " + sortedList(uris)
}

func readLine(uri string, res *mcp.ReadResourceResult, err error) string {
	what := "resources/read " + uri
	if err != nil {
		return failedLine(what, err)
	}
	if len(res.Contents) != 1 {
		return failedLine(what, fmt.Sprintf("%d contents", len(res.Contents)))
	}
	c := res.Contents[0]
	return what + " → " + c.URI + " " + c.MIMEType + ": " + c.Text
}

// postLog records the POSTs seen at one point of the path: their bodies and
// the MCP headers that came with them.
type postLog struct {
	mu    sync.Mutex
	posts []loggedPost
}

type loggedPost struct {
	body   []byte
	header http.Header
}

func (l *postLog) record(h http.Header, body []byte) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.posts = append(l.posts, loggedPost{body: body, header: h.Clone()})
}

// take returns what was recorded and starts over.
func (l *postLog) take() []loggedPost {
	l.mu.Lock()
	defer l.mu.Unlock()
	p := l.posts
	l.posts = nil
	return p
}

// recording records every POST that reaches next, as the upstream receives
// it.
func recording(l *postLog, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			body, err := io.ReadAll(r.Body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
			l.record(r.Header, body)
		}
		next.ServeHTTP(w, r)
	})
}

// sendingRecorder records every POST a client sends, as it leaves the
// client.
type sendingRecorder struct {
	log  *postLog
	next http.RoundTripper
}

func (s *sendingRecorder) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method == http.MethodPost && req.Body != nil {
		body, err := io.ReadAll(req.Body)
		_ = req.Body.Close()
		if err != nil {
			return nil, err
		}
		req = req.Clone(req.Context())
		req.Body = io.NopCloser(bytes.NewReader(body))
		s.log.record(req.Header, body)
	}
	return s.next.RoundTrip(req)
}

// mcpHeaderLines renders each POST as its body and its Mcp-* headers (every
// value, in name order, quoted in ASCII so that every byte shows), sorted,
// to compare what two points of the path saw.
func mcpHeaderLines(posts []loggedPost) []string {
	var lines []string
	for _, p := range posts {
		var names []string
		for name := range p.header {
			if strings.HasPrefix(name, "Mcp-") {
				names = append(names, name)
			}
		}
		sort.Strings(names)
		var b strings.Builder
		b.WriteString(strconv.QuoteToASCII(string(p.body)))
		for _, name := range names {
			for _, v := range p.header[name] {
				fmt.Fprintf(&b, "\n  %s: %s", name, strconv.QuoteToASCII(v))
			}
		}
		lines = append(lines, b.String())
	}
	sort.Strings(lines)
	return lines
}

// mirrored gives, for each tools/call, prompts/get and resources/read in
// posts, its name or URI and the Mcp-Name and Mcp-Param-* headers sent with
// it ("-" when absent).
func mirrored(posts []loggedPost) map[string]string {
	out := make(map[string]string)
	for _, p := range posts {
		var msg struct {
			Method string `json:"method"`
			Params struct {
				Name string `json:"name"`
				URI  string `json:"uri"`
			} `json:"params"`
		}
		if json.Unmarshal(p.body, &msg) != nil {
			continue
		}
		key := msg.Method + " " + msg.Params.Name + msg.Params.URI
		switch msg.Method {
		case "tools/call", "prompts/get", "resources/read":
		default:
			continue
		}
		var headers []string
		for name, values := range p.header {
			if name == "Mcp-Name" || strings.HasPrefix(name, "Mcp-Param-") {
				for _, v := range values {
					headers = append(headers, name+": "+v)
				}
			}
		}
		sort.Strings(headers)
		if len(headers) == 0 {
			headers = []string{"-"}
		}
		out[key] = strings.Join(headers, ", ")
	}
	return out
}

// goClientMirrors2026 is the Mcp-Name and Mcp-Param-* headers the Go SDK
// client (v1.8.0) sends at 2026-07-28. It mirrors names and URIs into
// Mcp-Name as they are, raw UTF-8 included: `résumé` goes as the bytes
// 72 c3 a9 73 75 6d c3 a9, not as =?base64?csOpc3Vtw6k=?=, and `café menu`
// and `naïve notes.txt` likewise. Only Mcp-Param-* values that are not plain
// ASCII are encoded. Its server compares Mcp-Name with the body without
// decoding, so the two agree with each other; a gateway in between must let
// that through as the server would. At 2025-11-25 and 2025-06-18 it sends
// no Mcp-Method, Mcp-Name or Mcp-Param-* at all.
var goClientMirrors2026 = map[string]string{
	"tools/call echo":                                  "Mcp-Name: echo",
	"tools/call my tool":                               "Mcp-Name: my tool, Mcp-Param-Region: us-west1",
	"tools/call résumé":                                "Mcp-Name: résumé, Mcp-Param-N: 3, Mcp-Param-Text: =?base64?bmHDr3ZlIGNhZsOp?=",
	"prompts/get greeting":                             "Mcp-Name: greeting",
	"prompts/get résumé":                               "Mcp-Name: résumé",
	"prompts/get café menu":                            "Mcp-Name: café menu",
	"resources/read file:///docs/readme.txt":           "Mcp-Name: file:///docs/readme.txt",
	"resources/read file:///docs/r%C3%A9sum%C3%A9.txt": "Mcp-Name: file:///docs/r%C3%A9sum%C3%A9.txt",
	"resources/read file:///docs/naïve notes.txt":      "Mcp-Name: file:///docs/naïve notes.txt",
}

// erasGateway is the gateway in front of the server: a rate limit keyed by
// tool name and a concurrency guard over calls, prompts and resource reads,
// so that every request's body is read and compared with its headers, with
// limits no scenario comes near.
const erasGateway = `mcp {
	rate_limit eras_per_tool {
		key {http.mcp.tool}
		rate 1000/1s
	}
	concurrency {
		max 16
		methods tools/call prompts/get resources/read
	}
}`

// Every client of both eras gets from the server, through the gateway,
// exactly what it gets directly, for names and URIs that need encoding in
// headers, and the MCP headers each client sends reach the server byte for
// byte.
func TestClientsOfBothErasWorkThroughTheGatewayAsDirectly(t *testing.T) {
	received := &postLog{}
	direct := mcptest.ServeMCP(t, recording(received, erasServer()))
	g := mcptest.StartGateway(t, erasGateway+"\n"+mcptest.ProxyTo(direct))
	routes := []struct{ name, endpoint string }{
		{"direct", direct},
		{"gateway", g.URL + mcptest.MCPPath},
	}

	clients := []struct {
		name string
		// version is the protocol version the client ends up with.
		version string
		// goVersion is the version the Go client asks for; "" is its
		// default. Unused for the TypeScript client.
		goVersion string
		ts        bool
		// mirrors is the Mcp-Name and Mcp-Param-* headers the client
		// sends with each named request, nil when it sends none.
		mirrors map[string]string
	}{
		{name: "go default", version: "2026-07-28", mirrors: goClientMirrors2026},
		{name: "go 2025-11-25", version: "2025-11-25", goVersion: "2025-11-25"},
		{name: "go 2025-06-18", version: "2025-06-18", goVersion: "2025-06-18"},
		// The TypeScript SDK client 1.32.2 speaks 2025-11-25 at most.
		{name: "typescript", version: "2025-11-25", ts: true},
	}
	for _, c := range clients {
		t.Run(c.name, func(t *testing.T) {
			want := erasExpected(c.version)
			seen := make(map[string][]string)
			for _, route := range routes {
				t.Run(route.name, func(t *testing.T) {
					received.take()
					sent := &postLog{}
					var got []string
					if c.ts {
						got = runTSScenario(t, route.endpoint)
					} else {
						tr := http.DefaultTransport.(*http.Transport).Clone()
						t.Cleanup(tr.CloseIdleConnections)
						client := &http.Client{Transport: &sendingRecorder{log: sent, next: tr}}
						got = runGoScenario(t, route.endpoint, c.goVersion, client)
					}
					assert.Equal(t, want, got, "what the client got")

					upstream := received.take()
					seen[route.name] = mcpHeaderLines(upstream)
					if c.ts {
						// The client cannot be watched from here: it
						// sends nothing mirrored, so nothing mirrored may
						// arrive.
						for name, want := range mirrored(upstream) {
							assert.Equal(t, "-", want, "%s", name)
						}
						return
					}
					clientSent := sent.take()
					assert.Equal(t, mcpHeaderLines(clientSent), seen[route.name],
						"the server receives every POST with the Mcp-* headers the client sent, byte for byte")
					wantMirrors := c.mirrors
					if wantMirrors == nil {
						wantMirrors = make(map[string]string)
						for name := range goClientMirrors2026 {
							wantMirrors[name] = "-"
						}
					}
					assert.Equal(t, wantMirrors, mirrored(clientSent), "what the client mirrors into headers")
				})
			}
			assert.Equal(t, seen["direct"], seen["gateway"],
				"the server receives the same requests with the same Mcp-* headers through the gateway as directly")
		})
	}
}

// b64 is value in the base64 form of MCP header values.
func b64(value string) string {
	return "=?base64?" + base64.StdEncoding.EncodeToString([]byte(value)) + "?="
}

// plainHeaderSafe reports whether value may be sent in a header as it is:
// visible ASCII and inner spaces, not looking like the base64 form.
func plainHeaderSafe(value string) bool {
	if value == "" || value[0] == ' ' || value[len(value)-1] == ' ' {
		return false
	}
	for i := 0; i < len(value); i++ {
		if value[i] < 0x20 || value[i] > 0x7e {
			return false
		}
	}
	return !(strings.HasPrefix(value, "=?base64?") && strings.HasSuffix(value, "?="))
}

// A 2026-07-28 request whose Mcp-Method or Mcp-Name header disagrees with
// its body (the name after decoding =?base64?...?=, the URI of a resource
// read, the task id of a task request) is refused with HTTP 400 and the
// HeaderMismatch error -32020 for its own id, and never reaches the server:
// a router that trusts the header would send it elsewhere than the body
// says. One that agrees, plain or encoded, reaches the server untouched.
func TestMirrorHeadersAreComparedWithTheBodyAsTheSpecificationSays(t *testing.T) {
	rec, upstream := startRecorder(t)
	g := mcptest.StartGateway(t, erasGateway+"\nreverse_proxy "+strings.TrimPrefix(upstream, "http://"))
	endpoint := g.URL + mcptest.MCPPath

	const taskID = "786512e2-9e0d-44bd-8f29-789f320fe840"
	targets := []struct {
		method, member, value string
		// otherMethod is a method the body does not have.
		otherMethod string
	}{
		{"tools/call", "name", "my tool", "tools/list"},
		{"tools/call", "name", "résumé", "prompts/get"},
		// A name that looks encoded is sent encoded, as the specification
		// requires; sent as it is, it is undecodable.
		{"tools/call", "name", "=?base64?x?=", "tools/list"},
		{"prompts/get", "name", "greeting", "tools/call"},
		{"prompts/get", "name", "café menu", "prompts/list"},
		{"resources/read", "uri", "file:///docs/r%C3%A9sum%C3%A9.txt", "resources/list"},
		{"resources/read", "uri", "file:///docs/naïve notes.txt", "tools/call"},
		{"tasks/get", "taskId", taskID, "tasks/cancel"},
		{"tasks/cancel", "taskId", taskID, "tasks/get"},
		{"tasks/update", "taskId", taskID, "tasks/get"},
	}

	type row struct {
		name   string
		id     string
		body   string
		header []string
		// reach: the request agrees with its headers and must reach the
		// server; otherwise it must be refused with -32020.
		reach bool
		// twice: a header given twice, refused before the body is read.
		twice bool
	}
	var rows []row
	for i, tg := range targets {
		params := map[string]any{tg.member: tg.value,
			"_meta": map[string]any{"io.modelcontextprotocol/protocolVersion": "2026-07-28"}}
		switch tg.method {
		case "tools/call":
			params["arguments"] = map[string]any{}
		case "tasks/update":
			params["inputResponses"] = map[string]any{}
		}
		p, err := json.Marshal(params)
		require.NoError(t, err)
		// Half the ids are strings and half numbers: the refusal must
		// carry each as sent.
		id := strconv.Itoa(100 + i)
		if i%2 == 1 {
			id = strconv.Quote("req-" + strconv.Itoa(i))
		}
		body := `{"jsonrpc":"2.0","id":` + id + `,"method":"` + tg.method + `","params":` + string(p) + `}`
		name := tg.method + " " + tg.value + ": "
		add := func(what string, reach bool, method, mcpName string) {
			rows = append(rows, row{name: name + what, id: id, body: body, reach: reach,
				header: []string{"Mcp-Method", method, "Mcp-Name", mcpName}})
		}
		add("encoded", true, tg.method, b64(tg.value))
		if plainHeaderSafe(tg.value) {
			add("plain", true, tg.method, tg.value)
		} else if !strings.ContainsFunc(tg.value, func(r rune) bool { return r > 0x7e }) {
			// ASCII that must be encoded (it looks encoded): sent as it
			// is, it is decoded, and is no valid base64.
			add("sent as it is", false, tg.method, tg.value)
		}
		add("another name, plain", false, tg.method, "other")
		add("another name, encoded", false, tg.method, b64(tg.value+"2"))
		add("bad base64", false, tg.method, "=?base64?not base64!?=")
		add("another method", false, tg.otherMethod, b64(tg.value))
	}
	call := rows[0]
	for _, h := range [][]string{
		{"Mcp-Name", "my tool", "Mcp-Name", "my tool"},
		{"Mcp-Name", "my tool", "Mcp-Name", "other"},
		{"Mcp-Method", "tools/call", "Mcp-Method", "tools/call"},
		{"Mcp-Method", "tools/call", "Mcp-Method", "tools/list"},
	} {
		r := call
		r.name = fmt.Sprintf("%s given twice: %q, %q", h[0], h[1], h[3])
		r.twice, r.reach = true, false
		r.header = h
		if h[0] == "Mcp-Name" {
			r.header = append(r.header, "Mcp-Method", "tools/call")
		} else {
			r.header = append(r.header, "Mcp-Name", "my tool")
		}
		rows = append(rows, r)
	}

	for _, r := range rows {
		t.Run(r.name, func(t *testing.T) {
			before := rec.count()
			header := append([]string{"Mcp-Protocol-Version", "2026-07-28"}, r.header...)
			resp, body := post(t, endpoint, r.body, withHeader(header...))
			if r.reach {
				assert.Equal(t, http.StatusOK, resp.StatusCode, "%s", body)
				require.Equal(t, before+1, rec.count(), "the server is reached")
				got := rec.last(t)
				assert.Equal(t, r.body, string(got.body), "the body arrives untouched")
				for i := 0; i < len(r.header); i += 2 {
					assert.Equal(t, []string{r.header[i+1]}, got.header.Values(r.header[i]), "%s arrives byte for byte", r.header[i])
				}
				return
			}
			assert.Equal(t, http.StatusBadRequest, resp.StatusCode, "%s", body)
			assert.Equal(t, before, rec.count(), "the server is not reached")
			if r.twice {
				return
			}
			reply := decodeReply(t, body)
			require.NotNil(t, reply.Error, "a JSON-RPC error: %s", body)
			assert.Equal(t, -32020, reply.Error.Code, "HeaderMismatch: %s", body)
			if assert.NotEmpty(t, reply.ID, "an id: %s", body) {
				assert.JSONEq(t, r.id, string(reply.ID), "the request's own id: %s", body)
			}
		})
	}
}

// A refusal reaches each era's Go client in the form its era defines: a
// refused tools/call is a result the model reads in both; another refused
// request is a JSON-RPC error whose code is -32000 for a 2025 client and
// the application code 429 for a 2026-07-28 one, which the SDK hands to the
// caller with the envelope in its data.
func TestRefusalsReachEachErasClientWithItsCode(t *testing.T) {
	direct := mcptest.ServeMCP(t, erasServer())
	for _, tt := range []struct {
		version string
		code    int64
	}{
		{"", 429},
		{"2025-11-25", -32000},
	} {
		t.Run("version "+cmp.Or(tt.version, "default"), func(t *testing.T) {
			// A site of its own per client, so that each starts with
			// full buckets.
			g := mcptest.StartGateway(t, "mcp {\n\trate_limit once {\n\t\trate 1/1h\n\t\tmethods tools/call tools/list\n\t}\n}\n"+mcptest.ProxyTo(direct))
			ctx := t.Context()
			c := mcp.NewClient(&mcp.Implementation{Name: "eras-client", Version: "1"}, nil)
			cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: g.URL + mcptest.MCPPath},
				&mcp.ClientSessionOptions{ProtocolVersion: tt.version})
			require.NoError(t, err)
			defer cs.Close()

			_, err = cs.ListTools(ctx, nil)
			require.NoError(t, err, "the first request passes")
			_, err = cs.ListTools(ctx, nil)
			var rpcErr *jsonrpc.Error
			require.ErrorAs(t, err, &rpcErr, "the second is refused with a JSON-RPC error")
			assert.Equal(t, tt.code, rpcErr.Code)
			assert.Contains(t, string(rpcErr.Data), `"code":"RATE_LIMITED"`)

			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "x"}})
			require.NoError(t, err, "a refused call is a result, in every era")
			assert.True(t, res.IsError)
			assert.Contains(t, mcptest.TextOf(t, res), `<tool_error code="RATE_LIMITED"`)
		})
	}
}
