package main

import (
	"bufio"
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/caddymcp/caddy-mcp/examples/demo/demoserver"
)

// ssePath is the path on which the responder answers with an event stream.
const ssePath = "/sse"

// responder is the benchmark's upstream: the least an MCP server can do. It
// reads the body, finds the JSON-RPC id and answers a tools/call result with
// that id, as application/json with a Content-Length, or on ssePath as
// text/event-stream: a progress notification at once, flushed, then the
// response. It keeps no state and allocates little, so that it is never what
// limits the throughput measured.
//
// Its sessions are those of the Go SDK's server in stateful mode, reduced
// to one: a POST without Mcp-Session-Id is answered with the header
// Mcp-Session-Id: responderSessionID, a POST with that id with the same
// header, and a POST with any other id with 404, session not found. So a
// gateway that did not give the upstream its own id back fails every
// request.
//
// The federated configurations put three behind one gateway: the
// responder, a second that lists a tool of its own (add), and a slow one
// that lists another (wait) and answers everything after slowDelay.
type responder struct {
	bufs sync.Pool
	// tool is the entry it lists for tools/list, in a list of its own:
	// "" for echo, with echoSchema.
	tool string
	// delay is how long it waits before it answers, having read the body.
	delay time.Duration
}

var (
	jsonType  = []string{"application/json"}
	eventType = []string{"text/event-stream"}
	noCache   = []string{"no-cache"}
)

// upstreamText is the text of every result the responder sends; a load
// generator recognises a proxied answer by it.
const upstreamText = "upstream-ok"

// responderSessionID is the id of the responder's one session, as long as
// the Go SDK's (26 characters).
const responderSessionID = "bench-responder-session-01"

var sessionHeader = []string{responderSessionID}

const progressEvent = "event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"progressToken\":1,\"progress\":1,\"total\":1}}\n\n"

func (s *responder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.WriteHeader(http.StatusMethodNotAllowed)
		return
	}
	bp, _ := s.bufs.Get().(*[]byte)
	if bp == nil {
		bp = new([]byte)
	}
	defer s.bufs.Put(bp)
	var paced *firstByteBody
	if _, ok := r.Header[pacedHeader]; ok {
		paced = &firstByteBody{ReadCloser: r.Body}
		r.Body = paced
	}
	body, err := readInto((*bp)[:0], r.Body)
	*bp = body
	if err != nil {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	h := w.Header()
	if sid, ok := r.Header["Mcp-Session-Id"]; ok && (len(sid) != 1 || sid[0] != responderSessionID) {
		w.WriteHeader(http.StatusNotFound)
		return
	}
	h["Mcp-Session-Id"] = sessionHeader
	if paced != nil {
		h.Set(firstByteHeader, strconv.FormatInt(paced.at.UnixNano(), 10))
	}
	if s.delay > 0 {
		time.Sleep(s.delay)
	}
	id := jsonrpcID(body)
	if bytes.Contains(body, toolsListMethod) {
		out := appendToolsList(make([]byte, 0, 512), id, s.tool)
		h["Content-Type"] = jsonType
		h["Content-Length"] = []string{strconv.Itoa(len(out))}
		_, _ = w.Write(out)
		return
	}
	if r.URL.Path == ssePath {
		h["Content-Type"] = eventType
		h["Cache-Control"] = noCache
		w.WriteHeader(http.StatusOK)
		_, _ = io.WriteString(w, progressEvent)
		_ = http.NewResponseController(w).Flush()
		out := appendResult([]byte("event: message\ndata: "), id)
		_, _ = w.Write(append(out, "\n\n"...))
		return
	}
	var lenBuf [8]byte
	out := appendResult(make([]byte, 0, 128), id)
	h["Content-Type"] = jsonType
	h["Content-Length"] = []string{string(strconv.AppendInt(lenBuf[:0], int64(len(out)), 10))}
	_, _ = w.Write(out)
}

var toolsListMethod = []byte(`"method":"tools/list"`)

// echoSchema is the inputSchema the responder lists for echo, the tool
// every measured call names: one required string, nothing else, as the
// demo server's echo has it.
const echoSchema = `{"type":"object","properties":{"text":{"type":"string","description":"the text to echo back"}},"required":["text"],"additionalProperties":false}`

// echoTool is the responder's entry for echo.
const echoTool = `{"name":"echo","description":"Echoes text.","inputSchema":` + echoSchema + `}`

// appendToolsList appends the responder's answer to tools/list: one tool,
// tool (echoTool when ""), in a complete list without ttlMs (an MCP server
// of the 2025 revisions).
func appendToolsList(b, id []byte, tool string) []byte {
	b = append(b, `{"jsonrpc":"2.0","id":`...)
	b = append(b, id...)
	b = append(b, `,"result":{"tools":[`...)
	b = append(b, cmp.Or(tool, echoTool)...)
	return append(b, `]}}`...)
}

