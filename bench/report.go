package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"time"
)

// spread is a figure over the rounds: its median, smallest and largest.
type spread struct {
	Median float64 `json:"median"`
	Min    float64 `json:"min"`
	Max    float64 `json:"max"`
}

func spreadOf(xs []float64) spread {
	if len(xs) == 0 {
		return spread{Median: math.NaN(), Min: math.NaN(), Max: math.NaN()}
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	m := s[len(s)/2]
	if len(s)%2 == 0 {
		m = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return spread{Median: m, Min: s[0], Max: s[len(s)-1]}
}

// series is one configuration and body size, measured once per round.
type series struct {
	Config  config
	Size    int
	Samples []*sample
}

// row is a series summarised. Ratios and added latencies are taken round by
// round against the baseline's sample of the same round, then summarised:
// each compares two measurements made a few seconds apart.
type row struct {
	Config   string `json:"config"`
	Upstream string `json:"upstream"`
	Baseline string `json:"baseline"`
	Size     int    `json:"body_bytes"`
	// RPS is good answers per second.
	RPS spread `json:"rps"`
	// Ratio is RPS divided by the baseline's RPS of the same round.
	Ratio spread `json:"ratio"`
	// P50 and P99 are latencies in milliseconds.
	P50 spread `json:"p50_ms"`
	P99 spread `json:"p99_ms"`
	// AddedP50 and AddedP99 are the latency over the baseline's of the same
	// round, in per cent of the baseline's.
	AddedP50   spread     `json:"added_p50_pct"`
	AddedP99   spread     `json:"added_p99_pct"`
	Errors     uint64     `json:"errors"`
	FirstError string     `json:"first_error,omitempty"`
	Rounds     []roundFig `json:"rounds"`
}

// roundFig is one round's measurement.
type roundFig struct {
	RPS   float64 `json:"rps"`
	P50ms float64 `json:"p50_ms"`
	P99ms float64 `json:"p99_ms"`
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// summarise turns the series into rows, comparing each with its baseline
// series of the same body size.
func summarise(all []*series) []row {
	var rows []row
	for _, s := range all {
		base := findSeries(all, s.Config.Baseline, s.Size)
		r := row{Config: s.Config.Name, Upstream: s.Config.Upstream, Baseline: s.Config.Baseline, Size: s.Size}
		var rps, ratio, p50, p99, add50, add99 []float64
		for i, smp := range s.Samples {
			rps = append(rps, smp.RPS())
			p50 = append(p50, ms(smp.P50()))
			p99 = append(p99, ms(smp.P99()))
			r.Rounds = append(r.Rounds, roundFig{RPS: smp.RPS(), P50ms: ms(smp.P50()), P99ms: ms(smp.P99())})
			r.Errors += smp.Errors
			if r.FirstError == "" {
				r.FirstError = smp.FirstError
			}
			if base == nil || i >= len(base.Samples) {
				continue
			}
			b := base.Samples[i]
			if b.RPS() > 0 {
				ratio = append(ratio, smp.RPS()/b.RPS())
			}
			if b.P50() > 0 && b.P99() > 0 {
				add50 = append(add50, 100*(float64(smp.P50())/float64(b.P50())-1))
				add99 = append(add99, 100*(float64(smp.P99())/float64(b.P99())-1))
			}
		}
		r.RPS, r.Ratio, r.P50, r.P99 = spreadOf(rps), spreadOf(ratio), spreadOf(p50), spreadOf(p99)
		r.AddedP50, r.AddedP99 = spreadOf(add50), spreadOf(add99)
		rows = append(rows, r)
	}
	return rows
}

func findSeries(all []*series, name string, size int) *series {
	for _, s := range all {
		if s.Config.Name == name && s.Size == size {
			return s
		}
	}
	return nil
}

func findRow(rows []row, name string, size int) *row {
	for i := range rows {
		if rows[i].Config == name && rows[i].Size == size {
			return &rows[i]
		}
	}
	return nil
}

// firstEvents is the time to first event through each configuration.
type firstEvents struct {
	// Configs are in measurement order; P50 is, per configuration, the
	// median over the rounds of each round's median time, in milliseconds.
	Configs []string `json:"configs"`
	P50     []spread `json:"p50_ms"`
	P99     []spread `json:"p99_ms"`
	// Added is the mcp configuration's median minus reverse_proxy's, round
	// by round, in milliseconds.
	Added  *spread `json:"mcp_minus_reverse_proxy_ms,omitempty"`
	Errors uint64  `json:"errors"`
}

func summariseFirstEvents(names []string, samples map[string][]*sample) *firstEvents {
	fe := &firstEvents{Configs: names}
	for _, n := range names {
		var p50, p99 []float64
		for _, s := range samples[n] {
			p50 = append(p50, ms(s.P50()))
			p99 = append(p99, ms(s.P99()))
			fe.Errors += s.Errors
		}
		fe.P50 = append(fe.P50, spreadOf(p50))
		fe.P99 = append(fe.P99, spreadOf(p99))
	}
	gw, rp := samples[cfgMCP], samples[cfgProxy]
	if len(gw) > 0 && len(gw) == len(rp) {
		var d []float64
		for i := range gw {
			d = append(d, ms(gw[i].P50())-ms(rp[i].P50()))
		}
		s := spreadOf(d)
		fe.Added = &s
	}
	return fe
}

// goal is one of the targets, checked against this run's figures.
type goal struct {
	What string `json:"what"`
	// Measured is the figure compared (a ratio, a per cent, milliseconds),
	// Bound the limit, AtMost whether Measured must stay at or below it.
	Measured spread  `json:"measured"`
	Bound    float64 `json:"bound"`
	AtMost   bool    `json:"at_most"`
	Unit     string  `json:"unit"`
	Met      bool    `json:"met"`
}

// goals checks the targets, each a comparison between configurations
// measured side by side in this run, on the medians over the rounds.
func goals(rows []row, fe *firstEvents, sizes []int) []goal {
	var gs []goal
	atLeast := func(what string, s spread, bound float64) {
		gs = append(gs, goal{What: what, Measured: s, Bound: bound, Unit: "×", Met: s.Median >= bound})
	}
	atMost := func(what string, s spread, bound float64, unit string) {
		gs = append(gs, goal{What: what, Measured: s, Bound: bound, AtMost: true, Unit: unit, Met: s.Median <= bound})
	}
	for _, size := range sizes {
		small := size <= 1<<10
		label := sizeLabel(size)
		if r := findRow(rows, cfgMCP, size); r != nil {
			atLeast(fmt.Sprintf("throughput, mcp {} / reverse_proxy, %s", label), r.Ratio, pick(small, 0.95, 0.90))
		}
		for _, n := range []string{cfgLimits1, cfgLimits100k, cfgGuard} {
			if r := findRow(rows, n, size); r != nil {
				atLeast(fmt.Sprintf("throughput, %s / reverse_proxy, %s", n, label), r.Ratio, pick(small, 0.93, 0.88))
			}
		}
	}
	for _, size := range sizes {
		for _, n := range []string{cfgMCP, cfgLimits1, cfgLimits100k, cfgGuard} {
			if r := findRow(rows, n, size); r != nil {
				atMost(fmt.Sprintf("p50 added, %s over reverse_proxy, %s", n, sizeLabel(size)), r.AddedP50, 10, "%")
				atMost(fmt.Sprintf("p99 added, %s over reverse_proxy, %s", n, sizeLabel(size)), r.AddedP99, 10, "%")
			}
		}
	}
	for _, size := range sizes {
		if r := findRow(rows, cfgDenied, size); r != nil {
			atLeast(fmt.Sprintf("throughput, denied (envelope) / reverse_proxy, %s", sizeLabel(size)), r.Ratio, 2)
		}
	}
	if fe != nil && fe.Added != nil {
		atMost("SSE time to first event, mcp minus reverse_proxy", *fe.Added, 1, "ms")
	}
	return gs
}

func pick(small bool, a, b float64) float64 {
	if small {
		return a
	}
	return b
}

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
	Goals    []goal       `json:"targets"`
	Elapsed  string       `json:"elapsed"`
	Profiles []string     `json:"profiles,omitempty"`
}

// environment is the machine and the software measured.
type environment struct {
	Cores      int    `json:"cores"`
	GOMAXPROCS int    `json:"gomaxprocs"`
	CPU        string `json:"cpu,omitempty"`
	OS         string `json:"os"`
	Go         string `json:"go"`
	Caddy      string `json:"caddy"`
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
	e, s := r.Env, r.Settings
	fmt.Fprintf(w, "# caddy-mcp gateway benchmark\n\n")
	fmt.Fprintf(w, "- machine: %d cores (GOMAXPROCS %d)%s, %s; load average before %s, after %s\n", e.Cores, e.GOMAXPROCS, prefixed(", ", e.CPU), e.OS, e.LoadBefore, e.LoadAfter)
	fmt.Fprintf(w, "- software: Go %s, Caddy %s (cmd/caddy with the mcp plugin)\n", e.Go, e.Caddy)
	upstream := "in the benchmark process"
	if s.UpstreamProcess {
		upstream = "in a process of its own"
	}
	fmt.Fprintf(w, "- run: %d rounds, each measuring every configuration in turn for %s after a %s warm-up; %d keep-alive HTTP/1.1 clients, closed loop, on loopback; upstream %s; took %s\n\n",
		s.Rounds, s.Duration, s.Warmup, s.Clients, upstream, r.Elapsed)
	fmt.Fprintln(w, "Figures are the median over the rounds [smallest–largest]. Ratios and added latencies are taken round by round against the baseline (reverse_proxy to the same upstream, same body) measured in the same round, then summarised.")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| config | body | req/s | × reverse_proxy | p50 | p99 | p50 added | p99 added | errors |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|")
	for _, row := range r.Rows {
		name := row.Config
		if row.Upstream == upstreamSDK {
			name += " (Go SDK server)"
		}
		fmt.Fprintf(w, "| %s | %s | %s [%s–%s] | %.2f [%.2f–%.2f] | %s ms | %s ms | %s | %s | %d |\n",
			name, sizeLabel(row.Size),
			thousands(row.RPS.Median), thousands(row.RPS.Min), thousands(row.RPS.Max),
			row.Ratio.Median, row.Ratio.Min, row.Ratio.Max,
			millis(row.P50.Median), millis(row.P99.Median),
			percent(row.AddedP50.Median), percent(row.AddedP99.Median),
			row.Errors)
	}
	for _, row := range r.Rows {
		if row.Errors > 0 {
			fmt.Fprintf(w, "\n%s, %s: %d errors; the first: %s\n", row.Config, sizeLabel(row.Size), row.Errors, row.FirstError)
		}
	}
	if fe := r.SSE; fe != nil {
		fmt.Fprintf(w, "\nSSE time to first event (1 KiB tools/call answered as an event stream whose first event is flushed at once; %d client(s), %s per configuration per round; median over the rounds of each round's median [smallest–largest]; p99 likewise):\n\n", s.SSEClients, s.SSEDuration)
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
	if len(r.Goals) > 0 {
		fmt.Fprintln(w, "\nTargets. Every one is a comparison between configurations measured side by side in this run (the medians over the rounds of round-by-round ratios or differences); no absolute figure above is a target:")
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
			fmt.Fprintf(w, "| %s | same-run comparison | %s [%s–%s] | %s | %s |\n", g.What,
				formatFig(g.Measured.Median, g.Unit), formatFig(g.Measured.Min, g.Unit), formatFig(g.Measured.Max, g.Unit), bound, met)
		}
	}
	if len(r.Profiles) > 0 {
		fmt.Fprintln(w, "\nCPU profiles of Caddy under each configuration's load (go tool pprof -top FILE):")
		fmt.Fprintln(w)
		for _, p := range r.Profiles {
			fmt.Fprintf(w, "- %s\n", p)
		}
	}
}

func formatFig(v float64, unit string) string {
	switch unit {
	case "×":
		return fmt.Sprintf("%.2f×", v)
	case "%":
		return percent(v)
	case "ms":
		return fmt.Sprintf("%+.3f ms", v)
	}
	return fmt.Sprint(v)
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
