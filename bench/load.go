package main

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"
)

// target is what one measurement sends requests to, and how it recognises a
// good answer.
type target struct {
	// addr is host:port on loopback.
	addr string
	path string
	body []byte
	// keys is how many distinct X-Client header values the clients cycle
	// through. Every request carries the header, so that all configurations
	// send the same bytes.
	keys int
	// headers are more header lines, each ending in CRLF, sent with every
	// request (a session's Mcp-Session-Id and MCP-Protocol-Version); ""
	// for none. They are written into the request once, when a client
	// starts, so that they cost nothing per request but their bytes.
	headers string
	// expect is held in the first checkBytes bytes of every good answer's
	// body (after decoding a chunked one), whose status is status (0: 200).
	expect string
	status int
	// firstEvent makes the latency recorded the time from the request's
	// first byte written to the end of the first server-sent event, instead
	// of the time to the end of the response.
	firstEvent bool
}

// checkBytes is how much of each answer's body is kept to check.
const checkBytes = 512

// sample is one measurement of one target.
type sample struct {
	// Requests are the good answers whose request started and ended within
	// the measured window.
	Requests uint64
	// Errors are the requests of the warm-up and the window that failed or
	// got an unexpected answer; FirstError describes the first.
	Errors     uint64
	FirstError string
	// Answered are all the good answers, of the warm-up and the window
	// and those across its ends.
	Answered uint64
	Window   time.Duration
	// CPU is the CPU time the Caddy process measured used over the
	// warm-up and the window (0 where the system does not tell).
	CPU time.Duration
	// Redis is what the measurement asked of the benchmark's Redis, for
	// the configurations that keep their buckets there.
	Redis *redisUse
	hist  histogram
}

// RPS is the throughput: good answers per second of the window.
func (s *sample) RPS() float64 { return float64(s.Requests) / s.Window.Seconds() }

func (s *sample) P50() time.Duration { return s.hist.percentile(0.50) }
func (s *sample) P99() time.Duration { return s.hist.percentile(0.99) }

// measure runs clients concurrent keep-alive HTTP/1.1 connections against t:
// a warm-up, whose answers are not counted, then a window of length dur. All
// clients start together; each sends a request as soon as it has its
// previous answer (a closed loop). stop ends the measurement early.
func measure(t *target, clients int, warmup, dur time.Duration, stop *atomic.Bool) *sample {
	start := time.Now()
	from, to := start.Add(warmup), start.Add(warmup+dur)
	// Each measurement starts somewhere else in the key space, so that the
	// rounds together touch all of it.
	offset := rand.IntN(max(t.keys, 1))
	results := make([]*sample, clients)
	var wg sync.WaitGroup
	for i := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := newClient(t, offset+i, clients)
			defer c.close()
			results[i] = c.run(from, to, stop)
		}()
	}
	wg.Wait()
	total := &sample{Window: dur}
	for _, r := range results {
		total.Requests += r.Requests
		total.Answered += r.Answered
		if total.Errors == 0 {
			total.FirstError = r.FirstError
		}
		total.Errors += r.Errors
		total.hist.merge(&r.hist)
	}
	return total
}

// touchKeys sends one request with each of t's keys, clients at a time, so
// that a rate limit keyed by them holds all their buckets. It returns the
// first error.
func touchKeys(t *target, clients int, stop *atomic.Bool) error {
	errs := make([]error, clients)
	var wg sync.WaitGroup
	for i := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := newClient(t, i, clients)
			defer c.close()
			for k := i; k < t.keys && !stop.Load(); k += clients {
				if err := c.do(); err != nil {
					errs[i] = fmt.Errorf("key %d: %w", k, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}
