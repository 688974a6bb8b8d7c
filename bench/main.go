package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/caddymcp/caddy-mcp/internal/caddyrun"
)

// options are the command line.
type options struct {
	duration, warmup, firstWarmup, sseDuration time.Duration
	rounds, clients, sseClients                int
	configs, sizes, format, caddyBin, profile  string
	redisBin                                   string
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
	flag.StringVar(&o.redisBin, "redis-server", "redis-server", "the redis-server (Redis 7) the *-redis configurations keep their buckets in, started by the benchmark")
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
	caddies   map[string]*caddyrun.Process
	// sessionHeaders are, per Sessions configuration, the header lines
	// naming the session its load generator opened (openSession).
	sessionHeaders map[string]string
	// redis is the redis-server of the configurations that need one.
	redis *redisServer
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
	var redisNote string
	if sel.needsRedis() {
		if sel, redisNote, err = findRedis(&o, sel); err != nil {
			return err
		}
	}
	b := &bench{o: o, sel: sel, sizes: sizes, caddies: map[string]*caddyrun.Process{}, sessionHeaders: map[string]string{}}
	defer b.stopOnInterrupt()()

	tmp, err := os.MkdirTemp("", "caddy-mcp-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	defer b.shutdown()

	env := environment{Cores: runtime.NumCPU(), GOMAXPROCS: runtime.GOMAXPROCS(0), CPU: caddyrun.CPUModel(), OS: runtime.GOOS + "/" + runtime.GOARCH, Go: runtime.Version(), LoadBefore: caddyrun.LoadAverage()}
	if err := b.start(tmp); err != nil {
		return err
	}
	env.Caddy = caddyrun.Version(b.o.caddyBin)
	env.RedisNote = redisNote
	if b.redis != nil {
		env.Redis = b.redis.Version
	}

	rep, err := b.measure(env, guardMax)
	if err != nil {
		return err
	}
	rep.Elapsed = time.Since(began).Round(time.Second).String()
	if o.format == "json" {
		return rep.writeJSON(out)
	}
	rep.writeMarkdown(out)
	return nil
}

// findRedis looks for redis-server, for a selection that needs it. Where it
// is missing, the configurations that need it are left out with a note,
// unless -configs named them.
func findRedis(o *options, sel selection) (selection, string, error) {
	bin, err := exec.LookPath(o.redisBin)
	if err == nil {
		o.redisBin = bin
		return sel, "", nil
	}
	rest, dropped := sel.withoutRedis()
	if sel.Named {
		return sel, "", fmt.Errorf("-configs %s: these keep their buckets in Redis, and redis-server (Redis 7) is not installed (%v): install it with `%s`, or leave them out",
			strings.Join(dropped, ","), err, redisInstall)
	}
	note := fmt.Sprintf("%s not measured: redis-server (Redis 7) is not installed (%v); `%s` to measure them", strings.Join(dropped, " and "), err, redisInstall)
	log.Print(note)
	return rest, note, nil
}

// stopOnInterrupt ends the measurements at once on an interrupt or a
// SIGTERM, so that the processes started are stopped on the way out. The
// function it returns stops listening.
func (b *bench) stopOnInterrupt() (stop func()) {
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, os.Interrupt, syscall.SIGTERM)
	go func() {
		if _, ok := <-signals; ok {
			log.Print("interrupted: stopping")
			b.stop.Store(true)
		}
	}()
	return func() { signal.Stop(signals) }
}

