package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"time"
)

// newHTTPClient is a client of its own per scenario: HTTP/1.1, no proxy, and
// bodies left as they arrive (no transparent gzip).
func newHTTPClient(timeout time.Duration) *http.Client {
	return &http.Client{Timeout: timeout, Transport: &http.Transport{Proxy: nil, DisableCompression: true, MaxIdleConnsPerHost: 16}}
}

// answer is one response, read to its end.
type answer struct {
	status int
	header http.Header
	body   []byte
	wall   time.Duration
}

// post sends body as an MCP client does (JSON, accepting JSON or an event
// stream) and reads the whole answer.
func post(ctx context.Context, c *http.Client, url string, body []byte, hdr http.Header) (*answer, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	for k, v := range hdr {
		req.Header[k] = v
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	start := time.Now()
	resp, err := c.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("reading the answer (status %d, %d bytes in): %w", resp.StatusCode, len(b), err)
	}
	return &answer{status: resp.StatusCode, header: resp.Header, body: b, wall: time.Since(start)}, nil
}

// events is what a client made of an event stream: the message events in
// order, each marked as the upstream's or the gateway's.
type events struct {
	total, upstream, gateway int
	// gatewayAfterUpstream: a gateway event came after an upstream one.
	gatewayAfterUpstream bool
}

func countEvents(body []byte) events {
	var e events
	var data []byte
	dispatch := func() {
		if len(data) == 0 {
			return
		}
		e.total++
		switch {
		case bytes.Contains(data, []byte(gatewayCode)):
			e.gateway++
			e.gatewayAfterUpstream = e.gatewayAfterUpstream || e.upstream > 0
		case bytes.Contains(data, []byte(upstreamText)):
			e.upstream++
		}
		data = data[:0]
	}
	for _, line := range bytes.Split(body, []byte("\n")) {
		line = bytes.TrimSuffix(line, []byte("\r"))
		if len(line) == 0 {
			dispatch()
		} else if d, ok := bytes.CutPrefix(line, []byte("data:")); ok {
			data = append(data, d...)
		}
	}
	dispatch()
	return e
}
