// Command bench measures what the mcp handler costs: the same upstream
// reached directly, through Caddy with a plain reverse_proxy, and through
// Caddy with mcp in front of the same reverse_proxy, all side by side in one
// run, on loopback.
//
//	go run ./bench            # the full run: about 4 minutes
//	go run ./bench -quick     # a smoke run: about 30 seconds
//	make bench                # the same as the full run
//
// # What it measures
//
// Each configuration runs in a Caddy process of its own (the dev binary,
// cmd/caddy, built once at the start), and all of them run for the whole
// benchmark. A round measures every configuration in turn (A B C … A B C …
// over the rounds), so that drift on a shared machine (another process, a
// thermal limit) touches every configuration alike instead of whichever ran
// last. The default is five rounds of 1.5 s per measurement rather than
// fewer, longer ones: the noise of a shared machine comes in bursts of
// seconds, so more rounds give the medians more to work with and keep the
// two measurements of each comparison close in time. The configurations:
//
//	direct             the upstream itself: the floor the machine allows
//	reverse_proxy      Caddy with a plain reverse_proxy: the baseline
//	mcp                mcp {} before the reverse_proxy: inspection only
//	limits-1key        two rate limits that never trigger, all calls on 1 key
//	limits-100k        the same limits, calls spread over 100,000 keys
//	guard              a concurrency guard whose max is far above the clients
//	denied             a limit of 1 call an hour: every call is answered by the
//	                   gateway with a RATE_LIMITED envelope, never proxied
//	sdk-*              direct, reverse_proxy and mcp in front of the official
//	                   Go SDK server (the demo server, stateless, calling echo)
//
// each with a 1 KiB and a 64 KiB tools/call body, and then
//
//	sse                the time from a request to the end of the first
//	                   server-sent event of its answer, direct, through
//	                   reverse_proxy and through mcp
//
// The upstream is a minimal JSON-RPC responder written for the benchmark: it
// answers application/json with the request's id or, on /sse, an event at
// once, flushed, then the response as a second event. It runs in a process
// of its own (-upstream-process, the default): measured side by side on
// this 2-core machine, both placements gave Caddy configurations equally
// steady throughput (20 rounds, 3 runs: coefficient of variation 0.20 and
// 0.20), but the upstream measured directly had twice the p99 latency in
// the load generator's process (2.7–3.2 ms against 1.3–1.6 ms): its
// goroutines waited behind the clients' in one Go scheduler.
//
// The load generator costs a few microseconds of CPU per request: keep-alive
// HTTP/1.1 connections, each sending its next request as soon as it has the
// answer to the last, for a fixed time after a warm-up; latencies go into a
// histogram (1.6 % precision). A body is an echo call whose one argument is
// a string of prose with escapes, as a file's contents would be. Every
// answer is checked: status 200 and, in its first bytes, the upstream's
// text (or the RATE_LIMITED envelope for denied); anything else counts as
// an error.
//
// # How to read it
//
// The output starts with the machine (cores, load average) and the Go and
// Caddy versions, then a Markdown table: per configuration and body size,
// the throughput, its ratio to reverse_proxy, the p50 and p99 latencies, and
// the latency added over reverse_proxy, each the median over the rounds with
// the smallest and largest in brackets. Ratios and added latencies are taken
// round by round, each against the reverse_proxy measured a few seconds
// before or after it, and only then summarised: on a shared, noisy machine
// only such side-by-side comparisons mean anything, while absolute req/s
// depend on the machine and its neighbours. The latencies are those of a
// closed loop at full load, so they are mostly queueing: p50 is roughly
// clients / throughput.
//
// The targets at the end are all such same-run comparisons: mcp {} keeps
// ≥ 0.95 of reverse_proxy's throughput with 1 KiB bodies and ≥ 0.90 with
// 64 KiB; with limits or the guard on, ≥ 0.93 and ≥ 0.88; p50 and p99 rise
// by at most 10 %; a denied call, answered at the edge, goes at least twice
// as fast as a proxied one; and the first event of an SSE answer arrives
// within 1 ms of reverse_proxy's. A missed target is worth a CPU profile of
// the Caddy under that load: -profile DIR writes one per configuration and
// body size after the rounds (from Caddy's admin endpoint, /debug/pprof/),
// to read with `go tool pprof -top DIR/mcp-64KiB.pprof`. For profiles
// alone:
//
//	go run ./bench -configs reverse_proxy,mcp,denied -sizes 64k -rounds 1 -duration 5s -profile /tmp/prof
//
// Flags select configurations (-configs mcp,reverse_proxy,sse), body sizes
// (-sizes 1k), rounds, durations, clients and the output format
// (-format json for every round's figures).
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
)

