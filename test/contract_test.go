package test

import (
	"context"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/caddymcp/caddy-mcp/contract"
	"github.com/caddymcp/caddy-mcp/internal/caddyrun"
	"github.com/caddymcp/caddy-mcp/test/mcptest"
	"github.com/caddymcp/caddy-mcp/test/wire"
)

// invoiceServer is a Go SDK server with one tool, get_invoice, whose
// schema is the approved one (v1) or a changed one (v2): limit's maximum
// narrowed from 100 to 50, a new required field region.
func invoiceServer(v2 bool) http.Handler {
	one, hundred := 1.0, 100.0
	schema := &jsonschema.Schema{Type: "object", Properties: map[string]*jsonschema.Schema{
		"id":    {Type: "string"},
		"limit": {Type: "integer", Minimum: &one, Maximum: &hundred},
	}, Required: []string{"id"}}
	if v2 {
		fifty := 50.0
		schema.Properties["limit"].Maximum = &fifty
		schema.Properties["region"] = &jsonschema.Schema{Type: "string"}
		schema.Required = append(schema.Required, "region")
	}
	s := mcp.NewServer(&mcp.Implementation{Name: "invoices", Version: "1"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "get_invoice", Description: "Gets an invoice.", InputSchema: schema},
		func(context.Context, *mcp.CallToolRequest, map[string]any) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "invoice"}}}, nil, nil
		})
	return mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, &mcp.StreamableHTTPOptions{Stateless: true})
}

// swappable serves whichever server is current: the upstream "restarted"
// with another schema.
type swappable struct{ h atomic.Pointer[http.Handler] }

func (s *swappable) ServeHTTP(w http.ResponseWriter, r *http.Request) { (*s.h.Load()).ServeHTTP(w, r) }

func (s *swappable) set(h http.Handler) { s.h.Store(&h) }

// The operator locks the server's tools with `caddy mcp-lock`; the server
// later changes a tool's schema. The gateway sees it in the next tools/list,
// and a call written against the approved contract gets, beside its
// <validation_error>, a <contract_awareness> saying what changed; with
// on_breaking refuse, calls to the broken tool are refused.
func TestContractDriftIsToldToTheModel(t *testing.T) {
	up := &swappable{}
	up.set(invoiceServer(false))
	upstream := mcptest.ServeMCP(t, up)

	bin, err := caddyrun.Build(t.TempDir())
	require.NoError(t, err)
	lockfile := filepath.Join(t.TempDir(), "tools.lock.json")
	out, err := exec.Command(bin, "mcp-lock", upstream, lockfile).CombinedOutput()
	require.NoError(t, err, "%s", out)
	assert.Contains(t, string(out), "1 tools of "+upstream)
	locked, err := contract.Load(lockfile)
	require.NoError(t, err)
	require.Len(t, locked.Tools, 1)
	assert.Equal(t, "get_invoice", locked.Tools[0].Name)
	assert.Contains(t, string(locked.Tools[0].InputSchema), `"maximum": 100`)

	site := func(onBreaking string) string {
		return "mcp {\n\tvalidate\n\tcontract " + lockfile + " {\n\t\ton_breaking " + onBreaking + "\n\t}\n}\n" + mcptest.ProxyTo(upstream)
	}
	g := mcptest.StartGateway(t, site("warn"))
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "contract", Version: "1"}, nil).
		Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: g.URL + "/mcp", HTTPClient: mcptest.ResendingClient()}, nil)
	require.NoError(t, err)
	defer cs.Close()
	call := func() *mcp.CallToolResult {
		res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "get_invoice", Arguments: map[string]any{"id": "7", "limit": 80}})
		require.NoError(t, err)
		return res
	}
	_, err = cs.ListTools(t.Context(), nil)
	require.NoError(t, err)
	res := call()
	assert.False(t, res.IsError, "the approved contract: the call runs")

	up.set(invoiceServer(true))
	_, err = cs.ListTools(t.Context(), nil)
	require.NoError(t, err)
	res = call()
	require.True(t, res.IsError)
	require.Len(t, res.Content, 2, "the validation error, then what changed")
	assert.Equal(t, `<validation_error action="get_invoice">
<field name="limit">Too large. You sent: 80. Expected at most 50.</field>
<field name="region">Missing required field. You sent: (missing). Expected a string.</field>
<recovery>Fix the fields above and call the tool again. Do not explain the error.</recovery>
</validation_error>`, res.Content[0].(*mcp.TextContent).Text)
	assert.Equal(t, `<contract_awareness action="get_invoice">
<change severity="BREAKING">Field 'limit': the maximum is now 50 (was 100).</change>
<change severity="BREAKING">Field 'region': a new required field.</change>
<recovery>The tool changed since the contract you may know: list the tools again and call it as it is now.</recovery>
</contract_awareness>`, res.Content[1].(*mcp.TextContent).Text)

	// An upstream failure for the changed tool carries what changed too.
	up.set(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "database unavailable", http.StatusInternalServerError)
	}))
	res, err = cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "get_invoice", Arguments: map[string]any{"id": "7", "limit": 20, "region": "eu"}})
	require.NoError(t, err)
	require.True(t, res.IsError)
	require.Len(t, res.Content, 2, "the failure, then what changed")
	assert.Contains(t, res.Content[0].(*mcp.TextContent).Text, `<tool_error code="INTERNAL_ERROR"`)
	assert.Contains(t, res.Content[1].(*mcp.TextContent).Text, `<change severity="BREAKING">Field 'region': a new required field.</change>`)
	up.set(invoiceServer(true))

	g.Reload(t, site("refuse"))
	res = call()
	require.True(t, res.IsError)
	text := res.Content[0].(*mcp.TextContent).Text
	assert.Contains(t, text, `<tool_error code="FORBIDDEN" severity="error">`)
	assert.Contains(t, text, "changed since its contract was approved")
	assert.Contains(t, text, "Field 'region': a new required field.")
	assert.True(t, strings.Contains(res.Content[1].(*mcp.TextContent).Text, "<contract_awareness"), "a reload keeps what changed")

	// A batch holding the call is refused whole, not passed unchecked.
	resp, body := post(t, g.URL+"/mcp", `[{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"get_invoice","arguments":{"id":"7","limit":80}}},{"jsonrpc":"2.0","id":2,"method":"tools/list"}]`, afterReload(t))
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	answers, err := wire.Answers(body)
	require.NoError(t, err, "%s", body)
	require.Len(t, answers, 2, "%s", body)
	for _, a := range answers {
		assert.Contains(t, string(a), `FORBIDDEN`)
		assert.Contains(t, string(a), `This batch calls the tool \"get_invoice\", which changed since its contract was approved`)
	}
}
