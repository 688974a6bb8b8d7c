// Command bigserver is an MCP server on the official Go SDK whose tool big
// answers {n} bytes of text, after a progress notification when the call
// asks for one, and whose tool work never answers: it sends the same
// notification, prints "called" on its standard output, and waits; its
// tool echo {text} answers the text at once. It answers JSON or, with
// -sse, event streams. It is stateless, or, with -stateful, keeps the
// SDK's sessions (Mcp-Session-Id, GET and DELETE), which live in the
// process: started again, it answers 404 to the sessions of the process
// before. Its events carry no ids (a broken stream cannot be resumed)
// unless -events gives it the SDK's in-memory event store. It listens on
// -addr (a free loopback port by default), prints its endpoint's URL once
// it listens, and exits when its standard input closes (so that it ends
// with the test process that started it, however that ends).
//
// Tests run it as a process of its own: what it allocates to write a huge
// answer is then not counted in the heap of the test process, where the
// gateway runs (mcptest.StartBigServer), and it can be killed in the
// middle of a call of work and started again on its port
// (mcptest.StartKillable).
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

type bigArgs struct {
	N int `json:"n"`
}

func big(ctx context.Context, req *mcp.CallToolRequest, in bigArgs) (*mcp.CallToolResult, any, error) {
	if tok := req.Params.GetProgressToken(); tok != nil {
		if err := req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: tok, Progress: 1, Total: 2}); err != nil {
			return nil, nil, err
		}
	}
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: strings.Repeat("x", in.N)}}}, nil, nil
}

func work(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
	if tok := req.Params.GetProgressToken(); tok != nil {
		// A JSON answer carries no notification: the SDK refuses it then.
		_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: tok, Progress: 1, Total: 2})
	}
	fmt.Println("called")
	<-ctx.Done()
	return nil, nil, ctx.Err()
}

type echoArgs struct {
	Text string `json:"text"`
}

func echo(_ context.Context, _ *mcp.CallToolRequest, in echoArgs) (*mcp.CallToolResult, any, error) {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: in.Text}}}, nil, nil
}

func main() {
	sse := flag.Bool("sse", false, "answer with event streams rather than JSON")
	stateful := flag.Bool("stateful", false, "keep sessions (Mcp-Session-Id) rather than serve each request alone")
	events := flag.Bool("events", false, "give each event an id from an in-memory event store, so that a broken stream can be resumed (needs -sse and -stateful)")
	addr := flag.String("addr", "127.0.0.1:0", "the address to listen on (port 0: a free one)")
	flag.Parse()
	if *events && !(*sse && *stateful) {
		log.Fatal("-events needs -sse and -stateful: only a session's event streams can be resumed")
	}

	s := mcp.NewServer(&mcp.Implementation{Name: "big", Version: "0"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "big"}, big)
	mcp.AddTool(s, &mcp.Tool{Name: "work"}, work)
	mcp.AddTool(s, &mcp.Tool{Name: "echo"}, echo)
	opts := &mcp.StreamableHTTPOptions{Stateless: !*stateful, JSONResponse: !*sse}
	if *events {
		opts.EventStore = mcp.NewMemoryEventStore(nil)
	}
	mux := http.NewServeMux()
	mux.Handle("/mcp", mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, opts))

	// Go's listeners set SO_REUSEADDR: a restart binds the port of a
	// killed process while its connections are in TIME_WAIT.
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("http://%s/mcp\n", ln.Addr())
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		os.Exit(0)
	}()
	log.Fatal(http.Serve(ln, mux))
}
