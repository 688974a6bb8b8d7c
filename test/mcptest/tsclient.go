package mcptest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/caddymcp/caddy-mcp/test/wire"
)

// DefaultTSClientTimeout bounds a RunTSClient run when TSScript.Timeout is 0.
const DefaultTSClientTimeout = 2 * time.Minute

// TSScript is the JSON script given to test/tsclient/client.mjs.
type TSScript struct {
	// URL is the Streamable HTTP endpoint, e.g. "https://127.0.0.1:PORT/mcp".
	URL string `json:"url"`
	// Insecure accepts any TLS server certificate (NODE_TLS_REJECT_UNAUTHORIZED=0).
	Insecure bool `json:"insecure,omitempty"`
	// CAFile is a PEM CA bundle to trust in addition to the system roots
	// (applied via NODE_EXTRA_CA_CERTS).
	CAFile string `json:"caFile,omitempty"`
	// Headers are added to every HTTP request of the client.
	Headers map[string]string `json:"headers,omitempty"`
	// ClientName is sent as clientInfo.name (default "caddy-mcp-tsclient").
	ClientName string `json:"clientName,omitempty"`
	// OAuth signs the client in with the client credentials grant, through
	// the SDK's own ClientCredentialsProvider, when the server asks (401).
	OAuth *TSOAuth `json:"oauth,omitempty"`
	// RecordHTTP lists every HTTP exchange of the client in TSOutput.HTTP.
	RecordHTTP bool     `json:"recordHttp,omitempty"`
	Steps      []TSStep `json:"steps"`

	// Timeout bounds the whole node run (default DefaultTSClientTimeout).
	Timeout time.Duration `json:"-"`
}

// TSOAuth is a confidential client of the authorization server at
// ExpectedIssuer: the SDK presents its credentials to no other.
type TSOAuth struct {
	ClientID       string `json:"clientId"`
	ClientSecret   string `json:"clientSecret"`
	ExpectedIssuer string `json:"expectedIssuer"`
	// Scope is the scope to ask for ("" for none).
	Scope string `json:"scope,omitempty"`
}

// TSStep is one step of a TSScript. Op is one of "listTools", "callTool",
// "request", "notify", "ping", "pause", "parallel", "terminateSession",
// "readResource" and "readPages" (Params: {"uri"} or {"follow": "link" or
// "next"}, see client.mjs).
type TSStep struct {
	Op string `json:"op"`
	// Name and Arguments are for callTool.
	Name      string `json:"name,omitempty"`
	Arguments any    `json:"arguments,omitempty"`
	// Meta is sent as params._meta of callTool.
	Meta map[string]any `json:"meta,omitempty"`
	// Method and Params are for request and notify (Params also for listTools).
	Method string `json:"method,omitempty"`
	Params any    `json:"params,omitempty"`
	// Progress asks the SDK to send a progressToken and to record the
	// progress notifications received for this request.
	Progress bool `json:"progress,omitempty"`
	// TimeoutMS is the SDK request timeout (SDK default 60000).
	TimeoutMS int `json:"timeoutMs,omitempty"`
	// Steps are the concurrently run sub-steps of a "parallel" step.
	Steps []TSStep `json:"steps,omitempty"`
	// URL is what a "pause" step GETs, waiting for its answer (see Pause).
	URL string `json:"url,omitempty"`
	// ProgressURL is sent a GET for each progress notification the step
	// receives (see Signal).
	ProgressURL string `json:"progressUrl,omitempty"`
}

// ListToolsStep returns a listTools step.
func ListToolsStep() TSStep { return TSStep{Op: "listTools"} }

// CallToolStep returns a callTool step.
func CallToolStep(name string, args map[string]any) TSStep {
	return TSStep{Op: "callTool", Name: name, Arguments: args}
}

// RequestStep returns a step sending an arbitrary JSON-RPC request.
func RequestStep(method string, params any) TSStep {
	return TSStep{Op: "request", Method: method, Params: params}
}

// ParallelStep returns a step running steps concurrently in the same session.
func ParallelStep(steps ...TSStep) TSStep { return TSStep{Op: "parallel", Steps: steps} }

// TSOutput is what client.mjs prints.
type TSOutput struct {
	// Results has one entry per step, in order.
	Results []TSResult `json:"results"`
	Session TSSession  `json:"session"`
	// Notifications are server notifications not handled by the SDK itself
	// (progress notifications go to TSResult.Progress instead).
	Notifications []json.RawMessage `json:"notifications"`
	// TransportErrors are the errors the SDK reported via client.onerror.
	TransportErrors []TSError `json:"transportErrors"`
	// ConnectError is set when connecting (initialize) failed; the exit
	// status is then 3 and Results is empty.
	ConnectError *TSError `json:"connectError,omitempty"`
	// HTTP is every request the client sent, in order, with TSScript.RecordHTTP.
	HTTP []TSExchange `json:"http,omitempty"`
	// Auth is the token the client holds after the script, with
	// TSScript.OAuth (nil when it obtained none).
	Auth *TSAuth `json:"auth,omitempty"`

	// Stderr is node's standard error (warnings, diagnostics).
	Stderr string `json:"-"`
}

