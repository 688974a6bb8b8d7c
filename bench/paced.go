package main

import (
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"
)

// The paced client measures what streaming a large call buys: one client
// sends each call's body at a set rate, as a client on a slower link
// does, and the upstream says when the body's first byte reached it. Read
// whole, the upstream has nothing before the client has sent everything;
// streamed, it has the start at once. End to end, streaming saves what the
// gateway does once the last byte is in: validate the body and send it on.

// pacedMeasurement is the -configs name of the paced client.
const pacedMeasurement = "paced"

// pacedConfigs are the configurations the paced client goes through:
// reverse_proxy (which streams every body), the gateway reading every
// body whole, and streaming every call over 16 KiB.
var pacedConfigs = []string{cfgProxy, cfgMCPWhole, cfgMCPStreamed}

// Headers between the paced client and the responder: the request asks
// for the time its body's first byte reached the upstream, which the
// answer gives in Unix nanoseconds (the processes share the machine's
// clock).
const (
	pacedHeader     = "X-Bench-Paced"
	firstByteHeader = "X-Bench-First-Byte"
)

type pacedKey struct {
	config string
	size   int
}

// pacedSample is one measurement of the paced client.
type pacedSample struct {
	endToEnd, firstByte histogram
	calls, errors       uint64
	firstError          string
}

// pacedChunk is what the paced client writes at a time.
const pacedChunk = 4 << 10

// pacedBody is a request body that is read no faster than rate bytes a
// second from start.
type pacedBody struct {
	b     []byte
	off   int
	rate  float64
	start time.Time
}

func (p *pacedBody) Read(buf []byte) (int, error) {
	if p.off == len(p.b) {
		return 0, io.EOF
	}
	due := p.start.Add(time.Duration(float64(p.off) / p.rate * float64(time.Second)))
	if d := time.Until(due); d > 0 {
		time.Sleep(d)
	}
	n := copy(buf[:min(len(buf), pacedChunk)], p.b[p.off:])
	p.off += n
	return n, nil
}

