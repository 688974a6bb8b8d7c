package main

import (
	"bytes"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"
)

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
				row, err := widePeak(r, p, client, body.name, body.b, n)
				if err != nil {
					return sec, err
				}
				t.add(row...)
			}
		}
		if err := p.Alive(); err != nil {
			return sec, err
		}
		p.Stop()
	}
	sec.Tables = append(sec.Tables, t)
	return sec, nil
}

// widePeak sends body n times at once to p and is the table row of the
// heap's peak rise while they are in flight.
func widePeak(r *run, p *caddyProcess, client *http.Client, name string, body []byte, n int) ([]string, error) {
	base, err := p.liveMem(r.ctx)
	if err != nil {
		return nil, err
	}
	s := p.samplePeak(r.ctx, 20*time.Millisecond)
	start := time.Now()
	answers := make([]string, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			resp, err := post(r.ctx, client, "http://"+p.Addr+pathBatch, body, nil)
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
		return nil, err
	}
	inFlight := uint64(n * len(body))
	tally := map[string]int{}
	for _, a := range answers {
		tally[a]++
	}
	return []string{p.Name, name, fmt.Sprint(n), mib(base.HeapAlloc), deltaMiB(base.HeapAlloc, peak.HeapAlloc),
		fmt.Sprintf("%.1f", (float64(peak.HeapAlloc)-float64(base.HeapAlloc))/float64(inFlight)),
		deltaMiB(base.HeapInuse, peak.HeapInuse), seconds(wall), fmt.Sprint(samples), countsOf(tally)}, nil
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
			row, err := keysHeld(r, p, n, w.request)
			if err != nil {
				return sec, err
			}
			t.add(append([]string{w.name}, row...)...)
			if err := p.Alive(); err != nil {
				return sec, err
			}
			p.Stop()
		}
	}
	sec.Tables = append(sec.Tables, t)
	return sec, nil
}

// keysHeld sends n calls, one after another, each with the key request(i)
// carries, and is the table row of what p's heap kept of them.
func keysHeld(r *run, p *caddyProcess, n int, request func(i int) ([]byte, http.Header)) ([]string, error) {
	before, err := p.readHeap(r.ctx, 3, 200*time.Millisecond)
	if err != nil {
		return nil, err
	}
	client := newHTTPClient(time.Minute)
	up, gw := 0, 0
	for i := range n {
		body, hdr := request(i)
		resp, err := post(r.ctx, client, "http://"+p.Addr+pathEcho, body, hdr)
		if err != nil {
			return nil, fmt.Errorf("%s, request %d: %w", p.Name, i, err)
		}
		if bytes.Contains(resp.body, []byte(upstreamText)) {
			up++
		} else {
			gw++
		}
	}
	client.CloseIdleConnections()
	if err := sleep(r.ctx, 2*time.Second); err != nil {
		return nil, err
	}
	after, err := p.readHeap(r.ctx, 5, 200*time.Millisecond)
	if err != nil {
		return nil, err
	}
	buckets := "—"
	if lines, err := p.metricLines(r.ctx, "caddy_mcp_ratelimit_buckets{"); err == nil && len(lines) > 0 {
		buckets = code(strings.Join(lines, "; "))
	}
	return []string{p.Name, fmt.Sprintf("%d / %d", up, gw), mib(before.Live.HeapAlloc),
		deltaMiB(before.Settled.HeapAlloc, after.Settled.HeapAlloc), deltaMiB(before.Live.HeapAlloc, after.Live.HeapAlloc),
		perEach(before.Live.HeapAlloc, after.Live.HeapAlloc, n), buckets}, nil
}

// toolsCall is a tools/call request with this id (JSON text) and tool name.
func toolsCall(id, name string) []byte {
	return []byte(`{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":{"name":"` + name + `","arguments":{}}}`)
}
