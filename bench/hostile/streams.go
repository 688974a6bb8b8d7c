package main

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"
)

// gatewayCode is in every event the gateway adds to a stream it thinks is
// missing responses; the upstream never sends it.
const gatewayCode = "HANDOFF_UPSTREAM_UNAVAILABLE"

// target is a place to send a scenario's request: a Caddy, or the upstream
// itself ("direct").
type target struct {
	name, addr string
	p          *caddyProcess
}

// targets starts a Caddy with mcpBlock and a plain reverse_proxy, and adds
// the upstream itself when direct.
func (r *run) targets(mcpBlock string, direct bool) ([]target, error) {
	var ts []target
	if direct {
		ts = append(ts, target{name: "direct", addr: r.up.Addr})
	}
	for _, block := range []string{"", mcpBlock} {
		p, err := r.caddy(block)
		if err != nil {
			return nil, err
		}
		ts = append(ts, target{name: p.Name, addr: p.Addr, p: p})
	}
	return ts, nil
}

// cpu is the Caddy's CPU time now, 0 for direct.
func (t target) cpu() time.Duration {
	if t.p == nil {
		return 0
	}
	d, _ := t.p.cpuTime()
	return d
}

// cpuSince is the Caddy's CPU time since before, which /proc counts in
// ticks of 10 ms.
func (t target) cpuSince(before time.Duration) string {
	if t.p == nil {
		return "—"
	}
	if d := t.cpu() - before; d > 0 {
		return seconds(d)
	}
	return "< 10 ms"
}

// quadraticSSE answers a wide batch of calls over SSE in reverse order: a
// gateway that looks each response up among the pending requests in order
// does work quadratic in the batch.
func quadraticSSE(r *run) (*section, error) {
	sizes := []int{4000, 8000}
	if r.quick {
		sizes = []int{1000, 2000}
	}
	mcpBlock := "mcp {\n\tmax_request_body 16MiB\n}"
	if knows(r.bin, "max_batch 10000") {
		// A build that bounds batches (default 16) is told to take these.
		mcpBlock = "mcp {\n\tmax_request_body 16MiB\n\tmax_batch 10000\n}"
	}
	sec := &section{Name: "quadratic-sse", What: "A batch of N tools/call requests (ids 1…N) to an upstream that answers with a " +
		"`text/event-stream` of N `event: message` events, one response each, in reverse order of ids, then ends the stream " +
		"cleanly. The mcp block is `" + strings.Join(strings.Fields(mcpBlock), " ") + "`. Gateway events are those carrying " +
		"`" + gatewayCode + "`: the gateway's own answers for responses it believes missing."}
	ts, err := r.targets(mcpBlock, true)
	if err != nil {
		return sec, err
	}
	client := newHTTPClient(5 * time.Minute)
	t := table{Header: []string{"batch", "target", "status", "wall", "Caddy CPU", "events received", "upstream's", "gateway's"}}
	for _, n := range sizes {
		var b bytes.Buffer
		b.WriteByte('[')
		for i := 1; i <= n; i++ {
			if i > 1 {
				b.WriteByte(',')
			}
			b.Write(toolsCall(fmt.Sprint(i), "echo"))
		}
		b.WriteByte(']')
		for _, tg := range ts {
			cpu := tg.cpu()
			resp, err := post(r.ctx, client, "http://"+tg.addr+pathReverse, b.Bytes(), nil)
			if err != nil {
				t.add(fmt.Sprint(n), tg.name, "error", "—", tg.cpuSince(cpu), "—", "—", code(cut(err.Error(), 200)))
				continue
			}
			e := countEvents(resp.body)
			t.add(fmt.Sprint(n), tg.name, fmt.Sprint(resp.status), seconds(resp.wall), tg.cpuSince(cpu),
				fmt.Sprint(e.total), fmt.Sprint(e.upstream), fmt.Sprint(e.gateway))
		}
	}
	sec.Tables = append(sec.Tables, t)
	return sec, aliveAll(ts)
}

func aliveAll(ts []target) error {
	var errs []error
	for _, t := range ts {
		if t.p != nil {
			errs = append(errs, t.p.Alive())
		}
	}
	return errors.Join(errs...)
}

