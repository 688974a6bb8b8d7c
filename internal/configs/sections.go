package configs

import (
	"slices"
	"sync"
)

// Sections are the live states of the handlers outside the mcp handler
// that report one (the handlers of upstream routes: mcp_credential),
// which /mcp/status lists under "routes", by handler name, in the order
// they were provisioned.
var Sections sections

type sections struct {
	mu   sync.Mutex
	list []*section
}

type section struct {
	name   string
	status func() any
}

// Add lists status under name, until remove is called (the handler's
// Cleanup).
func (s *sections) Add(name string, status func() any) (remove func()) {
	sec := &section{name, status}
	s.mu.Lock()
	s.list = append(s.list, sec)
	s.mu.Unlock()
	return func() {
		s.mu.Lock()
		s.list = slices.DeleteFunc(s.list, func(o *section) bool { return o == sec })
		s.mu.Unlock()
	}
}

// Live is every section's state, by name; nil when there is none.
func (s *sections) Live() map[string][]any {
	s.mu.Lock()
	list := slices.Clone(s.list)
	s.mu.Unlock()
	var out map[string][]any
	for _, sec := range list {
		if out == nil {
			out = make(map[string][]any)
		}
		out[sec.name] = append(out[sec.name], sec.status())
	}
	return out
}
