// Command hostile runs hostile-traffic scenarios against a real Caddy with
// the mcp handler, and the same traffic against a plain reverse_proxy to the
// same upstream, and prints what each costs the server, as Markdown.
//
//	go run ./bench/hostile                        # every scenario, 3–4 minutes
//	go run ./bench/hostile -quick                 # a smoke run: smaller, shorter
//	go run ./bench/hostile -only slowloris,long-id
//	go run ./bench/hostile -caddy /tmp/before/caddy-before
//
// Without -caddy it builds cmd/caddy from the module it runs in, as
// go run ./bench does. With -caddy it runs any Caddy binary that has the mcp
// plugin, so that two builds (before and after a fix) are measured by the
// same tool, and their reports can be read side by side. The Caddyfiles use
// only syntax every build since b2b9296 knows (rate_limit, concurrency,
// max_request_body), and defaults otherwise.
//
// # What it runs
//
// Each scenario starts Caddy processes of its own, one with `mcp` before
// reverse_proxy and, where the comparison means something, one with the same
// reverse_proxy alone, and stops them when it ends: one scenario's garbage
// or buckets never show in another's figures. Caddy listens on 127.0.0.1,
// with its admin endpoint on a free loopback port and its data and config
// folders (XDG_DATA_HOME, XDG_CONFIG_HOME) in a temporary folder. The
// upstream is a small Go server in this process, on loopback (upstream.go):
// each scenario picks one of its behaviours by the URL path.
//
//	slowloris      N connections POST a 4 MiB Content-Length, then 1 byte a
//	               second: Caddy's heap per connection, and whether the
//	               server cuts them
//	wide-batch     a batch of a million numbers (2 MiB), and one of 1.3
//	               million {} (3.7 MiB), 1 and 8 at once: peak heap
//	long-keys      rate limits keyed by a 1 MiB tool name, and by a 15 KB
//	               header, 100 distinct values: heap retained
//	quadratic-sse  a batch of 4,000 and 8,000 calls answered over SSE in
//	               reverse order: wall time
//	long-id        an id of 3,000,000 digits, answered with the id spelled
//	               1: wall and CPU time, and a spurious gateway event
//	gzip-sse       a gzip-compressed event stream: does it arrive intact
//	oversized-cl   a Content-Length over the limit and no body: how soon
//	               the answer comes, and whether the connection is closed
//	reload         keep-alive POSTs to an mcp site and a plain site of one
//	               Caddy while it is reloaded again and again: the share
//	               of requests that fail at the transport on each
//
// # How to read it
//
// The report starts with the machine, its load, and the Caddy binary (its
// path, version, commit if Go stamped one, and the start of its SHA-256);
// then one section per scenario, each a Markdown table with the same rows
// for every build, and notes. "mcp" is the gateway; "reverse_proxy" is the
// same Caddy and upstream without it, the cost of proxying at all; "direct"
// is the upstream alone.
//
// Heap figures come from Caddy's admin endpoint: /debug/vars publishes
// runtime.MemStats (HeapAlloc: bytes of live and not yet collected objects;
// HeapInuse: bytes in spans in use). "max" and "settled" are the largest and
// the last of a few samples 200 ms apart, "peak" the largest of samples taken
// every 20 ms while requests are in flight, and "live" HeapAlloc after a
// garbage collection forced through /debug/pprof/heap?gc=1: what Caddy holds
// on to. Deltas are against the same process's reading just before the
// traffic. CPU time is Caddy's user plus system time from /proc. The machine
// is small and may be shared: read wall times as orders of magnitude, and
// run twice before believing a difference of less than a factor of two.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/caddymcp/caddy-mcp/internal/caddyrun"
)

// scenario is one kind of hostile traffic.
type scenario struct {
	name string
	run  func(*run) (*section, error)
}

var scenarios = []scenario{
	{"slowloris", slowloris},
	{"wide-batch", wideBatch},
	{"long-keys", longKeys},
	{"quadratic-sse", quadraticSSE},
	{"long-id", longID},
	{"gzip-sse", gzipSSE},
	{"oversized-cl", oversizedCL},
	{"reload", reload},
}

