package promreg

import "sync"

// SharedLabels are the values of a label clients choose (a tool's name)
// that the configs loaded label a metric with, each config the first few
// it sees (ConfigLabels): when the last config that labels a value is
// released, the value's series are deleted, so that the series stay
// bounded however often configs are reloaded. Observations are made
// under its lock (Observe): a series is never made again by an
// observation that raced its deletion.
type SharedLabels struct {
	mu   sync.Mutex
	uses map[string]int
	drop func(value string)
}

// NewSharedLabels returns the shared values of a label, whose series drop
// deletes.
func NewSharedLabels(drop func(value string)) *SharedLabels {
	return &SharedLabels{uses: make(map[string]int), drop: drop}
}

// ConfigLabels are one config's values: the first max it sees are labels
// of their own, every other one Other.
type ConfigLabels struct {
	s        *SharedLabels
	max      int
	seen     map[string]bool
	released bool
}

// ForConfig returns a config's labels, bounded to max values.
func (s *SharedLabels) ForConfig(max int) *ConfigLabels {
	return &ConfigLabels{s: s, max: max, seen: make(map[string]bool)}
}

// Observe calls observe with v's label, under the shared lock: v itself
// among the first max values c saw, else Other; once c is released (a
// request of a config reloaded since), v only while another config
// labels it.
func (c *ConfigLabels) Observe(v string, observe func(label string)) {
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	observe(c.label(v))
}

// Of is v's label, as Observe gives it.
func (c *ConfigLabels) Of(v string) (label string) {
	c.Observe(v, func(l string) { label = l })
	return label
}

func (c *ConfigLabels) label(v string) string {
	switch {
	case c.seen[v], c.released && c.s.uses[v] > 0:
		return v
	case c.released, len(c.seen) >= c.max:
		return Other
	}
	c.seen[v] = true
	c.s.uses[v]++
	return v
}

// Release lets c's values go, once, deleting the series of those no
// other config labels.
func (c *ConfigLabels) Release() {
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	if c.released {
		return
	}
	c.released = true
	for v := range c.seen {
		if c.s.uses[v]--; c.s.uses[v] <= 0 {
			delete(c.s.uses, v)
			c.s.drop(v)
		}
	}
	clear(c.seen)
}