// TSSession describes the client's session after the script ran.
type TSSession struct {
	SessionID string `json:"sessionId"`
	// FirstSessionID is the session id the client held once connected,
	// before its first step.
	FirstSessionID     string              `json:"firstSessionId"`
	ProtocolVersion    string              `json:"protocolVersion"`
	ServerVersion      *mcp.Implementation `json:"serverVersion"`
	ServerCapabilities json.RawMessage     `json:"serverCapabilities"`
}

// TSExchange is one HTTP request of the client and its answer's status
// (0, with Error, when no answer came).
type TSExchange struct {
	Method string `json:"method"`
	URL    string `json:"url"`
	// Authorization is the scheme of the request's Authorization header
	// ("Bearer", "Basic"), or "" when it had none.
	Authorization string `json:"authorization,omitempty"`
	Status        int    `json:"status"`
	Error         string `json:"error,omitempty"`
}

// TSAuth describes the access token the client obtained, but not the
// token itself.
type TSAuth struct {
	TokenType string `json:"tokenType"`
	Scope     string `json:"scope"`
	ExpiresIn int    `json:"expiresIn"`
	// Issuer is the authorization server the SDK bound the token to.
	Issuer string `json:"issuer"`
}

// TSResult is the outcome of one step.
type TSResult struct {
	OK bool `json:"ok"`
	// Result is the value returned by the SDK (JSON null for notify and
	// terminateSession; {"results":[...]} for parallel).
	Result   json.RawMessage `json:"result,omitempty"`
	Error    *TSError        `json:"error,omitempty"`
	Progress []TSProgress    `json:"progress"`
}

// TSProgress is the params of one notifications/progress received for a
// request (the token is not included).
type TSProgress struct {
	Progress float64 `json:"progress"`
	Total    float64 `json:"total,omitempty"`
	Message  string  `json:"message,omitempty"`
}

// TSError is a serialized JS error thrown by the SDK.
//
// Name is the JS error name ("McpError" for JSON-RPC errors, "Error" for
// others); Type is the constructor name (e.g. "McpError",
// "StreamableHTTPError", "TypeError"). Code is the JSON-RPC error code for
// McpError, the HTTP status for StreamableHTTPError, or a string such as
// "ECONNREFUSED" on a Node system error; see IntCode / StringCode.
type TSError struct {
	Name    string          `json:"name"`
	Type    string          `json:"type"`
	Message string          `json:"message"`
	Code    json.RawMessage `json:"code,omitempty"`
	Data    json.RawMessage `json:"data,omitempty"`
	Cause   *TSError        `json:"cause,omitempty"`
}

func (e *TSError) Error() string {
	if e == nil {
		return "<nil>"
	}
	s := fmt.Sprintf("%s(%s): %s", e.Type, e.Name, e.Message)
	if len(e.Code) > 0 {
		s += " [code " + string(e.Code) + "]"
	}
	if e.Cause != nil {
		s += ": cause: " + e.Cause.Error()
	}
	return s
}

// IntCode returns Code as an int, or 0 if it is absent or not a number.
func (e *TSError) IntCode() int {
	if e == nil {
		return 0
	}
	var n float64
	if json.Unmarshal(e.Code, &n) != nil {
		return 0
	}
	return int(n)
}

// StringCode returns Code if it is a JSON string, "" otherwise.
func (e *TSError) StringCode() string {
	if e == nil {
		return ""
	}
	var s string
	if json.Unmarshal(e.Code, &s) != nil {
		return ""
	}
	return s
}

// Decode unmarshals the step result into v.
func (r TSResult) Decode(v any) error {
	if !r.OK {
		return fmt.Errorf("step failed: %w", r.Error)
	}
	return json.Unmarshal(r.Result, v)
}

// CallToolResult decodes the result of a successful callTool step; it fails
// the test if the step failed.
func (r TSResult) CallToolResult(t testing.TB) *mcp.CallToolResult {
	t.Helper()
	var res mcp.CallToolResult
	if err := r.Decode(&res); err != nil {
		t.Fatalf("mcptest: callTool result: %v", err)
	}
	return &res
}

// Text returns the concatenated text contents of a callTool result ("" if
// the step failed or has no text content).
func (r TSResult) Text() string {
	if !r.OK {
		return ""
	}
	text, _ := wire.ResultText(r.Result)
	return text
}

