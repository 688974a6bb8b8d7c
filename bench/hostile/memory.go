package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
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
	type arm struct {
		p              *caddyProcess
		n              int
		before, during heapReading
		open           []int
		answers        map[string]int
		err            error
	}
	var arms []*arm
	for _, n := range sizes {
		for _, block := range []string{"mcp", ""} {
			p, err := r.caddy(block)
			if err != nil {
				return sec, err
			}
			arms = append(arms, &arm{p: p, n: n})
		}
	}
	var wg sync.WaitGroup
	for _, a := range arms {
		wg.Go(func() {
			a.err = func() error {
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
				return a.p.alive()
			}()
		})
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
		row := []string{a.p.Name, fmt.Sprint(a.n), mib(a.before.Settled.HeapAlloc),
			mib(a.during.Max.HeapAlloc) + " / " + mib(a.during.Settled.HeapAlloc),
			mib(a.during.Live.HeapAlloc),
			perEach(a.before.Settled.HeapAlloc, a.during.Settled.HeapAlloc, a.n) + " / " + perEach(a.before.Live.HeapAlloc, a.during.Live.HeapAlloc, a.n),
			mib(a.before.Settled.HeapInuse) + " → " + mib(a.during.Settled.HeapInuse)}
		for _, o := range a.open {
			row = append(row, fmt.Sprintf("%d / %d", o, a.n))
		}
		t.add(append(row, countsOf(a.answers))...)
	}
	sec.Tables = append(sec.Tables, t)
	return sec, nil
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

// wideBatch sends batches of a million tiny elements: each is a message the
// gateway must account for, while its bytes are few.
func wideBatch(r *run) (*section, error) {
	numbers, nn := wide("1", 2<<20)
	objects, no := wide("{}", 3_879_731) // 3.7 MiB
	bodies := []struct {
		name string
		b    []byte
	}{
		{fmt.Sprintf("`[1,1,…]` %s, %s elements", mib(uint64(len(numbers))), thousands(nn)), numbers},
		{fmt.Sprintf("`[{},{},…]` %s, %s elements", mib(uint64(len(objects))), thousands(no)), objects},
	}
	const mcpBlock = "mcp {\n\tmax_request_body 8MiB\n\trate_limit l {\n\t\trate 1000000/1s\n\t}\n}"
	sec := &section{Name: "wide-batch", What: "One POST of each batch, then 8 at once, to a path whose upstream reads the body " +
		"and answers one short JSON-RPC error. The mcp block is\n\n```caddyfile\n" + mcpBlock + "\n```\n\n" +
		"Peak heap is sampled every 20 ms while the requests are in flight; the ratio is the peak's rise over the bytes in flight."}
	t := table{Header: []string{"target", "body", "at once", "live before", "peak HeapAlloc Δ", "× bytes in flight", "peak HeapInuse Δ", "wall", "samples", "answers (status, body bytes)"}}
	for _, block := range []string{mcpBlock, ""} {
		p, err := r.caddy(block)
		if err != nil {
			return sec, err
		}
		client := newHTTPClient(2 * time.Minute)
		for _, body := range bodies {
			for _, n := range []int{1, 8} {
				base, err := p.liveMem(r.ctx)
				if err != nil {
					return sec, err
				}
				s := p.samplePeak(r.ctx, 20*time.Millisecond)
				start := time.Now()
				answers := make([]string, n)
				var wg sync.WaitGroup
				for i := range n {
					wg.Go(func() {
						resp, err := post(r.ctx, client, "http://"+p.Addr+pathBatch, body.b, nil)
						if err != nil {
							answers[i] = "error: " + err.Error()
							return
						}
						answers[i] = fmt.Sprintf("%d, %d B", resp.status, len(resp.body))
					})
				}
				wg.Wait()
				wall := time.Since(start)
				_ = sleep(r.ctx, 100*time.Millisecond)
				peak, samples, err := s.finish()
				if err != nil {
					return sec, err
				}
				inFlight := uint64(n * len(body.b))
				tally := map[string]int{}
				for _, a := range answers {
					tally[a]++
				}
				t.add(p.Name, body.name, fmt.Sprint(n), mib(base.HeapAlloc), deltaMiB(base.HeapAlloc, peak.HeapAlloc),
					fmt.Sprintf("%.1f", (float64(peak.HeapAlloc)-float64(base.HeapAlloc))/float64(inFlight)),
					deltaMiB(base.HeapInuse, peak.HeapInuse), seconds(wall), fmt.Sprint(samples), countsOf(tally))
			}
		}
		if err := p.alive(); err != nil {
			return sec, err
		}
		p.stop()
	}
	sec.Tables = append(sec.Tables, t)
	return sec, nil
}