// measurePaced sends calls one after another to addr for dur, each body
// paced at mbits Mbit/s, and records each call's time to the upstream's
// first byte and its time end to end.
func measurePaced(addr string, body []byte, mbits float64, dur time.Duration, stop *atomic.Bool) *pacedSample {
	tr := &http.Transport{MaxIdleConnsPerHost: 1, DisableCompression: true, WriteBufferSize: 1 << 10}
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: tr, Timeout: time.Minute}
	s := &pacedSample{}
	fail := func(err error) {
		if s.errors == 0 {
			s.firstError = err.Error()
		}
		s.errors++
	}
	for end := time.Now().Add(dur); time.Now().Before(end) && !stop.Load(); {
		t0 := time.Now()
		req, err := http.NewRequest(http.MethodPost, "http://"+addr+"/mcp", &pacedBody{b: body, rate: mbits * 1e6 / 8, start: t0})
		if err != nil {
			fail(err)
			return s
		}
		req.ContentLength = int64(len(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set(pacedHeader, "1")
		resp, err := c.Do(req)
		if err != nil {
			fail(err)
			time.Sleep(10 * time.Millisecond)
			continue
		}
		_, err = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		t1 := time.Now()
		at, perr := strconv.ParseInt(resp.Header.Get(firstByteHeader), 10, 64)
		switch {
		case err != nil:
			fail(err)
		case resp.StatusCode != http.StatusOK:
			fail(fmt.Errorf("status %d", resp.StatusCode))
		case perr != nil:
			fail(fmt.Errorf("no %s in the answer", firstByteHeader))
		default:
			s.calls++
			s.endToEnd.record(t1.Sub(t0))
			s.firstByte.record(time.Unix(0, at).Sub(t0))
		}
	}
	return s
}

// firstByteBody is a request body that notes when its first byte was
// read.
type firstByteBody struct {
	io.ReadCloser
	at time.Time
}

func (f *firstByteBody) Read(p []byte) (int, error) {
	n, err := f.ReadCloser.Read(p)
	if n > 0 && f.at.IsZero() {
		f.at = time.Now()
	}
	return n, err
}

// pacedRow is the paced client through one configuration, at one body
// size: medians over the rounds of each round's median [smallest–largest],
// in milliseconds.
type pacedRow struct {
	Config    string `json:"config"`
	Size      int    `json:"body_bytes"`
	FirstByte spread `json:"first_byte_p50_ms"`
	EndToEnd  spread `json:"end_to_end_p50_ms"`
	// OverProxy is the end-to-end p50 minus reverse_proxy's, round by
	// round.
	OverProxy *spread `json:"end_to_end_over_reverse_proxy_ms,omitempty"`
	Calls     uint64  `json:"calls"`
	Errors    uint64  `json:"errors"`
	// FirstError is the first failure, if any.
	FirstError string `json:"first_error,omitempty"`
}

// pacedRun is the paced client's measurements summarised.
type pacedRun struct {
	Mbits float64    `json:"mbit_per_s"`
	Rows  []pacedRow `json:"rows"`
}

func summarisePaced(samples map[pacedKey][]*pacedSample, sizes []int, mbits float64) *pacedRun {
	if len(samples) == 0 {
		return nil
	}
	run := &pacedRun{Mbits: mbits}
	for _, size := range sizes {
		proxy := samples[pacedKey{cfgProxy, size}]
		for _, n := range pacedConfigs {
			ss := samples[pacedKey{n, size}]
			row := pacedRow{Config: n, Size: size}
			var first, e2e, over []float64
			for i, s := range ss {
				row.Calls += s.calls
				row.Errors += s.errors
				if row.FirstError == "" {
					row.FirstError = s.firstError
				}
				if s.calls == 0 {
					continue
				}
				first = append(first, ms(s.firstByte.percentile(0.5)))
				e2e = append(e2e, ms(s.endToEnd.percentile(0.5)))
				if n != cfgProxy && i < len(proxy) && proxy[i].calls > 0 {
					over = append(over, e2e[len(e2e)-1]-ms(proxy[i].endToEnd.percentile(0.5)))
				}
			}
			row.FirstByte, row.EndToEnd, row.OverProxy = spreadOf(first), spreadOf(e2e), spreadOrNil(over)
			run.Rows = append(run.Rows, row)
		}
	}
	return run
}

// writePaced is the paced client's table, when it was measured.
func (r *report) writePaced(w io.Writer) {
	p := r.Paced
	if p == nil {
		return
	}
	fmt.Fprintf(w, "\nWhat streaming a large call buys: one client sends each call's body at %g Mbit/s, one call after another, through reverse_proxy (which streams every body), the gateway reading every body whole (mcp-whole), and the gateway streaming every call over 16 KiB (mcp-streamed). The time to the upstream's first byte is from the client's first byte sent to the upstream's first byte of body read; end to end, to the answer's last byte. Median over the rounds of each round's median [smallest–largest]; over reverse_proxy, round by round:\n\n", p.Mbits)
	fmt.Fprintln(w, "| config | body | upstream's first byte, p50 | end to end, p50 | end to end over reverse_proxy | calls | errors |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|")
	for _, row := range p.Rows {
		over := "–"
		if o := row.OverProxy; o != nil {
			over = fmt.Sprintf("%+.2f ms [%+.2f–%+.2f]", o.Median, o.Min, o.Max)
		}
		fmt.Fprintf(w, "| %s | %s | %s ms [%s–%s] | %s ms [%s–%s] | %s | %d | %d |\n", row.Config, sizeLabel(row.Size),
			millis(row.FirstByte.Median), millis(row.FirstByte.Min), millis(row.FirstByte.Max),
			millis(row.EndToEnd.Median), millis(row.EndToEnd.Min), millis(row.EndToEnd.Max), over, row.Calls, row.Errors)
	}
	for _, row := range p.Rows {
		if row.Errors > 0 {
			fmt.Fprintf(w, "\npaced, %s, %s: %d errors; the first: %s\n", row.Config, sizeLabel(row.Size), row.Errors, row.FirstError)
		}
	}
}
