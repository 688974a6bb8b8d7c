package test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/caddymcp/caddy-mcp/test/mcptest"
	"github.com/caddymcp/caddy-mcp/test/wire"
)

// The raw HTTP client of the tests: post sends one JSON-RPC POST and fails
// the test if no answer comes, postAsync sends it from a goroutine and
// yields its outcome, send returns what happened for the caller to judge,
// and open returns the response before its body is read, for streams. Each
// sends what a client without a session would (Content-Type
// application/json, Accept application/json and text/event-stream), as
// changed by options.

// A sendOption changes what is sent, or how.
type sendOption func(*sendConfig)

type sendConfig struct {
	ctx    context.Context
	method string
	host   string
	header http.Header
	// given are the headers options gave.
	given  map[string]bool
	client *http.Client
	// chunked sends the body with no declared length.
	chunked bool
	// out receives postAsync's outcome.
	out chan string
}

// withHeader adds request headers, given as name, value pairs. A name's
// first value replaces its default (Content-Type and Accept have one; ""
// gives a header with an empty value), and a name given again, here or in
// another withHeader, is sent again, as a header given twice.
func withHeader(pairs ...string) sendOption {
	if len(pairs)%2 != 0 {
		panic(fmt.Sprintf("withHeader: a name without a value in %q", pairs))
	}
	return func(c *sendConfig) {
		for i := 0; i < len(pairs); i += 2 {
			name := http.CanonicalHeaderKey(pairs[i])
			if c.given[name] {
				c.header.Add(name, pairs[i+1])
				continue
			}
			c.header.Set(name, pairs[i+1])
			c.given[name] = true
		}
	}
}

// withoutHeader leaves headers out, default ones included.
func withoutHeader(names ...string) sendOption {
	return func(c *sendConfig) {
		for _, n := range names {
			c.header.Del(n)
		}
	}
}

// withMethod sends another method than POST.
func withMethod(method string) sendOption { return func(c *sendConfig) { c.method = method } }

// withHost sends another Host than the endpoint's, unless host is "".
func withHost(host string) sendOption { return func(c *sendConfig) { c.host = host } }

// withContext sends the request with ctx: cancelling it is the client
// leaving. By default post and postAsync send with t.Context().
func withContext(ctx context.Context) sendOption { return func(c *sendConfig) { c.ctx = ctx } }

// chunked sends the body with no declared length (chunked on HTTP/1.1).
func chunked(c *sendConfig) { c.chunked = true }

// withClient sends with client instead of http.DefaultClient.
func withClient(client *http.Client) sendOption { return func(c *sendConfig) { c.client = client } }

// afterReload sends with a client that resends a request the old server
// closed unanswered, as a client does after a reload
// (mcptest.ResendingClient).
func afterReload(t *testing.T) sendOption {
	return withClient(mcptest.ResendingClient())
}

// into makes postAsync send the outcome on out, which must have room for
// it, and return out.
func into(out chan string) sendOption { return func(c *sendConfig) { c.out = out } }

func newSendConfig(ctx context.Context, opts []sendOption) sendConfig {
	c := sendConfig{
		ctx:    ctx,
		method: http.MethodPost,
		header: http.Header{
			"Content-Type": {"application/json"},
			"Accept":       {"application/json, text/event-stream"},
		},
		given:  make(map[string]bool),
		client: http.DefaultClient,
	}
	for _, o := range opts {
		o(&c)
	}
	return c
}

// open sends body to endpoint and returns the response, its body unread.
func open(endpoint, body string, opts ...sendOption) (*http.Response, error) {
	return openWith(newSendConfig(context.Background(), opts), endpoint, body)
}

func openWith(c sendConfig, endpoint, body string) (*http.Response, error) {
	var r io.Reader = strings.NewReader(body)
	if c.chunked {
		r = io.MultiReader(r) // a reader whose length net/http cannot learn
	}
	req, err := http.NewRequestWithContext(c.ctx, c.method, endpoint, r)
	if err != nil {
		return nil, err
	}
	req.Header = c.header
	if c.host != "" {
		req.Host = c.host
	}
	return c.client.Do(req)
}

// send sends body to endpoint and returns the response and its body. When
// reading the body fails, the response and what was read come with the
// error.
func send(endpoint, body string, opts ...sendOption) (*http.Response, []byte, error) {
	return sendWith(newSendConfig(context.Background(), opts), endpoint, body)
}

func sendWith(c sendConfig, endpoint, body string) (*http.Response, []byte, error) {
	resp, err := openWith(c, endpoint, body)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp, b, err
}

// post sends body to endpoint and returns the response and its body; it
// fails the test if either does not come.
func post(t *testing.T, endpoint, body string, opts ...sendOption) (*http.Response, []byte) {
	t.Helper()
	resp, b, err := sendWith(newSendConfig(t.Context(), opts), endpoint, body)
	require.NoError(t, err)
	return resp, b
}

// postAsync sends body to endpoint from a goroutine; the returned channel
// yields the answer's outcome (see wire.Outcome), or what went wrong.
func postAsync(t *testing.T, endpoint, body string, opts ...sendOption) <-chan string {
	t.Helper()
	c := newSendConfig(t.Context(), opts)
	if c.out == nil {
		c.out = make(chan string, 1)
	}
	go func() {
		_, b, err := sendWith(c, endpoint, body)
		if err != nil {
			c.out <- err.Error()
			return
		}
		c.out <- wire.Outcome(b)
	}()
	return c.out
}

// receive is the next value of ch, which must come within 10 seconds.
func receive(t *testing.T, ch <-chan string) string {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(10 * time.Second):
		t.Fatal("no answer within 10s")
		return ""
	}
}