// wide is a JSON array of elem, repeated n times, as often as fits in size
// bytes.
func wide(elem string, size int) (_ []byte, n int) {
	n = (size - 1) / (len(elem) + 1)
	b := make([]byte, 0, size)
	b = append(b, '[')
	for i := range n {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, elem...)
	}
	return append(b, ']'), n
}

// longKeys makes rate-limit keys large: each distinct key is a bucket the
// limit keeps until it refills, an hour later.
func longKeys(r *run) (*section, error) {
	n := 100
	if r.quick {
		n = 20
	}
	const (
		toolBlock   = "mcp {\n\trate_limit t {\n\t\tkey {http.mcp.tool}\n\t\trate 1/1h\n\t}\n}"
		headerBlock = "mcp {\n\trate_limit h {\n\t\tkey {http.request.header.X-Key}\n\t\trate 1/1h\n\t}\n}"
	)
	sec := &section{Name: "long-keys", What: fmt.Sprintf("%d tools/call requests, one after another, each with a distinct key: "+
		"a 1 MiB tool name under\n\n```caddyfile\n%s\n```\n\nor a 15 KB `X-Key` header under\n\n```caddyfile\n%s\n```\n\n"+
		"Heap 3 s after the last answer, against the same process just before the requests.", n, toolBlock, headerBlock)}
	t := table{Header: []string{"key", "target", "answered by upstream / gateway", "live before", "settled Δ", "live Δ", "live Δ per key", "buckets (metric)"}}
	workloads := []struct {
		name, block string
		request     func(i int) ([]byte, http.Header)
	}{
		{"1 MiB tool name", toolBlock, func(i int) ([]byte, http.Header) {
			name := fmt.Sprintf("tool-%03d-", i)
			name += strings.Repeat("x", 1<<20-len(name))
			return toolsCall(fmt.Sprint(i), name), nil
		}},
		{"15 KB X-Key header", headerBlock, func(i int) ([]byte, http.Header) {
			key := fmt.Sprintf("key-%03d-", i)
			return toolsCall(fmt.Sprint(i), "echo"), http.Header{"X-Key": {key + strings.Repeat("k", 15_000-len(key))}}
		}},
	}
	for _, w := range workloads {
		for _, block := range []string{w.block, ""} {
			p, err := r.caddy(block)
			if err != nil {
				return sec, err
			}
			before, err := p.readHeap(r.ctx, 3, 200*time.Millisecond)
			if err != nil {
				return sec, err
			}
			client := newHTTPClient(time.Minute)
			up, gw := 0, 0
			for i := range n {
				body, hdr := w.request(i)
				resp, err := post(r.ctx, client, "http://"+p.Addr+pathEcho, body, hdr)
				if err != nil {
					return sec, fmt.Errorf("%s, request %d: %w", p.Name, i, err)
				}
				if bytes.Contains(resp.body, []byte(upstreamText)) {
					up++
				} else {
					gw++
				}
			}
			client.CloseIdleConnections()
			if err := sleep(r.ctx, 2*time.Second); err != nil {
				return sec, err
			}
			after, err := p.readHeap(r.ctx, 5, 200*time.Millisecond)
			if err != nil {
				return sec, err
			}
			buckets := "—"
			if block != "" {
				lines, err := p.metricLines(r.ctx, "caddy_mcp_ratelimit_buckets{")
				if err == nil {
					buckets = code(strings.Join(lines, "; "))
				}
			}
			t.add(w.name, p.Name, fmt.Sprintf("%d / %d", up, gw), mib(before.Live.HeapAlloc),
				deltaMiB(before.Settled.HeapAlloc, after.Settled.HeapAlloc), deltaMiB(before.Live.HeapAlloc, after.Live.HeapAlloc),
				perEach(before.Live.HeapAlloc, after.Live.HeapAlloc, n), buckets)
			if err := p.alive(); err != nil {
				return sec, err
			}
			p.stop()
		}
	}
	sec.Tables = append(sec.Tables, t)
	return sec, nil
}

// toolsCall is a tools/call request with this id (JSON text) and tool name.
func toolsCall(id, name string) []byte {
	return []byte(`{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":{"name":"` + name + `","arguments":{}}}`)
}
