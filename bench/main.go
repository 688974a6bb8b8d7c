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
	pacedDuration                              time.Duration
	rounds, clients, sseClients                int
	pacedRate                                  float64
	configs, sizes, format, caddyBin, profile  string
	pacedSizes                                 string
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
	flag.Float64Var(&o.pacedRate, "paced-rate", 100, "the paced client's sending rate, in Mbit/s")
	flag.StringVar(&o.pacedSizes, "paced-sizes", "64k,2m", "the paced client's tools/call body sizes, separated by commas (bytes, or with k for KiB, m for MiB)")
	flag.DurationVar(&o.pacedDuration, "paced-duration", 2*time.Second, "measured time of the paced client per configuration, body size and round")
	flag.StringVar(&o.configs, "configs", "all", "configurations, separated by commas: "+configNames(allConfigs(0))+", "+sseMeasurement+", "+pacedMeasurement+"; or all")
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
		o.pacedDuration = 500 * time.Millisecond
	}
	if err := run(o, os.Stdout); err != nil {
		log.Fatal(err)
	}
}

// bench is one run's servers and state.
type bench struct {
	o   options
	sel selection
	// build says what the Caddy binary holds, for the report.
	build string
	sizes []int
	// pacedSizes are the paced client's body sizes, and paced its
	// measurements, by configuration and size, one per round.
	pacedSizes []int
	paced      map[pacedKey][]*pacedSample
	upstreams  *upstreams
	caddies    map[string]*caddyrun.Process
	// sessionHeaders are, per Sessions configuration, the header lines
	// naming the session its load generator opened (openSession).
	sessionHeaders map[string]string
	// redis is the redis-server of the configurations that need one.
	redis *redisServer
	// issuer signs the token of the configurations that require one.
	issuer *issuer
	// traceSink receives the spans of the traced configurations.
	traceSink *traceSink
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
	if !(o.pacedRate > 0) {
		return errors.New("-paced-rate must be above 0")
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
	pacedSizes, err := parseSizes(o.pacedSizes)
	if err != nil {
		return fmt.Errorf("-paced-sizes: %w", err)
	}
	var redisNote string
	if sel.needsRedis() {
		if sel, redisNote, err = findRedis(&o, sel); err != nil {
			return err
		}
	}
	b := &bench{o: o, sel: sel, sizes: sizes, pacedSizes: pacedSizes, caddies: map[string]*caddyrun.Process{}, sessionHeaders: map[string]string{}}
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
	env.Caddy, env.Build = caddyrun.Version(b.o.caddyBin), b.build
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
	rep.Peer = versusPeer(all, b.sizes)
	rep.Federation = versusBaseline(all, b.sizes)
	if b.issuer != nil {
		rep.Credential = versusAuthorization(all, b.issuer.Exchanges())
	}
	rep.Paced = summarisePaced(b.paced, b.pacedSizes, o.pacedRate)
	rep.Goals = append(goals(rep.Rows, rep.SSE, b.sizes), peerGoals(rep.Peer)...)
	if o.profile != "" {
		if rep.Profiles, err = b.profiles(); err != nil {
			return nil, err
		}
	}
	rep.Env.LoadAfter = caddyrun.LoadAverage()
	return rep, nil
}

// parseSizes reads -sizes: "1k,64k" or byte counts.
func parseSizes(list string) ([]int, error) {
	var sizes []int
	for _, s := range strings.Split(list, ",") {
		s = strings.TrimSpace(strings.ToLower(s))
		mult := 1
		if n, ok := strings.CutSuffix(s, "k"); ok {
			s, mult = n, 1<<10
		} else if n, ok := strings.CutSuffix(s, "m"); ok {
			s, mult = n, 1<<20
		}
		n, err := strconv.Atoi(s)
		if err != nil || n*mult < len(body(0)) {
			return nil, fmt.Errorf("-sizes: %q is not a size of at least %d bytes", s, len(body(0)))
		}
		sizes = append(sizes, n*mult)
	}
	return sizes, nil
}