// measure runs the rounds, then the profiles if asked, and summarises them.
func (b *bench) measure(env environment, guardMax int) (*report, error) {
	o := b.o
	all, fe, err := b.rounds()
	if err != nil {
		return nil, err
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
	rep.Goals = goals(rep.Rows, rep.SSE, b.sizes)
	if o.profile != "" {
		if rep.Profiles, err = b.profiles(); err != nil {
			return nil, err
		}
	}
	rep.Env.LoadAfter = caddyrun.LoadAverage()
	return rep, nil
}

// start builds Caddy if needed, and starts the upstreams and every Caddy
// the selection needs.
func (b *bench) start(tmp string) error {
	if b.o.caddyBin == "" {
		log.Print("building cmd/caddy")
		bin, err := caddyrun.Build(tmp)
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
	redisAddr := ""
	if b.sel.needsRedis() {
		if b.redis, err = startRedis(b.o.redisBin, filepath.Join(tmp, "redis")); err != nil {
			return err
		}
		redisAddr = b.redis.Addr
		log.Printf("started redis-server %s on %s", b.redis.Version, redisAddr)
	}
	for _, c := range b.sel.Running {
		if c.Direct {
			continue
		}
		p, err := caddyrun.Start(b.o.caddyBin, filepath.Join(tmp, c.Name), c.Name, func(port, adminPort int, storage string) string {
			return caddyfile(c, port, adminPort, storage, b.upstreamOf(c), redisAddr)
		})
		if err != nil {
			return err
		}
		b.caddies[c.Name] = p
	}
	for _, c := range b.sel.Running {
		if c.ListsTools {
			if err := listTools(b.caddies[c.Name].Addr); err != nil {
				return fmt.Errorf("%s: %w", c.Name, err)
			}
		}
		if c.Policy {
			if err := checkPolicy(b.caddies[c.Name].Addr); err != nil {
				return fmt.Errorf("%s: %w", c.Name, err)
			}
		}
	}
	for _, c := range b.sel.Running {
		if !c.Sessions {
			continue
		}
		token, err := openSession(b.caddies[c.Name].Addr, c.Sealed)
		if err != nil {
			return fmt.Errorf("%s: %w", c.Name, err)
		}
		b.sessionHeaders[c.Name] = sessionLines(token)
		if c.Sealed {
			log.Printf("%s: opened a session; every request names it by the gateway's token (%d bytes, in place of the responder's id of %d)", c.Name, len(token), len(responderSessionID))
		} else {
			log.Printf("%s: opened a session; every request names it by the responder's own id (%d bytes)", c.Name, len(token))
		}
	}
	log.Printf("started %d Caddy processes; upstreams on %s (responder) and %s (Go SDK)", len(b.caddies), b.upstreams.Responder, b.upstreams.SDK)
	return nil
}

// shutdown stops every process the benchmark started.
func (b *bench) shutdown() {
	for _, p := range b.caddies {
		p.Stop()
	}
	if b.redis != nil {
		b.redis.Stop()
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
	t := &target{path: "/mcp", body: body(size), keys: c.Keys, headers: b.sessionHeaders[c.Name], expect: upstreamText}
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
	var all []*series
	for _, size := range b.sizes {
		for _, c := range b.sel.Throughput {
			all = append(all, &series{Config: c, Size: size})
		}
	}
	if err := b.warmUp(all); err != nil {
		return nil, nil, err
	}
	sse := map[string][]*sample{}
	for round := 1; round <= b.o.rounds; round++ {
		if err := b.round(round, all, sse); err != nil {
			return nil, nil, err
		}
	}
	var fe *firstEvents
	if b.sel.SSE {
		fe = summariseFirstEvents(sseConfigs, sse)
	}
	return all, fe, nil
}

// warmUp runs every measurement once, unrecorded, after filling the keyed
// limits' buckets.
func (b *bench) warmUp(all []*series) error {
	o := b.o
	log.Printf("warming up %d measurements for %s each", len(all), o.firstWarmup)
	touched := map[string]bool{}
	for _, s := range all {
		t := b.target(s.Config, s.Size)
		if t.keys > 1 && !o.quick && !touched[s.Config.Name] {
			log.Printf("%s: one call with each of %d keys, so that the limits hold every bucket", s.Config.Name, t.keys)
			if err := touchKeys(t, o.clients, &b.stop); err != nil {
				return fmt.Errorf("%s: %w", s.Config.Name, err)
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
	return nil
}

// round measures every configuration once, appending to its series, and
// the time to first event into sse.
func (b *bench) round(round int, all []*series, sse map[string][]*sample) error {
	o := b.o
	for _, s := range all {
		if b.stop.Load() {
			return errInterrupted
		}
		smp, err := b.measureOnce(s.Config, s.Size)
		if err != nil {
			return err
		}
		s.Samples = append(s.Samples, smp)
		log.Printf("round %d/%d %-17s %6s: %8.0f req/s  p50 %s ms  p99 %s ms%s%s", round, o.rounds, s.Config.Name, sizeLabel(s.Size),
			smp.RPS(), millis(ms(smp.P50())), millis(ms(smp.P99())), redisFigures(smp), errorNote(smp))
		if err := b.alive(s.Config); err != nil {
			return err
		}
	}
	if !b.sel.SSE {
		return nil
	}
	for _, n := range sseConfigs {
		if b.stop.Load() {
			return errInterrupted
		}
		smp := measure(b.sseTarget(b.config(n)), o.sseClients, o.warmup, o.sseDuration, &b.stop)
		sse[n] = append(sse[n], smp)
		log.Printf("round %d/%d %-17s first event: p50 %s ms  p99 %s ms%s", round, o.rounds, n, millis(ms(smp.P50())), millis(ms(smp.P99())), errorNote(smp))
	}
	return nil
}

// measureOnce is one measurement of a round, with the CPU time Caddy used.
// For a configuration that keeps its buckets in Redis, it also counts the
// commands Redis processed meanwhile, and its CPU time: nothing else asks
// that Redis anything while c is measured.
func (b *bench) measureOnce(c config, size int) (*sample, error) {
	if c.Redis {
		return b.measureRedis(c, size)
	}
	return b.measureCaddy(c, size), nil
}

// measureCaddy is measure, with the CPU time the configuration's Caddy used
// meanwhile (none for a direct configuration, which has no Caddy).
func (b *bench) measureCaddy(c config, size int) *sample {
	o := b.o
	p := b.caddies[c.Name]
	if p == nil {
		return measure(b.target(c, size), o.clients, o.warmup, o.duration, &b.stop)
	}
	before, ok := caddyrun.ProcessCPU(p.Pid())
	smp := measure(b.target(c, size), o.clients, o.warmup, o.duration, &b.stop)
	if after, ok2 := caddyrun.ProcessCPU(p.Pid()); ok && ok2 {
		smp.CPU = after - before
	}
	return smp
}

// measureRedis is a measurement of a configuration keeping its buckets in
// Redis, with what it asked of Redis.
func (b *bench) measureRedis(c config, size int) (*sample, error) {
	admin := b.caddies[c.Name].Admin
	decided, err := readStoreDecisions(admin)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", c.Name, err)
	}
	before, err := b.redis.counters()
	if err != nil {
		return nil, err
	}
	cpuBefore, cpuOK := b.redis.cpu()
	smp := b.measureCaddy(c, size)
	cpuAfter, ok := b.redis.cpu()
	after, err := b.redis.counters()
	if err != nil {
		return nil, err
	}
	nowDecided, err := readStoreDecisions(admin)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", c.Name, err)
	}
	smp.Redis = useBetween(before, after, smp.Answered)
	smp.Redis.Decisions, smp.Redis.Fallbacks = nowDecided.all-decided.all, nowDecided.fallbacks-decided.fallbacks
	smp.Redis.RoundTrips = nowDecided.roundTrips - decided.roundTrips
	if ok && cpuOK {
		smp.Redis.CPU = cpuAfter - cpuBefore
	}
	return smp, nil
}

func (b *bench) alive(c config) error {
	if p := b.caddies[c.Name]; p != nil {
		if err := p.Alive(); err != nil {
			return fmt.Errorf("%s: %w", c.Name, err)
		}
	}
	if c.Redis && b.redis != nil {
		if err := b.redis.Alive(); err != nil {
			return fmt.Errorf("%s: %w", c.Name, err)
		}
	}
	return nil
}

// redisFigures is the Redis round trips and commands per request of a
// measurement, if it counted them.
func redisFigures(s *sample) string {
	if s.Redis == nil {
		return ""
	}
	cmds, scripts, trips := s.Redis.perRequest()
	note := fmt.Sprintf("  Redis %.2f round trips (%.2f scripts, %.2f commands) per request", trips, scripts, cmds)
	if s.Redis.Fallbacks > 0 {
		note += fmt.Sprintf(", %d of %d decisions made without Redis (timeout or breaker open)", s.Redis.Fallbacks, s.Redis.Decisions)
	}
	return note
}

func errorNote(s *sample) string {
	if s.Errors == 0 {
		return ""
	}
	return fmt.Sprintf("  %d errors, first: %s", s.Errors, s.FirstError)
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
