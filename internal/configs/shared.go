package configs

import "fmt"

// What handlers share, and what they must agree on.
//
// A rate limit's buckets are identified by its name (and key template), and
// a named guard's places by its name (and key template and methods): every
// handler that uses a name shares them, across sites and across config
// reloads. So within one config, every handler that uses a name must give
// it the same settings; otherwise whichever handler was provisioned last
// would set the limit for all. Across a reload, the new config's settings
// apply to the shared state at once.
//
// An unnamed guard belongs to its handler alone. It is identified by its
// settings, and among handlers of one config with the same settings, by
// their order, so that a reload that keeps a site's concurrency block keeps
// its places (and capacity never doubles while the old config's requests
// finish).

// Declare records that a handler gives name these settings, in the map of
// its kind, and refuses settings that differ from another handler's.
func (l *Load[H]) Declare(kind, name, settings string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	k := kind + " " + name
	if prev, ok := l.declared[k]; ok && prev != settings {
		return fmt.Errorf("%s %q is configured differently by two mcp handlers of this config (%s, and %s): handlers that use one name share its state, so they must give it the same settings; rename one of them to keep them apart", kind, name, prev, settings)
	}
	l.declared[k] = settings
	return nil
}

// Ordinal numbers the unnamed guards of one config with the same settings,
// in provisioning order.
func (l *Load[H]) Ordinal(settings string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.unnamed[settings]++
	return l.unnamed[settings]
}
