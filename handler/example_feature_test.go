package handler

import (
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/caddymcp/caddy-mcp/envelope"
	"github.com/caddymcp/caddy-mcp/feature"
	"github.com/caddymcp/caddy-mcp/internal/jsonrpc"
)

// An example of adding a feature: the smallest one that reads the
// upstream's answers. It counts the bytes of the result of each response.
// It only watches (its Needs has no Edit), so the core copies a JSON answer
// as it passes, up to the hook's Max, reads each message event of a
// stream, and sends the client the upstream's bytes unchanged. Plugging it
// in takes a Responder in Handler.responders (Provision appends each
// feature's; the test appends it after), and no change to the forward path.

// resultSize is the feature: its Responder opens a hook on each answer,
// and keeps it for the test to read (a server calls Open from many
// goroutines at once; this test serves one request at a time).
type resultSize struct{ opened []*resultBytes }

func (f *resultSize) Open(*feature.Exchange) feature.Hook {
	hook := &resultBytes{}
	f.opened = append(f.opened, hook)
	return hook
}

// resultBytes reads one answer.
type resultBytes struct {
	messages, bytes int
	ends            []feature.Ending
}

// Needs: a JSON answer of up to 1 KiB is read; none is edited.
func (*resultBytes) Needs() feature.Needs { return feature.Needs{Max: 1 << 10} }

func (c *resultBytes) Message(_ *feature.Exchange, msg []byte) ([]byte, error) {
	c.messages++
	if result, err := jsonrpc.Result(msg, nil); err == nil {
		c.bytes += result.End - result.Start // 0 for an error or a notification
	}
	return nil, nil // what a hook that watches returns is not used
}

// Unreadable is for hooks that fail closed; this one does not.
func (*resultBytes) Unreadable(*feature.Exchange, error) envelope.Envelope {
	return envelope.Envelope{}
}

func (c *resultBytes) End(_ *feature.Exchange, e feature.Ending) { c.ends = append(c.ends, e) }

func TestAFeatureThatWatchesCountsTheResultBytesOfEachResponse(t *testing.T) {
	asJSON := map[string]string{"Content-Type": "application/json"}
	result := `{"content":[{"type":"text","text":"42"}]}`
	response := `{"jsonrpc":"2.0","id":1,"result":` + result + `}`
	tests := []struct {
		name   string
		hdr    map[string]string
		answer string
		// messages is how many the hook was given; bytes, the results'.
		messages, bytes int
	}{
		{"a JSON answer", asJSON, response, 1, len(result)},
		{"an event stream, a progress notification first", eventStream,
			"event: message\ndata: " + progress + "\n\nevent: message\ndata: " + response + "\n\n", 2, len(result)},
		{"an error response", asJSON, `{"jsonrpc":"2.0","id":1,"error":{"code":-32602,"message":"bad"}}`, 1, 0},
		{"a JSON answer over the hook's Max is not seen", asJSON,
			`{"jsonrpc":"2.0","id":1,"result":{"pad":"` + strings.Repeat("x", 1<<10) + `"}}`, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := provision(t, &Handler{})
			feat := &resultSize{}
			h.responders = append(h.responders, feat)

			w := serve(t, h, post(callOne), answering(http.StatusOK, tt.hdr, tt.answer))

			assert.Equal(t, tt.answer, w.Body.String(), "the client gets the upstream's bytes")
			require.Len(t, feat.opened, 1, "one hook per answer")
			hook := feat.opened[0]
			assert.Equal(t, tt.messages, hook.messages, "messages given to the hook")
			assert.Equal(t, tt.bytes, hook.bytes, "bytes of the results")
			assert.Equal(t, []feature.Ending{feature.Complete}, hook.ends, "told once how the answer ended")
		})
	}
}
