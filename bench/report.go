package main

import (
	"fmt"
	"math"
	"slices"
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
	// List rows measured a tools/list, not a tools/call.
	List bool `json:"tools_list,omitempty"`
	// RPS is good answers per second.
	RPS spread `json:"rps"`
	// Ratio is RPS divided by the baseline's RPS of the same round.
	Ratio spread `json:"ratio"`
	// P50 and P99 are latencies in milliseconds.
	P50 spread `json:"p50_ms"`
	P99 spread `json:"p99_ms"`
	// AddedP50 and AddedP99 are the latency over the baseline's of the same
	// round, in per cent of the baseline's.
	AddedP50   spread `json:"added_p50_pct"`
	AddedP99   spread `json:"added_p99_pct"`
	Errors     uint64 `json:"errors"`
	FirstError string `json:"first_error,omitempty"`
	// For a configuration that keeps its buckets in Redis: InProcess is
	// the one with the same limits in the handler's memory, and
	// AddedP50InProcess this p50 minus InProcess's p50 of the same round,
	// in microseconds (absent when InProcess was not measured).
	// RedisRoundTrips are the exchanges with Redis per admitted request,
	// RedisScripts the EVALSHA and EVAL calls (several in one exchange when
	// a request meets several limits), and RedisCommands all the commands
	// Redis processed, those the scripts run included.
	InProcess         string  `json:"in_process,omitempty"`
	AddedP50InProcess *spread `json:"added_p50_over_in_process_us,omitempty"`
	RedisCommands     *spread `json:"redis_commands_per_request,omitempty"`
	RedisScripts      *spread `json:"redis_scripts_per_request,omitempty"`
	RedisRoundTrips   *spread `json:"redis_round_trips_per_request,omitempty"`
	// RedisDecisions are the decisions asked of the Redis store over the
	// rounds, and RedisFallbacks those Redis did not make (a timeout, or
	// the breaker open): the handler made them with its own buckets.
	RedisDecisions uint64 `json:"redis_decisions,omitempty"`
	RedisFallbacks uint64 `json:"redis_fallbacks,omitempty"`
	// CPU is the CPU time the Caddy process used per good answer, and
	// RedisCPU redis-server's, in microseconds (absent where the system
	// does not tell).
	CPU      *spread `json:"caddy_cpu_us_per_request,omitempty"`
	RedisCPU *spread `json:"redis_cpu_us_per_request,omitempty"`
	// CPUOverControl is the Caddy CPU per answer over control's, round by
	// round, in microseconds: what the configuration costs over a
	// middleware that does nothing, the figure least moved by a noisy
	// machine (absent for control, and where CPU is not measured).
	CPUOverControl *interval  `json:"caddy_cpu_over_control_us,omitempty"`
	Rounds         []roundFig `json:"rounds"`
}

