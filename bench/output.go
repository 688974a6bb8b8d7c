package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strings"
)

func sizeLabel(n int) string {
	if n%(1<<10) == 0 {
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d B", n)
}

// report is everything a run prints.
type report struct {
	Env      environment  `json:"environment"`
	Settings settings     `json:"settings"`
	Rows     []row        `json:"rows"`
	SSE      *firstEvents `json:"sse,omitempty"`
	Peer     []peerPair   `json:"against_peer,omitempty"`
	// Federation is each federated configuration's CPU against its
	// baseline's.
	Federation []fedFigure `json:"federation,omitempty"`
	// Credential is the credential configuration against authorization.
	Credential *credentialRun `json:"credential,omitempty"`
	Paced      *pacedRun      `json:"paced,omitempty"`
	Goals      []goal         `json:"targets"`
	Elapsed    string         `json:"elapsed"`
	Profiles   []string       `json:"profiles,omitempty"`
}

// environment is the machine and the software measured.
type environment struct {
	Cores      int    `json:"cores"`
	GOMAXPROCS int    `json:"gomaxprocs"`
	CPU        string `json:"cpu,omitempty"`
	OS         string `json:"os"`
	Go         string `json:"go"`
	Caddy      string `json:"caddy"`
	// Build is what the Caddy binary holds.
	Build string `json:"build"`
	// Redis is the version of the redis-server the benchmark ran, if it
	// needed one; RedisNote says why configurations that need one were
	// not measured.
	Redis      string `json:"redis,omitempty"`
	RedisNote  string `json:"redis_note,omitempty"`
	LoadBefore string `json:"load_before,omitempty"`
	LoadAfter  string `json:"load_after,omitempty"`
}

// settings are how the run measured.
type settings struct {
	Rounds          int    `json:"rounds"`
	Duration        string `json:"duration"`
	Warmup          string `json:"warmup"`
	Clients         int    `json:"clients"`
	SSEClients      int    `json:"sse_clients"`
	SSEDuration     string `json:"sse_duration"`
	UpstreamProcess bool   `json:"upstream_process"`
	GuardMax        int    `json:"guard_max"`
}

func (r *report) writeJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

func (r *report) writeMarkdown(w io.Writer) {
	r.writeHeader(w)
	r.writeRows(w)
	r.writeRedis(w)
	r.writeFirstEvents(w)
	r.writePeer(w)
	r.writeFederation(w)
	r.writeCredential(w)
	r.writePaced(w)
	r.writeGoals(w)
	if len(r.Profiles) > 0 {
		fmt.Fprintln(w, "\nCPU profiles of Caddy under each configuration's load (go tool pprof -top FILE):")
		fmt.Fprintln(w)
		for _, p := range r.Profiles {
			fmt.Fprintf(w, "- %s\n", p)
		}
	}
}

// writeHeader names the machine, the software and how the run measured.
func (r *report) writeHeader(w io.Writer) {
	e, s := r.Env, r.Settings
	fmt.Fprintf(w, "# caddy-mcp gateway benchmark\n\n")
	fmt.Fprintf(w, "- machine: %d cores (GOMAXPROCS %d)%s, %s; load average before %s, after %s\n", e.Cores, e.GOMAXPROCS, prefixed(", ", e.CPU), e.OS, e.LoadBefore, e.LoadAfter)
	fmt.Fprintf(w, "- software: Go %s, Caddy %s (%s)%s\n", e.Go, e.Caddy, e.Build,
		redisSoftware(e.Redis))
	if e.RedisNote != "" {
		fmt.Fprintf(w, "- skipped: %s\n", e.RedisNote)
	}
	upstream := "in the benchmark process"
	if s.UpstreamProcess {
		upstream = "in a process of its own"
	}
	fmt.Fprintf(w, "- run: %d rounds, each measuring every configuration in turn for %s after a %s warm-up; %d keep-alive HTTP/1.1 clients, closed loop, on loopback; upstream %s; took %s\n\n",
		s.Rounds, s.Duration, s.Warmup, s.Clients, upstream, r.Elapsed)
}

// writeRows is the throughput and latency table, then the first error of
// each row that had any.
func (r *report) writeRows(w io.Writer) {
	fmt.Fprintln(w, "Figures are the median over the rounds [smallest–largest]. Ratios and added latencies are taken round by round against the baseline (reverse_proxy to the same upstream, same body, unless the row names another) measured in the same round, then summarised. Caddy CPU is the CPU time the configuration's Caddy process used per answer, warm-up included (Linux only). CPU over control, the headline: that CPU per answer minus control's (a middleware that does nothing) of the same round, with the interval of its median (benchstat's: order statistics of a binomial) and the interval's confidence.")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| config | body | CPU over control | × reverse_proxy | req/s | p50 | p99 | p50 added | p99 added | Caddy CPU | errors |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|---|---|")
	for _, row := range r.Rows {
		name := row.Config
		if row.Upstream == upstreamSDK {
			name += " (Go SDK server)"
		}
		if row.Baseline != cfgProxy && row.Baseline != cfgSDKProxy && row.Baseline != row.Config {
			name += " (against " + baselineLabel(row.Baseline) + ")"
		}
		fmt.Fprintf(w, "| %s | %s | %s | %.2f [%.2f–%.2f] | %s [%s–%s] | %s ms | %s ms | %s | %s | %s | %d |\n",
			name, bodyLabel(row.Size, row.List), cpuInterval(row.CPUOverControl),
			row.Ratio.Median, row.Ratio.Min, row.Ratio.Max,
			thousands(row.RPS.Median), thousands(row.RPS.Min), thousands(row.RPS.Max),
			millis(row.P50.Median), millis(row.P99.Median),
			percent(row.AddedP50.Median), percent(row.AddedP99.Median),
			cpuPerRequest(row.CPU), row.Errors)
	}
	for _, row := range r.Rows {
		if row.Errors > 0 {
			fmt.Fprintf(w, "\n%s, %s: %d errors; the first: %s\n", row.Config, bodyLabel(row.Size, row.List), row.Errors, row.FirstError)
		}
	}
}

// writeRedis is, for each configuration keeping its buckets in Redis, its
// throughput against reverse_proxy, its latency against the same limits
// in process, and the Redis commands each admitted request cost.
func (r *report) writeRedis(w io.Writer) {
	var rows []row
	for _, row := range r.Rows {
		if row.RedisScripts != nil || row.InProcess != "" {
			rows = append(rows, row)
		}
	}
	if len(rows) == 0 {
		return
	}
	fmt.Fprintln(w, "\nRate-limit buckets in Redis, against the same limits in process (median over the rounds [smallest–largest]). p50 added is the round's p50 minus that of the in-process configuration measured just before it. Round trips are the exchanges the store had with Redis during the measurement (warm-up included; a pipeline of several scripts is one), divided by the requests admitted meanwhile; scripts are the EVALSHA and EVAL calls Redis received, and commands all those it processed, the ones each script runs inside Redis included, the benchmark's own INFO excluded; CPU is the time each process used per admitted request:")
	fmt.Fprintln(w)
	for _, row := range rows {
		added := "– (" + row.InProcess + " not measured)"
		if a := row.AddedP50InProcess; a != nil {
			added = fmt.Sprintf("%s [%s–%s] over %s", micros(a.Median), micros(a.Min), micros(a.Max), row.InProcess)
		}
		cmds := "Redis use not counted"
		if c, sc, rt := row.RedisCommands, row.RedisScripts, row.RedisRoundTrips; c != nil && sc != nil && rt != nil {
			cmds = fmt.Sprintf("%.2f [%.2f–%.2f] Redis round trips per admitted request (%.2f scripts, %.2f commands processed)", rt.Median, rt.Min, rt.Max, sc.Median, c.Median)
		}
		if row.RedisCPU != nil {
			cmds += fmt.Sprintf("; CPU per request: redis-server %s, Caddy %s", cpuPerRequest(row.RedisCPU), cpuPerRequest(row.CPU))
			if in := r.find(row.InProcess, row.Size); in != nil && in.CPU != nil {
				cmds += fmt.Sprintf(" (%s: %s)", row.InProcess, cpuPerRequest(in.CPU))
			}
		}
		fallbacks := ""
		if row.RedisFallbacks > 0 {
			fallbacks = fmt.Sprintf("; **%d of %d decisions (%.1f %%) made without Redis** (no answer within the store's timeout, or the breaker open): the handler's own buckets decided them, and they cost no round trip", row.RedisFallbacks, row.RedisDecisions, 100*float64(row.RedisFallbacks)/float64(row.RedisDecisions))
		}
		fmt.Fprintf(w, "- %s, %s: %.2f× reverse_proxy [%.2f–%.2f]; p50 %s; %s%s\n", row.Config, sizeLabel(row.Size),
			row.Ratio.Median, row.Ratio.Min, row.Ratio.Max, added, cmds, fallbacks)
	}
}

// cpuPerRequest is a CPU time per request, in microseconds, or – where
// it was not measured.
func cpuPerRequest(s *spread) string {
	if s == nil {
		return "–"
	}
	return fmt.Sprintf("%.0f µs", s.Median)
}

// find is the row of the named configuration and body size, or nil.
func (r *report) find(name string, size int) *row {
	for i := range r.Rows {
		if r.Rows[i].Config == name && r.Rows[i].Size == size {
			return &r.Rows[i]
		}
	}
	return nil
}

// writeFirstEvents is the SSE time to first event, when it was measured.
func (r *report) writeFirstEvents(w io.Writer) {
	fe := r.SSE
	if fe == nil {
		return
	}
	fmt.Fprintf(w, "\nSSE time to first event (1 KiB tools/call answered as an event stream whose first event is flushed at once; %d client(s), %s per configuration per round; median over the rounds of each round's median [smallest–largest]; p99 likewise):\n\n", r.Settings.SSEClients, r.Settings.SSEDuration)
	for i, n := range fe.Configs {
		p, q := fe.P50[i], fe.P99[i]
		fmt.Fprintf(w, "- %s: %s ms [%s–%s], p99 %s ms\n", n, millis(p.Median), millis(p.Min), millis(p.Max), millis(q.Median))
	}
	if a := fe.Added; a != nil {
		fmt.Fprintf(w, "- mcp minus reverse_proxy, round by round: %+.3f ms [%+.3f–%+.3f]\n", a.Median, a.Min, a.Max)
	}
	if fe.Errors > 0 {
		fmt.Fprintf(w, "- errors: %d\n", fe.Errors)
	}
}

// writeGoals is the targets table: every row a same-run comparison.
func (r *report) writeGoals(w io.Writer) {
	if len(r.Goals) == 0 {
		return
	}
	fmt.Fprintln(w, "\nTargets. Every one is a comparison between configurations measured side by side in this run (the medians over the rounds of round-by-round ratios or differences), or a count that does not depend on the machine's speed (Redis round trips per admitted request); no absolute figure above is a target:")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| target | kind | measured [smallest–largest] | bound | met |")
	fmt.Fprintln(w, "|---|---|---|---|---|")
	for _, g := range r.Goals {
		bound := "≥ " + formatFig(g.Bound, g.Unit)
		if g.AtMost {
			bound = "≤ " + formatFig(g.Bound, g.Unit)
		}
		met := "**no**"
		if g.Met {
			met = "yes"
		}
		fmt.Fprintf(w, "| %s | %s | %s [%s–%s] | %s | %s |\n", g.What, g.Kind,
			formatFig(g.Measured.Median, g.Unit), formatFig(g.Measured.Min, g.Unit), formatFig(g.Measured.Max, g.Unit), bound, met)
	}
	var fellBack []string
	for _, row := range r.Rows {
		if row.RedisFallbacks > 0 {
			fellBack = append(fellBack, row.Config+", "+sizeLabel(row.Size))
		}
	}
	if len(fellBack) > 0 {
		fmt.Fprintf(w, "\nRedis did not make every decision of %s: the handler's own buckets made the rest, so the Redis targets of those rows measure less than Redis costs.\n", strings.Join(fellBack, "; "))
	}
}

// bodyLabel is what a measurement's requests were: a tools/call of size
// bytes, or a tools/list.
func bodyLabel(size int, list bool) string {
	if list {
		return "tools/list"
	}
	return sizeLabel(size)
}

// baselineLabel names a baseline other than reverse_proxy in the table.
func baselineLabel(name string) string {
	switch name {
	case cfgMCP:
		return "mcp {}"
	case cfgMCPSession:
		return "mcp {} with the session unsealed"
	}
	return name
}

func formatFig(v float64, unit string) string {
	switch unit {
	case "×":
		return fmt.Sprintf("%.2f×", v)
	case "%":
		return percent(v)
	case "ms":
		return fmt.Sprintf("%+.3f ms", v)
	case "µs":
		return micros(v)
	case unitPerRequest:
		return fmt.Sprintf("%.2f", v)
	}
	return fmt.Sprint(v)
}

func redisSoftware(version string) string {
	if version == "" {
		return ""
	}
	return ", Redis " + version + " (redis-server on loopback, nothing saved to disk, shared by the *-redis configurations)"
}

func prefixed(p, s string) string {
	if s == "" {
		return ""
	}
	return p + s
}

func percent(v float64) string {
	if math.IsNaN(v) {
		return "–"
	}
	return fmt.Sprintf("%+.1f %%", v)
}

// micros writes a difference in microseconds, signed.
func micros(v float64) string {
	if math.IsNaN(v) {
		return "–"
	}
	return fmt.Sprintf("%+.0f µs", v)
}

func millis(v float64) string {
	switch {
	case math.IsNaN(v):
		return "–"
	case v < 10:
		return fmt.Sprintf("%.3f", v)
	}
	return fmt.Sprintf("%.1f", v)
}

// thousands writes a rate rounded to a whole number, with thin separators.
func thousands(v float64) string {
	if math.IsNaN(v) {
		return "–"
	}
	s := fmt.Sprintf("%d", int64(math.Round(v)))
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}
