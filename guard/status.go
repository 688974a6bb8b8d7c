package guard

import (
	"slices"
	"time"

	"github.com/caddymcp/caddy-mcp/busy"
	"github.com/caddymcp/caddy-mcp/feature"
	"github.com/caddymcp/caddy-mcp/keys"
)

// Status is a guard's settings and load, as the admin API's /mcp/status
// shows them.
type Status struct {
	Name         string   `json:"name"`
	Key          string   `json:"key,omitempty"`
	Max          int      `json:"max"`
	Queue        int      `json:"queue"`
	QueueTimeout string   `json:"queue_timeout"`
	CancelGrace  string   `json:"cancel_grace"`
	Methods      []string `json:"methods"`
	// Active and Queued are summed over the guard's keys.
	Active int `json:"active"`
	Queued int `json:"queued"`
	// Keys are the busiest keyed guards (at most MaxStatusKeys), with the
	// recent average time a place was held; a guard without a key is the
	// key "".
	Keys []KeyStatus `json:"keys"`
}

// KeyStatus is one key's guard. Key is the key's value with log_key, and
// otherwise "sha256:" and the first 16 hex digits of its SHA-256 (the
// value may be a secret, such as a token).
type KeyStatus struct {
	Key           string `json:"key"`
	Active        int    `json:"active"`
	Queued        int    `json:"queued"`
	RecentService string `json:"recent_service"`
}

// MaxStatusKeys bounds the keyed guards a status lists.
const MaxStatusKeys = 100

// Status is the guard as it stands; showKeys shows keys as they are
// (log_key).
func (g *Guard) Status(showKeys bool) Status {
	s := Status{
		Name:         g.name,
		Key:          g.keyText(),
		Max:          g.limits.Max,
		Queue:        g.limits.Queue,
		QueueTimeout: feature.Window(g.limits.QueueTimeout),
		CancelGrace:  feature.Window(g.cancelGrace),
		Methods:      g.methods,
		Keys:         []KeyStatus{},
	}
	stats := g.set.Stats()
	for _, k := range stats {
		s.Active += k.Active
		s.Queued += k.Queued
	}
	slices.SortStableFunc(stats, func(a, b busy.KeyStats) int { return (b.Active + b.Queued) - (a.Active + a.Queued) })
	for _, k := range stats[:min(len(stats), MaxStatusKeys)] {
		key := k.Key
		if !showKeys && g.key != nil {
			key = keys.Shown(key)
		}
		s.Keys = append(s.Keys, KeyStatus{
			Key:           key,
			Active:        k.Active,
			Queued:        k.Queued,
			RecentService: k.RecentService.Round(time.Microsecond).String(),
		})
	}
	return s
}
