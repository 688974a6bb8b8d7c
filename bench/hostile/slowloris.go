package main

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// slowBodyLength is what every slowloris connection declares: exactly the
// default max_request_body, so that it is accepted and not refused at once.
const slowBodyLength = 4 << 20

// slowloris holds N connections that declare a 4 MiB body and send it at one
// byte a second, against mcp and against a plain reverse_proxy (one Caddy
// each, all at once, so that the scenario takes one minute whatever N).
func slowloris(r *run) (*section, error) {
	sizes, heapAt, checks := []int{200, 500}, 5*time.Second, []time.Duration{30 * time.Second, 60 * time.Second}
	if r.quick {
		sizes, heapAt, checks = []int{200}, 3*time.Second, []time.Duration{10 * time.Second, 20 * time.Second}
	}
	sec := &section{Name: "slowloris", What: fmt.Sprintf("Each connection POSTs /mcp with `Content-Type: application/json` and "+
		"`Content-Length: %d`, sends the headers and one byte, then one byte a second. Heap before the connections, and "+
		"%s after all are open; connections still open (neither closed nor reset by the server) later.", slowBodyLength, heapAt)}
	var arms []*slowArm
	for _, n := range sizes {
		for _, block := range []string{"mcp", ""} {
			p, err := r.caddy(block)
			if err != nil {
				return sec, err
			}
			arms = append(arms, &slowArm{p: p, n: n})
		}
	}
	var wg sync.WaitGroup
	for _, a := range arms {
		wg.Go(func() { a.err = a.run(r, heapAt, checks) })
	}
	wg.Wait()
	t := table{Header: []string{"target", "conns", "HeapAlloc before", fmt.Sprintf("HeapAlloc at %.0f s: max / settled", heapAt.Seconds()),
		"live after GC", "Δ per conn: settled / live", fmt.Sprintf("HeapInuse before → at %.0f s", heapAt.Seconds())}}
	for _, c := range checks {
		t.Header = append(t.Header, fmt.Sprintf("open at %.0f s", c.Seconds()))
	}
	t.Header = append(t.Header, "answers received")
	for _, a := range arms {
		if a.err != nil {
			sec.note("%s with %d connections: %v", a.p.Name, a.n, a.err)
			continue
		}
		t.add(a.row()...)
	}
	sec.Tables = append(sec.Tables, t)
	return sec, nil
}

// slowArm is one Caddy under n slow connections, and what was read of it.
type slowArm struct {
	p              *caddyProcess
	n              int
	before, during heapReading
	open           []int
	answers        map[string]int
	err            error
}

// run reads the heap, opens the connections, reads the heap again heapAt
// later, then counts the connections still open at each check.
func (a *slowArm) run(r *run, heapAt time.Duration, checks []time.Duration) error {
	var err error
	if a.before, err = a.p.readHeap(r.ctx, 5, 200*time.Millisecond); err != nil {
		return err
	}
	conns, err := openSlow(a.p.Addr, a.n)
	defer conns.close()
	if err != nil {
		return err
	}
	t0 := time.Now()
	if err := sleep(r.ctx, heapAt-time.Second); err != nil {
		return err
	}
	if a.during, err = a.p.readHeap(r.ctx, 5, 200*time.Millisecond); err != nil {
		return err
	}
	for _, c := range checks {
		if err := sleep(r.ctx, time.Until(t0.Add(c))); err != nil {
			return err
		}
		a.open = append(a.open, conns.open())
	}
	a.answers = conns.answers()
	return a.p.Alive()
}

func (a *slowArm) row() []string {
	row := []string{a.p.Name, fmt.Sprint(a.n), mib(a.before.Settled.HeapAlloc),
		mib(a.during.Max.HeapAlloc) + " / " + mib(a.during.Settled.HeapAlloc),
		mib(a.during.Live.HeapAlloc),
		perEach(a.before.Settled.HeapAlloc, a.during.Settled.HeapAlloc, a.n) + " / " + perEach(a.before.Live.HeapAlloc, a.during.Live.HeapAlloc, a.n),
		mib(a.before.Settled.HeapInuse) + " → " + mib(a.during.Settled.HeapInuse)}
	for _, o := range a.open {
		row = append(row, fmt.Sprintf("%d / %d", o, a.n))
	}
	return append(row, countsOf(a.answers))
}

// slowConns are the connections of one slowloris arm.
type slowConns struct {
	conns []*slowConn
	stop  chan struct{}
	wg    sync.WaitGroup
}

type slowConn struct {
	net.Conn
	// closed: a read or write failed, so the server closed or reset it.
	closed atomic.Bool
	// status is the first line of anything the server answered.
	status atomic.Pointer[string]
}

// openSlow opens n connections to addr, each sending the headers and one
// byte at once, then one byte a second until close.
func openSlow(addr string, n int) (*slowConns, error) {
	s := &slowConns{stop: make(chan struct{})}
	head := fmt.Sprintf("POST /mcp HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\n"+
		"Accept: application/json, text/event-stream\r\nContent-Length: %d\r\n\r\n[", addr, slowBodyLength)
	for range n {
		nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			return s, fmt.Errorf("connection %d of %d: %w", len(s.conns)+1, n, err)
		}
		c := &slowConn{Conn: nc}
		s.conns = append(s.conns, c)
		if _, err := io.WriteString(c, head); err != nil {
			c.closed.Store(true)
			continue
		}
		s.wg.Go(func() { c.drip(s.stop) })
		s.wg.Go(c.watch)
	}
	return s, nil
}

// drip writes one byte of whitespace a second.
func (c *slowConn) drip(stop <-chan struct{}) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		_ = c.SetWriteDeadline(time.Now().Add(5 * time.Second))
		if _, err := c.Write([]byte{' '}); err != nil {
			c.closed.Store(true)
			return
		}
	}
}

// watch reads whatever the server sends until the connection ends.
func (c *slowConn) watch() {
	br := bufio.NewReader(c)
	line, err := br.ReadString('\n')
	if line != "" {
		s := strings.TrimSpace(line)
		c.status.Store(&s)
	}
	if err == nil {
		_, _ = io.Copy(io.Discard, br)
	}
	c.closed.Store(true)
}

func (s *slowConns) open() int {
	n := 0
	for _, c := range s.conns {
		if !c.closed.Load() {
			n++
		}
	}
	return n
}

// answers counts the first lines the server sent, "none" for silence.
func (s *slowConns) answers() map[string]int {
	m := map[string]int{}
	for _, c := range s.conns {
		if p := c.status.Load(); p != nil {
			m[*p]++
		} else {
			m["none"]++
		}
	}
	return m
}

func (s *slowConns) close() {
	close(s.stop)
	for _, c := range s.conns {
		_ = c.Close()
	}
	s.wg.Wait()
}

// countsOf writes a tally such as "200 OK ×8, 413 … ×1", in a stable order.
func countsOf(m map[string]int) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s ×%d", k, m[k]))
	}
	return strings.Join(parts, ", ")
}