// options are the command line.
type options struct {
	duration, warmup, firstWarmup, sseDuration time.Duration
	rounds, clients, sseClients                int
	configs, sizes, format, caddyBin, profile  string
	upstreamProcess, quick                     bool
}

func main() {
	var o options
	serveUpstream := flag.Bool(upstreamFlag, false, "serve the upstreams and print their addresses (the benchmark runs itself so)")
	flag.DurationVar(&o.duration, "duration", 1500*time.Millisecond, "measured time per configuration, body size and round")
	flag.DurationVar(&o.warmup, "warmup", 300*time.Millisecond, "warm-up before each measurement (connections opened, answers not counted)")
	flag.DurationVar(&o.firstWarmup, "first-warmup", 500*time.Millisecond, "warm-up of every configuration and body size before the first round")
	flag.IntVar(&o.rounds, "rounds", 5, "rounds; each measures every configuration once")
	flag.IntVar(&o.clients, "c", 8, "concurrent clients (keep-alive connections)")
	flag.IntVar(&o.sseClients, "sse-clients", 1, "concurrent clients for the time to first event")
	flag.DurationVar(&o.sseDuration, "sse-duration", time.Second, "measured time to first event per configuration and round")
	flag.StringVar(&o.configs, "configs", "all", "configurations, separated by commas: "+configNames(allConfigs(0))+", "+sseMeasurement+"; or all")
	flag.StringVar(&o.sizes, "sizes", "1k,64k", "tools/call body sizes, separated by commas (bytes, or with k for KiB)")
	flag.StringVar(&o.format, "format", "markdown", "output: markdown or json")
	flag.StringVar(&o.caddyBin, "caddy", "", "a Caddy binary with the mcp plugin to use instead of building cmd/caddy")
	flag.StringVar(&o.profile, "profile", "", "after the rounds, write a CPU profile of each Caddy configuration under load to this folder")
	flag.BoolVar(&o.upstreamProcess, "upstream-process", true, "run the upstreams in a process of their own rather than in the load generator's")
	flag.BoolVar(&o.quick, "quick", false, "a smoke run of about 30 s: 2 short rounds, no key pre-fill")
	flag.Parse()
	log.SetFlags(0)
	log.SetPrefix("bench: ")
	if *serveUpstream {
		if err := runUpstreamProcess(); err != nil {
			log.Fatal(err)
		}
		return
	}
	if o.quick {
		o.rounds, o.duration, o.warmup, o.firstWarmup, o.sseDuration = 2, 400*time.Millisecond, 150*time.Millisecond, 250*time.Millisecond, 250*time.Millisecond
	}
	if err := run(o, os.Stdout); err != nil {
		log.Fatal(err)
	}
}

// bench is one run's servers and state.
type bench struct {
	o         options
	sel       selection
	sizes     []int
	upstreams *upstreams
	caddies   map[string]*caddyProcess
	// stop is set by an interrupt; measurements end at once.
	stop atomic.Bool
}

