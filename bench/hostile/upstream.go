package main

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"time"
)

// upstream is the MCP server behind every Caddy, served from this process on
// loopback. Each path is one behaviour a scenario needs; Caddy proxies every
// path unchanged, so the client picks the behaviour with the URL. It has no
// read timeouts: a connection cut during a scenario is always Caddy's doing.
type upstream struct {
	Addr string
	srv  *http.Server
}

// The upstream's paths.
const (
	// pathEcho reads the whole body and answers a tools/call result with
	// the request's id, as application/json.
	pathEcho = "/mcp"
	// pathBatch reads the whole body and answers one short JSON-RPC error:
	// what a server does with a batch it will not run matters little here,
	// only what the proxy in front of it holds.
	pathBatch = "/batch"
	// pathReverse answers a batch of requests with one event each, in the
	// reverse order of the batch, then ends the stream cleanly.
	pathReverse = "/reverse-sse"
	// pathFloatID answers as a server that parses ids as floats: one event
	// with the response, its id re-spelled 1.
	pathFloatID = "/float-id-sse"
	// pathGzip answers with a gzip-compressed event stream holding one
	// complete response event; with ?length, with a Content-Length.
	pathGzip = "/gzip-sse"
)

// upstreamText is in every result the upstream sends, so that a client can
// tell the server's answers from the gateway's.
const upstreamText = "upstream-ok"

func result(id json.RawMessage) string {
	if len(id) == 0 {
		id = json.RawMessage("null")
	}
	return `{"jsonrpc":"2.0","id":` + string(id) + `,"result":{"content":[{"type":"text","text":"` + upstreamText + `"}]}}`
}

func event(data string) string { return "event: message\ndata: " + data + "\n\n" }

// startUpstream serves the upstream on a free loopback port.
func startUpstream() (*upstream, error) {
	mux := http.NewServeMux()
	mux.HandleFunc(pathEcho, serveEcho)
	mux.HandleFunc(pathBatch, serveBatch)
	mux.HandleFunc(pathReverse, serveReversed)
	mux.HandleFunc(pathFloatID, serveFloatID)
	mux.HandleFunc(pathGzip, serveGzip)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	u := &upstream{Addr: ln.Addr().String(), srv: &http.Server{Handler: mux, ReadHeaderTimeout: time.Minute}}
	go func() {
		if err := u.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Printf("upstream: %v", err)
		}
	}()
	return u, nil
}

// serveEcho answers the request's id with a short result, as JSON.
func serveEcho(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return // the client (Caddy) went away: nobody to answer
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = io.WriteString(w, result(idOf(body)))
}

// serveBatch reads the whole body and answers one short error.
func serveBatch(w http.ResponseWriter, r *http.Request) {
	n, err := io.Copy(io.Discard, r.Body)
	if err != nil {
		return
	}
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"upstream read a batch of %d bytes and ran none of it"}}`, n)
}

// serveReversed answers a batch as an event stream, one event per request,
// last request first.
func serveReversed(w http.ResponseWriter, r *http.Request) {
	var batch []struct {
		ID json.RawMessage `json:"id"`
	}
	if err := json.NewDecoder(r.Body).Decode(&batch); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	startStream(w)
	bw := bufio.NewWriterSize(w, 64<<10)
	for i := len(batch) - 1; i >= 0; i-- {
		_, _ = bw.WriteString(event(result(batch[i].ID)))
	}
	_ = bw.Flush()
}

// serveFloatID answers any request with one event whose id is the number 1.
func serveFloatID(w http.ResponseWriter, r *http.Request) {
	if _, err := io.Copy(io.Discard, r.Body); err != nil {
		return
	}
	startStream(w)
	_, _ = io.WriteString(w, event(result(json.RawMessage("1"))))
}

// serveGzip answers one event, gzipped; with ?length, as a body of known
// length rather than a stream.
func serveGzip(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return
	}
	var z bytes.Buffer
	zw := gzip.NewWriter(&z)
	_, _ = io.WriteString(zw, event(result(idOf(body))))
	_ = zw.Close()
	w.Header().Set("Content-Encoding", "gzip")
	if r.URL.Query().Has("length") {
		w.Header().Set("Content-Type", "text/event-stream")
		w.Header().Set("Content-Length", fmt.Sprint(z.Len()))
	} else {
		startStream(w)
	}
	_, _ = w.Write(z.Bytes())
}

func (u *upstream) stop() { _ = u.srv.Close() }

// startStream sends the headers of an event stream at once, as MCP servers
// do: the answer is then chunked, with no Content-Length, so that whatever
// a proxy appends to it reaches the client. (Go's server gives a short
// answer written in one go a Content-Length, which would cut off any byte a
// proxy adds.)
func startStream(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	_ = http.NewResponseController(w).Flush()
}

// idOf is the id of a single JSON-RPC message, or nil.
func idOf(body []byte) json.RawMessage {
	var m struct {
		ID json.RawMessage `json:"id"`
	}
	_ = json.Unmarshal(body, &m)
	return m.ID
}

// expectedGzipSSE is what the upstream's gzip stream decompresses to, for
// a request with this id.
func expectedGzipSSE(id string) string { return event(result(json.RawMessage(id))) }
