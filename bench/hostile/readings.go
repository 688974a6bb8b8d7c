package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// memStats are the runtime.MemStats fields the report uses, as Caddy's
// admin endpoint publishes them in /debug/vars (expvar).
type memStats struct {
	HeapAlloc, HeapInuse, Sys uint64
	NumGC                     uint32
}

// mem reads the Caddy process's heap figures now.
func (p *caddyProcess) mem(ctx context.Context) (memStats, error) {
	b, err := p.adminGet(ctx, "/debug/vars")
	if err != nil {
		return memStats{}, err
	}
	var v struct {
		Memstats memStats `json:"memstats"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return memStats{}, fmt.Errorf("/debug/vars: %w", err)
	}
	return v.Memstats, nil
}

// liveMem forces a garbage collection in Caddy, then reads its heap: what
// the process holds on to, garbage aside. The admin endpoint's heap profile
// runs runtime.GC() first when asked with gc=1, which is the one way to
// force a collection from outside.
func (p *caddyProcess) liveMem(ctx context.Context) (memStats, error) {
	if _, err := p.adminGet(ctx, "/debug/pprof/heap?gc=1"); err != nil {
		return memStats{}, err
	}
	return p.mem(ctx)
}

// heapReading is the heap sampled a few times over a short while: the
// largest and the last sample (settled), and the live heap after a forced
// collection.
type heapReading struct {
	Max, Settled, Live memStats
}

// readHeap samples the heap n times, every apart, then forces a collection.
func (p *caddyProcess) readHeap(ctx context.Context, n int, every time.Duration) (heapReading, error) {
	var r heapReading
	for i := range n {
		if i > 0 {
			if err := sleep(ctx, every); err != nil {
				return r, err
			}
		}
		m, err := p.mem(ctx)
		if err != nil {
			return r, err
		}
		r.Max.HeapAlloc = max(r.Max.HeapAlloc, m.HeapAlloc)
		r.Max.HeapInuse = max(r.Max.HeapInuse, m.HeapInuse)
		r.Max.Sys = max(r.Max.Sys, m.Sys)
		r.Settled = m
	}
	var err error
	r.Live, err = p.liveMem(ctx)
	return r, err
}

// peakSampler reads the heap every interval while something is in flight,
// keeping the largest figures: a request's transient garbage never shows
// after it ends.
type peakSampler struct {
	peak    memStats
	samples int
	err     error
	stop    chan struct{}
	done    chan struct{}
}

func (p *caddyProcess) samplePeak(ctx context.Context, every time.Duration) *peakSampler {
	s := &peakSampler{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			m, err := p.mem(ctx)
			if err != nil {
				s.err = err
				return
			}
			s.samples++
			s.peak.HeapAlloc = max(s.peak.HeapAlloc, m.HeapAlloc)
			s.peak.HeapInuse = max(s.peak.HeapInuse, m.HeapInuse)
			s.peak.Sys = max(s.peak.Sys, m.Sys)
			select {
			case <-s.stop:
				return
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	return s
}

// finish stops the sampler and returns the peak.
func (s *peakSampler) finish() (memStats, int, error) {
	close(s.stop)
	<-s.done
	return s.peak, s.samples, s.err
}

// cpuTime is the user plus system CPU time the process has used, from
// /proc/PID/stat (Linux; clock ticks of 1/100 s).
func (p *caddyProcess) cpuTime() (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p.Pid()))
	if err != nil {
		return 0, err
	}
	// The command name, in parentheses, may hold spaces: count fields
	// after it. utime and stime are fields 14 and 15 of the line.
	stat := string(b)
	i := strings.LastIndexByte(stat, ')')
	var f []string
	if i >= 0 {
		f = strings.Fields(stat[i+1:])
	}
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: unexpected format", p.Pid())
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, err
	}
	return time.Duration(utime+stime) * (time.Second / 100), nil
}

// metricLines returns the lines of the admin /metrics holding prefix.
func (p *caddyProcess) metricLines(ctx context.Context, prefix string) ([]string, error) {
	b, err := p.adminGet(ctx, "/metrics")
	if err != nil {
		return nil, err
	}
	var lines []string
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, prefix) {
			lines = append(lines, l)
		}
	}
	return lines, nil
}
