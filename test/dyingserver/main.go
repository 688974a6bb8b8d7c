// Command dyingserver is an MCP server on the official Go SDK whose tool
// work never answers: it sends a progress notification when the call asks
// for one (on an event stream), prints "called" on its standard output,
// and waits, so that a test can kill the server in the middle of the call.
// It is stateless, answers JSON or, with -sse, event streams (no event
// ids: its streams cannot be resumed), listens on a free loopback port,
// prints its endpoint's URL once it listens, and exits when its standard
// input closes.
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

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

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

	s := mcp.NewServer(&mcp.Implementation{Name: "dying", Version: "0"}, nil)
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
