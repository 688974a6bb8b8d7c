package answertest

import (
	"github.com/caddymcp/caddy-mcp/envelope"
	"github.com/caddymcp/caddy-mcp/feature"
)

// Hook is a feature's hook on an answer that records each message it is
// given (in Seen), then calls Then, and edits it with Edit (nil: it only
// watches).
type Hook struct {
	Asks feature.Needs
	Seen *[]string
	Then func()
	Edit func([]byte) []byte
}

func (h *Hook) Needs() feature.Needs { return h.Asks }

func (h *Hook) Message(_ *feature.Exchange, msg []byte) ([]byte, error) {
	*h.Seen = append(*h.Seen, string(msg))
	if h.Then != nil {
		h.Then()
	}
	if h.Edit == nil {
		return nil, nil
	}
	return h.Edit(msg), nil
}

func (*Hook) Unreadable(*feature.Exchange, error) envelope.Envelope {
	return envelope.Envelope{}
}

func (*Hook) End(*feature.Exchange, feature.Ending) {}

// Opener is a feature that opens the same hook on every answer, and
// records in Ends how each ended.
type Opener struct {
	Hook feature.Hook
	Ends *[]feature.Ending
}

func (o Opener) Open(*feature.Exchange) feature.Hook { return endRecorder{o.Hook, o.Ends} }

type endRecorder struct {
	feature.Hook
	ends *[]feature.Ending
}

func (e endRecorder) End(x *feature.Exchange, end feature.Ending) {
	*e.ends = append(*e.ends, end)
	e.Hook.End(x, end)
}
