// Command bigserver is an MCP server on the official Go SDK whose tool big
// answers {n} bytes of text, after a progress notification when the call
// asks for one, and whose tool work never answers: it sends the same
// notification, prints "called" on its standard output, and waits. It is
// stateless, answers JSON or, with -sse, event streams (no event ids:
// they cannot be resumed), listens on a free loopback port, prints its
// endpoint's URL once it listens, and exits when its standard input
// closes (so that it ends with the test process that started it, however
// that ends).
//
// Tests run it as a process of its own: what it allocates to write a huge
// answer is then not counted in the heap of the test process, where the
// gateway runs (mcptest.StartBigServer), and it can be killed in the
// middle of a call of work (mcptest.StartDyingServer).
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

func main() {
	sse := flag.Bool("sse", false, "answer with event streams rather than JSON")
	flag.Parse()

	s := mcp.NewServer(&mcp.Implementation{Name: "big", Version: "0"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "big"}, big)
	mcp.AddTool(s, &mcp.Tool{Name: "work"}, work)
	mux := http.NewServeMux()
	mux.Handle("/mcp", mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s },
		&mcp.StreamableHTTPOptions{Stateless: true, JSONResponse: !*sse}))

	ln, err := net.Listen("tcp", "127.0.0.1:0")
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
