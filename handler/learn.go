package handler

import (
	"github.com/caddymcp/caddy-mcp/feature"
	"github.com/caddymcp/caddy-mcp/validate"
)

// contractAnswers is the contract's responder: it compares the tools of
// each tools/list answer, as the upstream wrote it, with the lockfile.
type contractAnswers struct {
	s     *contractState
	learn *validate.Feature
}

func (c contractAnswers) Open(x *feature.Exchange) feature.Hook {
	if l, ok := c.learn.ListingOf(x); ok {
		return &validate.Learner{Listing: l, Learn: func(l validate.Listing, result []byte) { c.s.learn(l.Key, result, l.First) }}
	}
	return nil
}

// contractCheck refuses a call to a tool whose contract broke, under
// on_breaking refuse; a batch holding one is refused whole.
type contractCheck struct{ h *Handler }

func (c contractCheck) Check(x *feature.Exchange) *feature.Refusal {
	for i := range x.Messages {
		m := &x.Messages[i]
		if !isCall(m) {
			continue
		}
		breaking, refused := c.h.refuseBroken(x, string(m.Name))
		switch {
		case !refused:
		case x.Batch || len(x.Messages) != 1:
			return &feature.Refusal{Envelope: contractBrokenInBatch(string(m.Name), breaking), Status: 200}
		default:
			return &feature.Refusal{Envelope: contractBroken(string(m.Name), breaking), Status: 200}
		}
	}
	return nil
}
