package results

import (
	"encoding/json"
	"errors"
	"strconv"

	"github.com/caddymcp/caddy-mcp/envelope"
	"github.com/caddymcp/caddy-mcp/internal/jsonrpc"
)

// close is what the cut makes of the response: the result cut to fit, or
// errOverBudget when it cannot be cut.
func (c *cut) close() ([]byte, error) {
	over := errOverBudget{size: c.n}
	if errors.Is(c.sc.err, errTooLong) {
		over.size = 0 // more than the budget: how much more is not known
	}
	if c.sc.err != nil || !c.done || !c.result || !c.content || c.long || !sameID(c.id, c.h.id) || c.structured {
		return nil, over
	}
	text := c.cutText()
	if c.keptBlocks == 0 && text == nil {
		return nil, over // nothing of it fits
	}
	dropped := c.blocks - c.keptBlocks
	if text != nil {
		dropped--
	}
	kept := c.kept - c.from + len(text)
	out := c.h.appendHead(make([]byte, 0, c.h.budget), c.truncated(kept, dropped))
	out = append(out, c.head[c.from:c.kept]...)
	if text != nil {
		if c.keptBlocks > 0 {
			out = append(out, ',')
		}
		out = append(append(append(out, `{"type":"text","text":"`...), text...), `"}`...)
	}
	out = append(out, `],"isError":`...)
	out = strconv.AppendBool(out, c.isError == 't')
	out = append(out, "}}"...)
	if len(out) > c.h.budget || !json.Valid(out) {
		return nil, over
	}
	return out, nil
}

// cutText is what fits of the candidate's text, as written: nil when the
// candidate is no text block, or none of its text fits.
func (c *cut) cutText() []byte {
	b := c.candidate
	if !c.stopped || b.odd || string(b.typ) != "text" || b.textFrom < 0 || b.textFrom >= len(c.head) {
		return nil
	}
	end := len(c.head)
	if b.textTo >= 0 {
		end = min(end, b.textTo)
	}
	room := c.limit - (c.kept - c.from) - len(`,{"type":"text","text":""}`)
	n := fits(c.head[b.textFrom:end], room)
	if n == 0 {
		return nil
	}
	return c.head[b.textFrom : b.textFrom+n]
}

// sameID reports whether the response's id, as written, may answer the
// request's (jsonrpc.MayAnswer): a cut result carries the request's own.
func sameID(got, want []byte) bool {
	return jsonrpc.MayAnswer(want, got)
}

// truncated is the warning that comes first in a cut result.
func (c *cut) truncated(kept, dropped int) envelope.Envelope {
	return truncated(c.h.tool, c.n, kept, dropped, c.h.budget, c.h.paging)
}