// longID sends a call whose id is a number of millions of digits, which the
// upstream answers with the id spelled 1, as a server that parses ids as
// floats does: a gateway comparing the two as exact numbers does a lot of
// arithmetic, and finds them different.
func longID(r *run) (*section, error) {
	digits := 3_000_000
	if r.quick {
		digits = 1_000_000
	}
	id := "1." + strings.Repeat("0", digits-2) + "1"
	sec := &section{Name: "long-id", What: fmt.Sprintf("One tools/call whose id is `1.000…0001` (%s digits, a %s body), "+
		"answered over SSE with one event whose id is re-spelled `1`, then the end of the stream. The mcp block is `mcp` (defaults).",
		thousands(digits), mib(uint64(len(toolsCall(id, "echo")))))}
	ts, err := r.targets("mcp", false)
	if err != nil {
		return sec, err
	}
	client := newHTTPClient(5 * time.Minute)
	t := table{Header: []string{"target", "status", "wall", "Caddy CPU", "events received", "upstream's answer", "gateway events", "a gateway event after the real answer"}}
	for _, tg := range ts {
		cpu := tg.cpu()
		resp, err := post(r.ctx, client, "http://"+tg.addr+pathFloatID, toolsCall(id, "echo"), nil)
		if err != nil {
			t.add(tg.name, "error", "—", tg.cpuSince(cpu), "—", "—", "—", code(cut(err.Error(), 200)))
			continue
		}
		e := countEvents(resp.body)
		t.add(tg.name, fmt.Sprint(resp.status), seconds(resp.wall), tg.cpuSince(cpu), fmt.Sprint(e.total),
			yesNo(e.upstream > 0), fmt.Sprint(e.gateway), yesNo(e.gatewayAfterUpstream))
	}
	sec.Tables = append(sec.Tables, t)
	gatewayLog(r, sec, ts)
	return sec, aliveAll(ts)
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// gatewayLog notes the mcp Caddy's envelope count and log lines: a false
// envelope shows there even when the client cannot read it.
func gatewayLog(r *run, sec *section, ts []target) {
	for _, tg := range ts {
		if tg.p == nil || tg.name != "mcp" {
			continue
		}
		lines, err := tg.p.metricLines(r.ctx, "caddy_mcp_envelopes_total{")
		if err != nil {
			sec.note("mcp: /metrics: %v", err)
		} else if len(lines) == 0 {
			sec.note("mcp: no `caddy_mcp_envelopes_total` series (no envelope counted)")
		}
		for _, l := range lines {
			sec.note("mcp metric: %s", code(l))
		}
		logged := tg.p.logLines(`"logger":"http.handlers.mcp"`, 400)
		if len(logged) == 0 {
			sec.note("mcp: no log line from `http.handlers.mcp`")
		}
		for _, l := range logged {
			sec.note("mcp log: %s", code(l))
		}
	}
}

// gzipSSE answers with a compressed event stream: the gateway cannot read
// it, and must not add plain text to it.
func gzipSSE(r *run) (*section, error) {
	const id = "7"
	sec := &section{Name: "gzip-sse", What: "One tools/call (id " + id + ") sent with `Accept-Encoding: gzip`, to an upstream that " +
		"answers `Content-Type: text/event-stream`, `Content-Encoding: gzip`: one complete response event, compressed. " +
		"The client decompresses with Go's gzip reader (multistream, as by default). The upstream answers once as a stream " +
		"(headers flushed first, so chunked, as MCP servers do) and once with a Content-Length. The mcp block is `mcp` (defaults)."}
	ts, err := r.targets("mcp", false)
	if err != nil {
		return sec, err
	}
	client := newHTTPClient(time.Minute)
	want := expectedGzipSSE(id)
	t := table{Header: []string{"upstream's answer", "target", "status", "Content-Encoding", "bytes received", "gzip reader", "decompressed stream intact", "bytes after the gzip stream"}}
	for _, v := range []struct{ name, query string }{{"streamed (chunked)", ""}, {"with Content-Length", "?length"}} {
		for _, tg := range ts {
			resp, err := post(r.ctx, client, "http://"+tg.addr+pathGzip+v.query, toolsCall(id, "echo"), http.Header{"Accept-Encoding": {"gzip"}})
			if err != nil {
				t.add(v.name, tg.name, "error", "—", "—", code(cut(err.Error(), 200)), "—", "—")
				continue
			}
			plain, readErr := gunzip(resp.body, true)
			first, _ := gunzip(resp.body, false)
			reader := "ok"
			if readErr != nil {
				reader = code(readErr.Error())
			}
			trailing := "0"
			if rest := afterGzip(resp.body); len(rest) > 0 {
				trailing = fmt.Sprintf("%d: %s", len(rest), code(cut(string(rest), 120)))
			}
			t.add(v.name, tg.name, fmt.Sprint(resp.status), code(resp.header.Get("Content-Encoding")), fmt.Sprint(len(resp.body)), reader,
				yesNo(readErr == nil && string(plain) == want)+fmt.Sprintf(" (first gzip member: %s)", yesNo(string(first) == want)), trailing)
		}
	}
	sec.Tables = append(sec.Tables, t)
	gatewayLog(r, sec, ts)
	return sec, aliveAll(ts)
}

// gunzip decompresses b with Go's gzip reader: all its members when multi,
// as the reader does by default, or only the first.
func gunzip(b []byte, multi bool) ([]byte, error) {
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	zr.Multistream(multi)
	return io.ReadAll(zr)
}

// afterGzip is what follows the first gzip member of b.
func afterGzip(b []byte) []byte {
	br := bytes.NewReader(b) // an io.ByteReader: the gzip reader reads no further than it must
	zr, err := gzip.NewReader(br)
	if err != nil {
		return b
	}
	zr.Multistream(false)
	if _, err := io.Copy(io.Discard, zr); err != nil {
		return nil
	}
	return b[len(b)-br.Len():]
}

// oversizedCL declares a body one byte over the default 4 MiB limit and
// sends none of it: the answer needs no byte of the body.
func oversizedCL(r *run) (*section, error) {
	// Long enough to see Caddy's own read idle timeout (1 minute by
	// default in v2.11.9) end the wait.
	wait := 90 * time.Second
	if r.quick {
		wait = 15 * time.Second
	}
	const length = 4<<20 + 1
	sec := &section{Name: "oversized-cl", What: fmt.Sprintf("One POST /mcp declaring `Content-Length: %d` (the default "+
		"max_request_body is 4 MiB), headers only, no body byte. Time until the status line arrives (at most %s), and then "+
		"whether the server closes the connection (waiting up to 2 s). The mcp block is `mcp` (defaults).", length, wait)}
	ts, err := r.targets("mcp", false)
	if err != nil {
		return sec, err
	}
	t := table{Header: []string{"target", "status", "time to status line", "body bytes", "Connection header", "connection afterwards"}}
	// Both at once: the wait may be long.
	rows := make([][]string, len(ts))
	errs := make([]error, len(ts))
	var wg sync.WaitGroup
	for i, tg := range ts {
		wg.Go(func() { rows[i], errs[i] = oversizedOnce(r.ctx, tg.addr, length, wait) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return sec, err
	}
	for i, tg := range ts {
		t.add(append([]string{tg.name}, rows[i]...)...)
	}
	sec.Tables = append(sec.Tables, t)
	return sec, aliveAll(ts)
}

func oversizedOnce(ctx context.Context, addr string, length int, wait time.Duration) ([]string, error) {
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	defer context.AfterFunc(ctx, func() { c.Close() })()
	start := time.Now()
	head := fmt.Sprintf("POST /mcp HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\n"+
		"Accept: application/json, text/event-stream\r\nContent-Length: %d\r\n\r\n", addr, length)
	if _, err := io.WriteString(c, head); err != nil {
		return nil, err
	}
	_ = c.SetReadDeadline(start.Add(wait))
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return []string{"none", "none in " + wait.String(), "—", "—", "open (no answer)"}, nil
	}
	if err != nil {
		return []string{"none", "none: " + code(err.Error()) + " after " + seconds(time.Since(start)), "—", "—", "closed before an answer"}, nil
	}
	got := time.Since(start)
	_ = c.SetReadDeadline(time.Now().Add(2 * time.Second))
	body, bodyErr := io.ReadAll(resp.Body)
	resp.Body.Close()
	after := "open after 2 s"
	if bodyErr == nil {
		_, err = br.ReadByte()
	} else {
		err = bodyErr
	}
	switch {
	case errors.Is(err, io.EOF):
		after = "closed by the server"
	case errors.Is(err, os.ErrDeadlineExceeded):
	case err != nil:
		after = "error: " + err.Error()
	default:
		after = "the server sent more bytes"
	}
	// ReadResponse takes "close" out of the Connection header into Close.
	conn := "—"
	if resp.Close {
		conn = "close"
	}
	return []string{resp.Status, seconds(got), fmt.Sprint(len(body)), conn, after}, nil
}