// roundFig is one round's measurement.
type roundFig struct {
	RPS   float64   `json:"rps"`
	P50ms float64   `json:"p50_ms"`
	P99ms float64   `json:"p99_ms"`
	Redis *redisUse `json:"redis,omitempty"`
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

// spreadOrNil is the spread of xs, or nil when there are none.
func spreadOrNil(xs []float64) *spread {
	if len(xs) == 0 {
		return nil
	}
	s := spreadOf(xs)
	return &s
}

// summarise turns the series into rows, comparing each with its baseline
// series of the same body size.
func summarise(all []*series) []row {
	var rows []row
	for _, s := range all {
		base := findSeries(all, s.Config.Baseline, s.Size)
		r := row{Config: s.Config.Name, Upstream: s.Config.Upstream, Baseline: s.Config.Baseline, Size: s.Size, List: s.Config.List, InProcess: s.Config.InProcess}
		var rps, ratio, p50, p99, add50, add99 []float64
		var inProcess *series
		if s.Config.InProcess != "" {
			inProcess = findSeries(all, s.Config.InProcess, s.Size)
		}
		var overInProcess, redisCmds, redisScripts, redisTrips, redisCPU []float64
		for i, smp := range s.Samples {
			if smp.Redis != nil && smp.Redis.CPU > 0 && smp.Answered > 0 {
				redisCPU = append(redisCPU, us(smp.Redis.CPU)/float64(smp.Answered))
			}
			rps = append(rps, smp.RPS())
			p50 = append(p50, ms(smp.P50()))
			p99 = append(p99, ms(smp.P99()))
			r.Rounds = append(r.Rounds, roundFig{RPS: smp.RPS(), P50ms: ms(smp.P50()), P99ms: ms(smp.P99()), Redis: smp.Redis})
			r.Errors += smp.Errors
			if r.FirstError == "" {
				r.FirstError = smp.FirstError
			}
			if smp.Redis != nil && smp.Redis.Answered > 0 {
				cmds, scripts, trips := smp.Redis.perRequest()
				redisCmds, redisScripts, redisTrips = append(redisCmds, cmds), append(redisScripts, scripts), append(redisTrips, trips)
			}
			if smp.Redis != nil {
				r.RedisDecisions += smp.Redis.Decisions
				r.RedisFallbacks += smp.Redis.Fallbacks
			}
			if inProcess != nil && i < len(inProcess.Samples) && inProcess.Samples[i].P50() > 0 && smp.P50() > 0 {
				overInProcess = append(overInProcess, us(smp.P50())-us(inProcess.Samples[i].P50()))
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
		r.AddedP50InProcess, r.RedisCommands, r.RedisScripts = spreadOrNil(overInProcess), spreadOrNil(redisCmds), spreadOrNil(redisScripts)
		r.RedisRoundTrips = spreadOrNil(redisTrips)
		cpu, overControl := cpuFigures(s, findSeries(all, cfgControl, s.Size))
		r.CPU, r.RedisCPU = spreadOrNil(cpu), spreadOrNil(redisCPU)
		r.CPUOverControl = medianInterval(overControl)
		rows = append(rows, r)
	}
	return rows
}

// cpuFigures are s's Caddy CPU per answer, round by round, and the same
// over control's of the round (none for control itself).
func cpuFigures(s, control *series) (cpu, overControl []float64) {
	if control == s {
		control = nil
	}
	for i := range s.Samples {
		c, ok := cpuPerAnswer(s, i)
		if !ok {
			continue
		}
		cpu = append(cpu, c)
		if base, ok := cpuPerAnswer(control, i); ok {
			overControl = append(overControl, c-base)
		}
	}
	return cpu, overControl
}

// cpuPerAnswer is the Caddy CPU per answer of s's measurement in round i,
// in microseconds, if it was measured.
func cpuPerAnswer(s *series, i int) (float64, bool) {
	if s == nil || i >= len(s.Samples) || s.Samples[i].CPU <= 0 || s.Samples[i].Answered == 0 {
		return 0, false
	}
	return us(s.Samples[i].CPU) / float64(s.Samples[i].Answered), true
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
	// Kind is what is compared: "same-run comparison" between
	// configurations, or "count" for a figure that does not depend on the
	// machine's speed.
	Kind string `json:"kind"`
	// Measured is the figure compared (a ratio, a per cent, milliseconds),
	// Bound the limit, AtMost whether Measured must stay at or below it.
	Measured spread  `json:"measured"`
	Bound    float64 `json:"bound"`
	AtMost   bool    `json:"at_most"`
	Unit     string  `json:"unit"`
	Met      bool    `json:"met"`
}

// Kinds of target.
const (
	kindComparison = "same-run comparison"
	kindCount      = "count"
)

// unitPerRequest is the unit of a count per admitted request.
const unitPerRequest = "per request"

// goals checks the targets on the medians over the rounds: each a
// comparison between configurations measured side by side in this run, but
// for the Redis round trips per request, a count.
func goals(rows []row, fe *firstEvents, sizes []int) []goal {
	var gs goalList
	gs.overhead(rows, sizes)
	gs.features(rows, sizes)
	gs.redis(rows, sizes)
	gs.federation(rows, sizes)
	if fe != nil && fe.Added != nil {
		gs.atMost("SSE time to first event, mcp minus reverse_proxy", *fe.Added, 1, "ms")
	}
	return gs
}

// goalList gathers the goals checked, in the order they are written.
type goalList []goal

func (gs *goalList) atLeast(what string, s spread, bound float64) {
	*gs = append(*gs, goal{What: what, Kind: kindComparison, Measured: s, Bound: bound, Unit: "×", Met: s.Median >= bound})
}

func (gs *goalList) atMost(what string, s spread, bound float64, unit string) {
	kind := kindComparison
	if unit == unitPerRequest {
		kind = kindCount
	}
	*gs = append(*gs, goal{What: what, Kind: kind, Measured: s, Bound: bound, AtMost: true, Unit: unit, Met: s.Median <= bound})
}

// overhead checks what mcp {}, the rate limits and the guard add to
// reverse_proxy: throughput, then latency.
func (gs *goalList) overhead(rows []row, sizes []int) {
	for _, size := range sizes {
		small := size <= 1<<10
		label := sizeLabel(size)
		if r := findRow(rows, cfgMCP, size); r != nil {
			gs.atLeast(fmt.Sprintf("throughput, mcp {} / reverse_proxy, %s", label), r.Ratio, pick(small, 0.95, 0.90))
		}
		for _, n := range []string{cfgLimits1, cfgLimits100k, cfgGuard} {
			if r := findRow(rows, n, size); r != nil {
				gs.atLeast(fmt.Sprintf("throughput, %s / reverse_proxy, %s", n, label), r.Ratio, pick(small, 0.93, 0.88))
			}
		}
	}
	for _, size := range sizes {
		for _, n := range []string{cfgMCP, cfgLimits1, cfgLimits100k, cfgGuard} {
			if r := findRow(rows, n, size); r != nil {
				gs.atMost(fmt.Sprintf("p50 added, %s over reverse_proxy, %s", n, sizeLabel(size)), r.AddedP50, 10, "%")
				gs.atMost(fmt.Sprintf("p99 added, %s over reverse_proxy, %s", n, sizeLabel(size)), r.AddedP99, 10, "%")
			}
		}
	}
}

// features checks what validating calls, the tools policy, sessions and a
// denial cost.
func (gs *goalList) features(rows []row, sizes []int) {
	// validate checks every call against the learned schema.
	for _, size := range sizes {
		if r := findRow(rows, cfgValidate, size); r != nil && size <= 1<<10 {
			gs.atLeast(fmt.Sprintf("throughput, validate / reverse_proxy, %s", sizeLabel(size)), r.Ratio, 0.90)
		}
	}
	// The tools policy against mcp {}: the name checked against its globs,
	// a deadline armed and stopped, and the answer held and read.
	for _, size := range sizes {
		if r := findRow(rows, cfgTools, size); r != nil && size <= 1<<10 {
			gs.atLeast(fmt.Sprintf("throughput, tools / mcp {}, %s", sizeLabel(size)), r.Ratio, 0.95)
		}
	}
	// Sessions against mcp {} carrying the same session unsealed, measured
	// just before: opening the token (about a quarter of a microsecond),
	// restoring the id, the pinned choice, writing the token back and the
	// token's extra bytes should stay within the noise.
	for _, size := range sizes {
		if r := findRow(rows, cfgSessions, size); r != nil {
			gs.atLeast(fmt.Sprintf("throughput, sessions / mcp {} with the session unsealed (within noise), %s", sizeLabel(size)), r.Ratio, 0.97)
			gs.atMost(fmt.Sprintf("p50 added, sessions over mcp {} with the session unsealed (within noise), %s", sizeLabel(size)), r.AddedP50, 5, "%")
		}
	}
	for _, size := range sizes {
		if r := findRow(rows, cfgDenied, size); r != nil {
			gs.atLeast(fmt.Sprintf("throughput, denied (envelope) / reverse_proxy, %s", sizeLabel(size)), r.Ratio, 2)
		}
	}
}

// redis checks the configurations that keep their buckets in Redis:
// throughput, latency over buckets in process, and round trips.
func (gs *goalList) redis(rows []row, sizes []int) {
	for _, size := range sizes {
		for _, n := range []string{cfgRedis1, cfgRedis100k} {
			r := findRow(rows, n, size)
			if r == nil {
				continue
			}
			if size <= 1<<10 {
				gs.atLeast(fmt.Sprintf("throughput, %s / reverse_proxy, %s", n, sizeLabel(size)), r.Ratio, 0.90)
			}
			if r.AddedP50InProcess != nil {
				gs.atMost(fmt.Sprintf("p50 added, %s over %s (buckets in process), %s", n, r.InProcess, sizeLabel(size)), *r.AddedP50InProcess, 150, "µs")
			}
			if r.RedisRoundTrips != nil {
				gs.atMost(fmt.Sprintf("Redis round trips per admitted request, %s, %s", n, sizeLabel(size)), *r.RedisRoundTrips, 1, unitPerRequest)
			}
		}
	}
}

func pick(small bool, a, b float64) float64 {
	if small {
		return a
	}
	return b
}
