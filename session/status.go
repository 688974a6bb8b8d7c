package session

import "github.com/caddymcp/caddy-mcp/feature"

// Status is the sessions in the status view.
type Status struct {
	// Keys is where the keys come from: "secrets" or "storage".
	Keys string `json:"keys"`
	// KeysHeld is how many keys open tokens.
	KeysHeld int `json:"keys_held"`
	// SealingKey is the id of the key that seals new tokens (hex, as in
	// every token it seals), not the key.
	SealingKey string `json:"sealing_key"`
	TTL        string `json:"ttl"`
	// Bound: a session works only for the principal that opened it.
	Bound bool `json:"bound"`
	// Reopened is how many sessions this handler reopened upstream on
	// this node, and sends to their new upstream session, now.
	Reopened int `json:"reopened"`
}

// Status is the sessions as they stand.
func (p *Pins) Status() *Status {
	ring := p.ring()
	return &Status{
		Keys:       p.source,
		KeysHeld:   ring.Len(),
		SealingKey: ring.SealingID(),
		TTL:        feature.Window(p.ttl),
		Bound:      p.bind != nil,
		Reopened:   p.remap.len(p.now()),
	}
}
