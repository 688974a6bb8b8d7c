package contract

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strings"
	"time"

	caddycmd "github.com/caddyserver/caddy/v2/cmd"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spf13/cobra"
)

func init() {
	caddycmd.RegisterCommand(caddycmd.Command{
		Name:  "mcp-lock",
		Usage: "<url> [<file>] [--header 'Name: value']...",
		Short: "Writes a lockfile of an MCP server's tools, the contract the mcp handler compares live lists with",
		Long: `
Connects to the MCP server at <url> (Streamable HTTP) with the official Go SDK
client, lists its tools (every page), and writes them as a lockfile to <file>,
or to standard output: the contract an operator approves and names in the mcp
handler's contract option. The gateway then compares every tools/list answer
with it, and tells a model what changed when a call to a changed tool fails.
Against a federated endpoint, each tool records the server it comes from: the
name map the federation's pins option keeps.

	caddy mcp-lock https://mcp.example.com/mcp tools.lock.json
	caddy mcp-lock --header 'Authorization: Bearer TOKEN' http://127.0.0.1:9000/mcp`,
		CobraFunc: func(cmd *cobra.Command) {
			cmd.Args = cobra.RangeArgs(1, 2)
			cmd.Flags().StringArrayP("header", "H", nil, "a header sent with every request, 'Name: value' (repeatable)")
			cmd.Flags().Duration("timeout", 30*time.Second, "how long listing may take")
			cmd.RunE = func(cmd *cobra.Command, args []string) error {
				headers, _ := cmd.Flags().GetStringArray("header")
				timeout, _ := cmd.Flags().GetDuration("timeout")
				ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
				defer cancel()
				return lockCommand(ctx, args, headers)
			}
		},
	})
}

func lockCommand(ctx context.Context, args, headers []string) error {
	hdr := http.Header{}
	for _, h := range headers {
		name, value, ok := strings.Cut(h, ":")
		if !ok {
			return fmt.Errorf("--header %q: want 'Name: value'", h)
		}
		hdr.Add(strings.TrimSpace(name), strings.TrimSpace(value))
	}
	l, err := Lock(ctx, args[0], &http.Client{Transport: headerTransport{hdr}})
	if err != nil {
		return err
	}
	b, err := l.Marshal()
	if err != nil {
		return err
	}
	if len(args) < 2 {
		_, err = os.Stdout.Write(b)
		return err
	}
	if err := os.WriteFile(args[1], b, 0o644); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "%s: %d tools of %s\n", args[1], len(l.Tools), args[0])
	return nil
}

type headerTransport struct{ h http.Header }

func (t headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if len(t.h) > 0 {
		r = r.Clone(r.Context())
		for k, v := range t.h {
			r.Header[k] = v
		}
	}
	return http.DefaultTransport.RoundTrip(r)
}

// Lock lists the tools of the MCP server at url, every page, and returns
// them as a lockfile. A federated endpoint's tools each name their server
// (ServerMeta), which the lockfile records: the advertised names a
// federation's pins keep.
func Lock(ctx context.Context, url string, client *http.Client) (*Lockfile, error) {
	c := mcp.NewClient(&mcp.Implementation{Name: "caddy-mcp-lock", Version: "1"}, nil)
	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: client}, nil)
	if err != nil {
		return nil, fmt.Errorf("connecting to %s: %w", url, err)
	}
	defer cs.Close()
	l := &Lockfile{Version: Version, Server: url, LockedAt: time.Now().UTC().Truncate(time.Second)}
	for tool, err := range cs.Tools(ctx, nil) {
		if err != nil {
			return nil, fmt.Errorf("listing the tools of %s: %w", url, err)
		}
		schema, err := json.Marshal(tool.InputSchema)
		if err != nil {
			return nil, fmt.Errorf("tool %q: %w", tool.Name, err)
		}
		server, _ := tool.Meta[ServerMeta].(string)
		l.Tools = append(l.Tools, Tool{Name: tool.Name, Server: server, Description: tool.Description, InputSchema: schema})
	}
	return l, nil
}