func run(o options, out io.Writer) error {
	began := time.Now()
	if o.format != "markdown" && o.format != "json" {
		return fmt.Errorf("-format %q: want markdown or json", o.format)
	}
	if o.rounds < 1 || o.clients < 1 || o.sseClients < 1 {
		return errors.New("-rounds, -c and -sse-clients must be at least 1")
	}
	guardMax := max(1000, 100*o.clients)
	sel, err := selectConfigs(o.configs, allConfigs(guardMax))
	if err != nil {
		return err
	}
	sizes, err := parseSizes(o.sizes)
	if err != nil {
		return err
	}
	b := &bench{o: o, sel: sel, sizes: sizes, caddies: map[string]*caddyProcess{}}

	signals := make(chan os.Signal, 1)
	signal.Notify(signals, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(signals)
	go func() {
		if _, ok := <-signals; ok {
			log.Print("interrupted: stopping")
			b.stop.Store(true)
		}
	}()

	tmp, err := os.MkdirTemp("", "caddy-mcp-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	defer b.shutdown()

	env := environment{Cores: runtime.NumCPU(), GOMAXPROCS: runtime.GOMAXPROCS(0), CPU: cpuModel(), OS: runtime.GOOS + "/" + runtime.GOARCH, Go: runtime.Version(), LoadBefore: loadAverage()}
	if err := b.start(tmp); err != nil {
		return err
	}
	env.Caddy = caddyVersion(b.o.caddyBin)

	all, fe, err := b.rounds()
	if err != nil {
		return err
	}
	rep := &report{
		Env: env,
		Settings: settings{
			Rounds: o.rounds, Duration: o.duration.String(), Warmup: o.warmup.String(), Clients: o.clients,
			SSEClients: o.sseClients, SSEDuration: o.sseDuration.String(), UpstreamProcess: o.upstreamProcess, GuardMax: guardMax,
		},
		Rows: summarise(all),
		SSE:  fe,
	}
	rep.Goals = goals(rep.Rows, rep.SSE, sizes)
	if o.profile != "" {
		if rep.Profiles, err = b.profiles(); err != nil {
			return err
		}
	}
	rep.Env.LoadAfter = loadAverage()
	rep.Elapsed = time.Since(began).Round(time.Second).String()
	if o.format == "json" {
		return rep.writeJSON(out)
	}
	rep.writeMarkdown(out)
	return nil
}

// start builds Caddy if needed, and starts the upstreams and every Caddy
// the selection needs.
func (b *bench) start(tmp string) error {
	if b.o.caddyBin == "" {
		log.Print("building cmd/caddy")
		bin, err := buildCaddy(tmp)
		if err != nil {
			return err
		}
		b.o.caddyBin = bin
	}
	var err error
	if b.o.upstreamProcess {
		b.upstreams, err = startUpstreamProcess()
	} else {
		b.upstreams, err = serveUpstreams()
	}
	if err != nil {
		return err
	}
	for _, c := range b.sel.Running {
		if c.Direct {
			continue
		}
		p, err := startCaddy(b.o.caddyBin, tmp, c, b.upstreamOf(c))
		if err != nil {
			return err
		}
		b.caddies[c.Name] = p
	}
	log.Printf("started %d Caddy processes; upstreams on %s (responder) and %s (Go SDK)", len(b.caddies), b.upstreams.Responder, b.upstreams.SDK)
	return nil
}

// shutdown stops every process the benchmark started.
func (b *bench) shutdown() {
	for _, p := range b.caddies {
		p.stop()
	}
	if b.upstreams != nil {
		b.upstreams.stop()
	}
}

func (b *bench) upstreamOf(c config) string {
	if c.Upstream == upstreamSDK {
		return b.upstreams.SDK
	}
	return b.upstreams.Responder
}

// target is where c's requests go, with a body of size bytes.
func (b *bench) target(c config, size int) *target {
	t := &target{path: "/mcp", body: body(size), keys: c.Keys, expect: upstreamText}
	if c.Direct {
		t.addr = b.upstreamOf(c)
	} else {
		t.addr = b.caddies[c.Name].Addr
	}
	switch {
	case c.Denied:
		t.expect = "RATE_LIMITED"
	case c.Upstream == upstreamSDK:
		// The echo tool's answer starts with the text sent.
		t.expect = `"text":"The gateway reads`
	}
	return t
}

func (b *bench) sseTarget(c config) *target {
	t := b.target(c, 1<<10)
	t.path, t.firstEvent = ssePath, true
	return t
}

func (b *bench) config(name string) config {
	for _, c := range b.sel.Running {
		if c.Name == name {
			return c
		}
	}
	panic("bench: no running configuration " + name)
}

var errInterrupted = errors.New("interrupted")

// rounds warms every configuration up, then measures them round after round.
func (b *bench) rounds() ([]*series, *firstEvents, error) {
	o := b.o
	var all []*series
	for _, size := range b.sizes {
		for _, c := range b.sel.Throughput {
			all = append(all, &series{Config: c, Size: size})
		}
	}
	log.Printf("warming up %d measurements for %s each", len(all), o.firstWarmup)
	touched := map[string]bool{}
	for _, s := range all {
		t := b.target(s.Config, s.Size)
		if t.keys > 1 && !o.quick && !touched[s.Config.Name] {
			log.Printf("%s: one call with each of %d keys, so that the limits hold every bucket", s.Config.Name, t.keys)
			if err := touchKeys(t, o.clients, &b.stop); err != nil {
				return nil, nil, fmt.Errorf("%s: %w", s.Config.Name, err)
			}
			touched[s.Config.Name] = true
		}
		// The first answers of a configuration may differ (denied lets
		// one call through): the warm-up takes them.
		measure(t, o.clients, 0, o.firstWarmup, &b.stop)
	}
	if b.sel.SSE {
		for _, n := range sseConfigs {
			measure(b.sseTarget(b.config(n)), o.sseClients, 0, o.firstWarmup, &b.stop)
		}
	}
	sse := map[string][]*sample{}
	for round := 1; round <= o.rounds; round++ {
		for _, s := range all {
			if b.stop.Load() {
				return nil, nil, errInterrupted
			}
			smp := measure(b.target(s.Config, s.Size), o.clients, o.warmup, o.duration, &b.stop)
			s.Samples = append(s.Samples, smp)
			log.Printf("round %d/%d %-17s %6s: %8.0f req/s  p50 %s ms  p99 %s ms%s", round, o.rounds, s.Config.Name, sizeLabel(s.Size),
				smp.RPS(), millis(ms(smp.P50())), millis(ms(smp.P99())), errorNote(smp))
			if err := b.alive(s.Config); err != nil {
				return nil, nil, err
			}
		}
		if !b.sel.SSE {
			continue
		}
		for _, n := range sseConfigs {
			if b.stop.Load() {
				return nil, nil, errInterrupted
			}
			smp := measure(b.sseTarget(b.config(n)), o.sseClients, o.warmup, o.sseDuration, &b.stop)
			sse[n] = append(sse[n], smp)
			log.Printf("round %d/%d %-17s first event: p50 %s ms  p99 %s ms%s", round, o.rounds, n, millis(ms(smp.P50())), millis(ms(smp.P99())), errorNote(smp))
		}
	}
	var fe *firstEvents
	if b.sel.SSE {
		fe = summariseFirstEvents(sseConfigs, sse)
	}
	return all, fe, nil
}

func (b *bench) alive(c config) error {
	if p := b.caddies[c.Name]; p != nil {
		if err := p.alive(); err != nil {
			return fmt.Errorf("%s: %w", c.Name, err)
		}
	}
	return nil
}

func errorNote(s *sample) string {
	if s.Errors == 0 {
		return ""
	}
	return fmt.Sprintf("  %d errors, first: %s", s.Errors, s.FirstError)
}

// profiles writes a CPU profile of each measured Caddy configuration, taken
// from its admin endpoint while the load generator runs against it as in
// the rounds.
func (b *bench) profiles() ([]string, error) {
	if err := os.MkdirAll(b.o.profile, 0o755); err != nil {
		return nil, err
	}
	secs := max(1, int(b.o.duration.Round(time.Second)/time.Second))
	var files []string
	for _, size := range b.sizes {
		for _, c := range b.sel.Throughput {
			p := b.caddies[c.Name]
			if p == nil {
				continue
			}
			if b.stop.Load() {
				return files, errInterrupted
			}
			file := filepath.Join(b.o.profile, c.Name+"-"+strings.ReplaceAll(sizeLabel(size), " ", "")+".pprof")
			got := make(chan error, 1)
			go func() { got <- fetchProfile(p.Admin, secs, file) }()
			smp := measure(b.target(c, size), b.o.clients, b.o.warmup/2, time.Duration(secs)*time.Second+b.o.warmup, &b.stop)
			if err := <-got; err != nil {
				return files, fmt.Errorf("profiling %s: %w", c.Name, err)
			}
			log.Printf("profiled %-17s %6s: %8.0f req/s under the profiler: %s", c.Name, sizeLabel(size), smp.RPS(), file)
			files = append(files, file)
		}
	}
	return files, nil
}

func fetchProfile(admin string, secs int, file string) error {
	resp, err := http.Get("http://" + admin + "/debug/pprof/profile?seconds=" + strconv.Itoa(secs))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return fmt.Errorf("%s: %s", resp.Status, msg)
	}
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// parseSizes reads -sizes: "1k,64k" or byte counts.
func parseSizes(list string) ([]int, error) {
	var sizes []int
	for _, s := range strings.Split(list, ",") {
		s = strings.TrimSpace(strings.ToLower(s))
		mult := 1
		if n, ok := strings.CutSuffix(s, "k"); ok {
			s, mult = n, 1<<10
		}
		n, err := strconv.Atoi(s)
		if err != nil || n*mult < len(body(0)) {
			return nil, fmt.Errorf("-sizes: %q is not a size of at least %d bytes", s, len(body(0)))
		}
		sizes = append(sizes, n*mult)
	}
	return sizes, nil
}

// cpuModel is the processor's name, where Linux tells it.
func cpuModel() string {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return ""
	}
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// loadAverage is the 1, 5 and 15 minute load averages, where Linux tells
// them: a busy neighbour shows there.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}