// TSClientDir returns the directory of the TypeScript client and fails the
// test if its dependencies are not installed.
func TSClientDir(t testing.TB) string {
	t.Helper()
	dir := filepath.Join(RepoRoot(t), "test", "tsclient")
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "@modelcontextprotocol", "sdk")); err != nil {
		t.Fatalf("mcptest: the TypeScript MCP client is not installed (%s/node_modules missing); run: npm ci --prefix test/tsclient", dir)
	}
	return dir
}

// RunTSClient runs the TypeScript SDK client with script and returns its
// output. Any harness error (node or node_modules missing, timeout, connect
// failure, non-zero exit, unparsable output) fails the test; failed steps do
// not (inspect TSResult.OK / TSResult.Error).
func RunTSClient(t testing.TB, script TSScript) TSOutput {
	t.Helper()
	out, err := TryRunTSClient(t, script)
	if err != nil {
		t.Fatalf("mcptest: %v\nstderr:\n%s", err, out.Stderr)
	}
	return out
}

// ErrTSConnect is wrapped by TryRunTSClient's error when the client could not
// connect (initialize failed); TSOutput.ConnectError then has the details.
var ErrTSConnect = errors.New("tsclient could not connect")

// TryRunTSClient is like RunTSClient but returns an error instead of failing
// the test when the client exits non-zero (e.g. errors.Is(err, ErrTSConnect)
// when connecting failed, with out.ConnectError set). Missing node or
// node_modules still fail the test.
func TryRunTSClient(t testing.TB, script TSScript) (TSOutput, error) {
	t.Helper()
	dir := TSClientDir(t)
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatalf("mcptest: node (Node.js >= 20) not found in PATH: %v", err)
	}
	in, err := json.Marshal(script)
	if err != nil {
		t.Fatalf("mcptest: encoding script: %v", err)
	}
	timeout := script.Timeout
	if timeout <= 0 {
		timeout = DefaultTSClientTimeout
	}
	ctx, cancel := context.WithTimeout(t.Context(), timeout)
	defer cancel()

	cmd := exec.CommandContext(ctx, node, filepath.Join(dir, "client.mjs"), "-")
	cmd.Dir = dir
	cmd.Stdin = bytes.NewReader(in)
	var stdout, stderr bytes.Buffer
	cmd.Stdout = &stdout
	cmd.Stderr = &stderr
	cmd.WaitDelay = 5 * time.Second
	runErr := cmd.Run()

	var out TSOutput
	out.Stderr = stderr.String()
	if out.Stderr != "" {
		t.Logf("tsclient stderr:\n%s", out.Stderr)
	}
	if ctx.Err() != nil {
		return out, fmt.Errorf("tsclient did not finish within %v: %w", timeout, ctx.Err())
	}
	decErr := json.Unmarshal(stdout.Bytes(), &out)
	var exitErr *exec.ExitError
	switch {
	case runErr == nil && decErr == nil:
		return out, nil
	case runErr == nil:
		return out, fmt.Errorf("decoding tsclient output %q: %w", stdout.String(), decErr)
	case errors.As(runErr, &exitErr) && exitErr.ExitCode() == 3 && decErr == nil:
		return out, fmt.Errorf("%w: %v", ErrTSConnect, out.ConnectError)
	default:
		return out, fmt.Errorf("running tsclient: %w (stdout %q)", runErr, stdout.String())
	}
}

// Pause lets a test act between two steps of a TypeScript client's script:
// the client's "pause" step (Step) waits until the test calls Resume.
type Pause struct {
	// Reached receives a value when the client reaches the step.
	Reached <-chan struct{}
	url     string
	resume  chan struct{}
}

// NewPause serves a pause on a free loopback port, until the test ends.
func NewPause(t testing.TB) *Pause {
	t.Helper()
	reached := make(chan struct{}, 1)
	p := &Pause{Reached: reached, resume: make(chan struct{})}
	p.url = ServeMCP(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reached <- struct{}{}
		select {
		case <-p.resume:
		case <-r.Context().Done():
		}
	}))
	return p
}

// Step is the script's step that waits for Resume.
func (p *Pause) Step() TSStep { return TSStep{Op: "pause", URL: p.url} }

// Resume lets the client go on.
func (p *Pause) Resume() { p.resume <- struct{}{} }

// Signal tells a test that a client reached a point (a TypeScript client's
// progress, with TSStep.ProgressURL): each GET of URL sends a value on
// Reached.
type Signal struct {
	URL     string
	Reached <-chan struct{}
}

// NewSignal serves a signal on a free loopback port, until the test ends.
func NewSignal(t testing.TB) *Signal {
	t.Helper()
	reached := make(chan struct{}, 16)
	url := ServeMCP(t, http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
		select {
		case reached <- struct{}{}:
		default:
		}
	}))
	return &Signal{URL: url, Reached: reached}
}