// readInto reads r to its end, appending to buf.
func readInto(buf []byte, r io.Reader) ([]byte, error) {
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if errors.Is(err, io.EOF) {
			return buf, nil
		}
		if err != nil {
			return buf, err
		}
	}
}

func appendResult(b, id []byte) []byte {
	b = append(b, `{"jsonrpc":"2.0","id":`...)
	b = append(b, id...)
	return append(b, `,"result":{"content":[{"type":"text","text":"`+upstreamText+`"}]}}`...)
}

// jsonrpcID returns the JSON text of the first "id" member of body, or null.
// The benchmark's bodies give the id before params, so the first "id" is the
// message's; this is not a general JSON-RPC parser.
func jsonrpcID(body []byte) []byte {
	i := bytes.Index(body, []byte(`"id"`))
	if i < 0 {
		return []byte("null")
	}
	rest := bytes.TrimLeft(body[i+4:], " \t\r\n")
	if len(rest) == 0 || rest[0] != ':' {
		return []byte("null")
	}
	rest = bytes.TrimLeft(rest[1:], " \t\r\n")
	if len(rest) > 0 && rest[0] == '"' {
		for j := 1; j < len(rest); j++ {
			switch rest[j] {
			case '\\':
				j++
			case '"':
				return rest[:j+1]
			}
		}
		return []byte("null")
	}
	end := bytes.IndexAny(rest, ",} \t\r\n")
	if end <= 0 {
		return []byte("null")
	}
	return rest[:end]
}

// sdkHandler is the official Go SDK's Streamable HTTP server with the demo
// tools, stateless as the demo runs it: every POST carrying a request is
// answered as an event stream.
func sdkHandler() http.Handler {
	s := demoserver.New()
	return mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, &mcp.StreamableHTTPOptions{Stateless: true})
}

// upstreams are the servers the configurations proxy to.
type upstreams struct {
	// Responder, SDK, Second and Slow are host:port on loopback: Second
	// and Slow are the federated configurations' other two responders.
	Responder, SDK, Second, Slow string
	stop                         func()
}

// serveUpstreams serves the responder and the SDK server on free loopback
// ports in this process.
func serveUpstreams() (*upstreams, error) {
	var servers []*http.Server
	serve := func(h http.Handler) (string, error) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return "", err
		}
		srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
		servers = append(servers, srv)
		go func() {
			if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				log.Printf("upstream: %v", err)
			}
		}()
		return ln.Addr().String(), nil
	}
	stop := func() {
		for _, s := range servers {
			_ = s.Close()
		}
	}
	u := &upstreams{stop: stop}
	var err error
	if u.Responder, err = serve(&responder{}); err != nil {
		stop()
		return nil, err
	}
	if u.SDK, err = serve(sdkHandler()); err != nil {
		stop()
		return nil, err
	}
	if u.Second, err = serve(&responder{tool: secondTool}); err != nil {
		stop()
		return nil, err
	}
	if u.Slow, err = serve(&responder{tool: slowTool, delay: slowDelay}); err != nil {
		stop()
		return nil, err
	}
	return u, nil
}

// upstreamFlag runs this program as the upstream process (see
// startUpstreamProcess).
const upstreamFlag = "upstream"

// runUpstreamProcess is the upstream process: it serves the upstreams,
// prints "RESPONDER SDK SECOND SLOW" on stdout, and exits when its stdin
// closes, so that it never outlives the benchmark.
func runUpstreamProcess() error {
	u, err := serveUpstreams()
	if err != nil {
		return err
	}
	defer u.stop()
	fmt.Printf("%s %s %s %s\n", u.Responder, u.SDK, u.Second, u.Slow)
	_, err = io.Copy(io.Discard, os.Stdin)
	return err
}

// startUpstreamProcess runs the upstreams in a process of their own (this
// program with -upstream), so that the load generator's goroutines and the
// upstream's do not share one Go scheduler.
func startUpstreamProcess() (*upstreams, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(exe, "-"+upstreamFlag)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting the upstream process: %w", err)
	}
	stop := func() {
		_ = stdin.Close()
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(3 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		stop()
		return nil, fmt.Errorf("reading the upstream process's addresses: %w", err)
	}
	addrs := strings.Fields(line)
	if len(addrs) != 4 {
		stop()
		return nil, fmt.Errorf("upstream process said %q, want four addresses", line)
	}
	return &upstreams{Responder: addrs[0], SDK: addrs[1], Second: addrs[2], Slow: addrs[3], stop: stop}, nil
}
