package handler

import (
	"errors"
	"net/http"
	"strconv"
	"testing"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp/reverseproxy"
	"github.com/stretchr/testify/assert"

	"github.com/caddymcp/caddy-mcp/feature"
)

// A hook that watches is given the messages of the answer, and nothing
// else: a JSON answer it reads (a 200's), or the message events of a
// stream, never an empty message for an answer it does not read. It is
// told once how the answer ended: replaced, when the gateway answered in
// the upstream's place.
func TestAWatchingHookIsGivenOnlyTheAnswersMessages(t *testing.T) {
	refused := caddyhttp.Error(http.StatusBadGateway, reverseproxy.NewDialError(errors.New("connect: connection refused")))
	asJSON := map[string]string{"Content-Type": "application/json"}
	tests := []struct {
		name   string
		next   caddyhttp.Handler
		want   []string
		ending feature.Ending
	}{
		{"a JSON answer", answering(http.StatusOK, asJSON, resultOne), []string{resultOne}, feature.Complete},
		{"a JSON answer of declared length", answering(http.StatusOK, map[string]string{"Content-Length": strconv.Itoa(len(resultOne))}, resultOne), []string{resultOne}, feature.Complete},
		{"an event stream: its message events", answering(http.StatusOK, eventStream, "data: "+progress+"\n\n: keep-alive\n\ndata: "+resultOne+"\n\n"),
			[]string{progress, resultOne}, feature.Complete},
		{"an event stream that ends owing its response", answering(http.StatusOK, eventStream, ": keep-alive\n\n"), nil, feature.Replaced},
		{"a compressed answer", answering(http.StatusOK, map[string]string{"Content-Encoding": "gzip"}, "\x1f\x8b"), nil, feature.Complete},
		{"an answer with no body", answering(http.StatusAccepted, nil), nil, feature.Complete},
		{"the upstream's JSON-RPC error under a 500", answering(http.StatusInternalServerError, asJSON, `{"jsonrpc":"2.0","id":1,"error":{"code":-32603,"message":"down"}}`), nil, feature.Complete},
		{"an error page the gateway answers for", answering(http.StatusBadGateway, map[string]string{"Content-Type": "text/html"}, "<h1>Bad Gateway</h1>"), nil, feature.Replaced},
		{"no answer: the upstream refused the connection", caddyhttp.HandlerFunc(func(http.ResponseWriter, *http.Request) error { return refused }), nil, feature.Replaced},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := provision(t, &Handler{})
			var seen []string
			var ends []feature.Ending
			h.responders = append(h.responders, hookOpener{Hook: &recordingHook{Asks: feature.Needs{Max: 1 << 10}, Seen: &seen}, Ends: &ends})
			_, _ = serveErr(t, h, post(callOne), tt.next)
			assert.Equal(t, tt.want, seen)
			assert.Equal(t, []feature.Ending{tt.ending}, ends, "told once how the answer ended")
		})
	}
}
