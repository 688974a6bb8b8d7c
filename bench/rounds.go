package main

import (
	"errors"
	"fmt"
	"log"

	"github.com/caddymcp/caddy-mcp/internal/caddyrun"
)

var errInterrupted = errors.New("interrupted")

// rounds warms every configuration up, then measures them round after round.
func (b *bench) rounds() ([]*series, *firstEvents, error) {
	var all []*series
	for i, size := range b.sizes {
		for _, c := range b.sel.Throughput {
			if n, ok := c.sizeAt(i, size); ok {
				all = append(all, &series{Config: c, Size: n})
			}
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
	if b.sel.Paced {
		for _, size := range b.pacedSizes {
			for _, n := range pacedConfigs {
				measurePaced(b.caddies[n].Addr, body(size), o.pacedRate, o.firstWarmup, &b.stop)
			}
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
		log.Printf("round %d/%d %-17s %6s: %8.0f req/s  p50 %s ms  p99 %s ms%s%s", round, o.rounds, s.Config.Name, bodyLabel(s.Size, s.Config.List),
			smp.RPS(), millis(ms(smp.P50())), millis(ms(smp.P99())), redisFigures(smp), errorNote(smp))
		if err := b.alive(s.Config); err != nil {
			return err
		}
	}
	if err := b.pacedRound(round); err != nil {
		return err
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

// pacedRound measures the paced client through each of pacedConfigs, at
// each of its sizes, when it is selected.
func (b *bench) pacedRound(round int) error {
	if !b.sel.Paced {
		return nil
	}
	if b.paced == nil {
		b.paced = map[pacedKey][]*pacedSample{}
	}
	o := b.o
	for _, size := range b.pacedSizes {
		for _, n := range pacedConfigs {
			if b.stop.Load() {
				return errInterrupted
			}
			s := measurePaced(b.caddies[n].Addr, body(size), o.pacedRate, o.pacedDuration, &b.stop)
			k := pacedKey{n, size}
			b.paced[k] = append(b.paced[k], s)
			log.Printf("round %d/%d %-17s %6s paced at %g Mbit/s: first byte p50 %s ms, end to end p50 %s ms, %d calls%s", round, o.rounds, n, sizeLabel(size), o.pacedRate,
				millis(ms(s.firstByte.percentile(0.5))), millis(ms(s.endToEnd.percentile(0.5))), s.calls, pacedErrors(s))
		}
	}
	return nil
}

func pacedErrors(s *pacedSample) string {
	if s.errors == 0 {
		return ""
	}
	return fmt.Sprintf("  %d errors, first: %s", s.errors, s.firstError)
}