// run is what every scenario shares: the Caddy binary, the upstream, and
// the processes started, so that all of them are stopped whatever happens.
type run struct {
	ctx   context.Context
	bin   string
	tmp   string
	up    *upstream
	quick bool

	mu    sync.Mutex
	procs []*caddyProcess
}

// caddy starts a Caddy in front of the upstream: with mcpBlock before its
// reverse_proxy, or a plain reverse_proxy when mcpBlock is "".
func (r *run) caddy(mcpBlock string) (*caddyProcess, error) {
	name := "mcp"
	if mcpBlock == "" {
		name = "reverse_proxy"
	}
	p, err := startCaddy(r.bin, r.tmp, name, mcpBlock, r.up.Addr)
	if err != nil {
		return nil, err
	}
	r.track(p)
	return p, nil
}

// track has p stopped with every other process of the run.
func (r *run) track(p *caddyProcess) {
	r.mu.Lock()
	r.procs = append(r.procs, p)
	r.mu.Unlock()
}

// stopAll stops every Caddy started so far.
func (r *run) stopAll() {
	r.mu.Lock()
	procs := r.procs
	r.procs = nil
	r.mu.Unlock()
	var wg sync.WaitGroup
	for _, p := range procs {
		wg.Go(p.Stop)
	}
	wg.Wait()
}

func main() {
	caddyBin := flag.String("caddy", "", "a Caddy binary with the mcp plugin to run instead of building ./cmd/caddy")
	only := flag.String("only", "", "scenarios to run, separated by commas (default all): "+names())
	quick := flag.Bool("quick", false, "a smoke run: fewer connections and requests, shorter waits")
	flag.Parse()
	log.SetFlags(0)
	log.SetPrefix("hostile: ")
	if err := mainErr(*caddyBin, *only, *quick); err != nil {
		log.Fatal(err)
	}
}

func names() string {
	var n []string
	for _, s := range scenarios {
		n = append(n, s.name)
	}
	return strings.Join(n, ", ")
}

func mainErr(bin, only string, quick bool) error {
	chosen, err := choose(only)
	if err != nil {
		return err
	}
	began := time.Now()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	tmp, err := os.MkdirTemp("", "caddy-mcp-hostile-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	if bin == "" {
		log.Print("building ./cmd/caddy")
		if bin, err = caddyrun.Build(tmp); err != nil {
			return err
		}
	}
	env := newEnvironment(bin, quick)
	up, err := startUpstream()
	if err != nil {
		return err
	}
	defer up.stop()
	r := &run{ctx: ctx, bin: bin, tmp: tmp, up: up, quick: quick}
	defer r.stopAll()

	var sections []*section
	for _, s := range chosen {
		log.Printf("%s: running", s.name)
		t := time.Now()
		sec, err := s.run(r)
		r.stopAll()
		if ctx.Err() != nil {
			return errors.New("interrupted")
		}
		if err != nil {
			// A scenario that fails still has a section: the other
			// scenarios' figures are worth printing.
			log.Printf("%s: %v", s.name, err)
			if sec == nil {
				sec = &section{Name: s.name}
			}
			sec.note("**the scenario failed:** %s", cut(err.Error(), 2000))
		}
		log.Printf("%s: done in %s", s.name, time.Since(t).Round(100*time.Millisecond))
		sections = append(sections, sec)
	}
	env.LoadAfter = caddyrun.LoadAverage()
	env.Elapsed = time.Since(began)
	writeReport(os.Stdout, env, sections)
	return nil
}

// choose is the scenarios -only names, in its order; all of them without it.
func choose(only string) ([]scenario, error) {
	if only == "" {
		return scenarios, nil
	}
	var chosen []scenario
	for _, n := range strings.Split(only, ",") {
		i := slices.IndexFunc(scenarios, func(s scenario) bool { return s.name == strings.TrimSpace(n) })
		if i < 0 {
			return nil, fmt.Errorf("-only: no scenario %q (have %s)", n, names())
		}
		chosen = append(chosen, scenarios[i])
	}
	return chosen, nil
}
