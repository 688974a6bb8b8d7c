package mcptest

import (
	"fmt"
	"net/http"
	"net/http/httptrace"
	"sync/atomic"
)

// ResendingClient is an HTTP client for requests sent to a gateway after it
// reloaded (Gateway.Reload): a request the old config's server closed
// unanswered is sent again, as a client does.
//
// A reload shuts the old server down gracefully. Caddy binds a socket of
// its own to the port for each config (SO_REUSEPORT), and returns from the
// reload once the old server has begun to stop. Then Go's http.Server
//   - closes its idle keep-alive connections, which a client may have just
//     picked for its next request (the request then meets EOF or a reset);
//   - closes its socket, and the connections the kernel queued on it and
//     nobody accepted are reset ("connect: connection reset by peer");
//   - closes, without calling any handler, a connection on which it reads a
//     request after the shutdown began (net/http, conn.serve).
//
// Either way the client gets no byte of a response, and the request was
// never handled, so sending it again is safe. Go's transport does that by
// itself only for idempotent requests, and a POST is not one. So this
// client resends a request that got no response byte at all, at most a few
// times; anything else (an answer cut short, an error status, an envelope)
// is returned as it is, for the test to judge.
//
// Only requests that may race a reload use it: a gateway closing a
// connection unanswered at any other time is a failure a test must see.
func ResendingClient() *http.Client {
	return &http.Client{Transport: &ResendingTransport{}}
}

// ResendingTransport is ResendingClient's transport: wrap it to add to
// what it sends (an SDK client's headers, say). The zero value is ready to
// use.
type ResendingTransport struct {
	// Base sends each attempt; http.DefaultTransport if nil.
	Base http.RoundTripper
	// Resent counts the requests sent again.
	Resent atomic.Int64
}

// resendAttempts bounds the sends of one request.
const resendAttempts = 5

func (rt *ResendingTransport) base() http.RoundTripper {
	if rt.Base == nil {
		return http.DefaultTransport
	}
	return rt.Base
}

func (rt *ResendingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	replayable := req.Body == nil || req.Body == http.NoBody || req.GetBody != nil
	for attempt := 1; ; attempt++ {
		var reused, answered atomic.Bool
		r := req.WithContext(httptrace.WithClientTrace(req.Context(), &httptrace.ClientTrace{
			GotConn:              func(info httptrace.GotConnInfo) { reused.Store(info.Reused) },
			GotFirstResponseByte: func() { answered.Store(true) },
		}))
		if attempt > 1 && req.GetBody != nil {
			body, err := req.GetBody()
			if err != nil {
				return nil, err
			}
			r.Body = body
		}
		resp, err := rt.base().RoundTrip(r)
		if err == nil {
			return resp, nil
		}
		if !replayable || answered.Load() || req.Context().Err() != nil || attempt == resendAttempts {
			return nil, fmt.Errorf("%w (attempt %d, reused connection: %v, response started: %v)", err, attempt, reused.Load(), answered.Load())
		}
		rt.Resent.Add(1)
	}
}
