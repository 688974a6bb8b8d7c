package federation

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"golang.org/x/text/cases"
	"golang.org/x/text/unicode/norm"

	"github.com/caddymcp/caddy-mcp/contract"
	"github.com/caddymcp/caddy-mcp/internal/spelling"
)

// Names that stay stable. A tool or prompt keeps the name its server
// gives it (or the one a rename gives it) unless another server gives one
// a client would confuse with it: the same name under Unicode
// compatibility forms and letter case ("ａdmin", "Admin" and "admin" are
// one name). Then the server listed first keeps the bare name, and each
// later one is advertised as "<server><separator><name>". Servers are
// listed in the order of precedence of the configuration, so a server
// added last renames nothing clients already know. A name that comes out
// confusable with another even so (a server whose own tool is named like
// another's prefixed one) is left out of the list, and logged: two tools a
// model cannot tell apart are never listed.
//
// Pins keep the names clients know whatever the order: a lockfile of the
// federated endpoint (`caddy mcp-lock`) records each tool's advertised
// name and its server. A bare name pinned to a server stays that server's
// while it lists it; every other server's tool of that name is prefixed,
// the first listed or not. A prefixed name pinned to its server stays
// prefixed. A pin whose server is gone, or no longer lists the name,
// keeps nothing: the order decides.

// confusable is the form names are compared in: NFKC, then folded case.
func confusable(name string) string {
	return foldCase.String(norm.NFKC.String(name))
}

var foldCase = cases.Fold()

// entry is a tool or prompt of one server, under the name it is
// advertised by.
type entry struct {
	server     *server
	own        string // the name its server knows it by
	advertised string
	raw        []byte // the list's item as the server wrote it
	meta       bool   // the item holds a _meta member
	// stale: its server's list failed now; the entry is from the last
	// lists, named and routed by, not listed.
	stale bool
}

// names is one kind's entries (tools, or prompts), by advertised name and
// by confusable form.
type names struct {
	byName map[string]*entry
	byForm map[string][]*entry
	all    []*entry
}

// catalog is what the last lists made of the servers' names, and when.
type catalog struct {
	tools, prompts names
	prefixed       int
	made           time.Time
	// generation is the count of list_changed seen when the lists were
	// asked for.
	generation uint64
}

// dropped is an entry left out of a list, and why.
type dropped struct {
	server, name, why string
}

// pins are the tools' names a lockfile keeps: each advertised name's
// confusable form, and the name of the server it was advertised for.
type pins map[string]string

// loadPins reads the lockfile at path as pins.
func loadPins(path string) (pins, error) {
	l, err := contract.Load(path)
	if err != nil {
		return nil, err
	}
	p := pins{}
	name := map[string]string{}
	for _, t := range l.Tools {
		if t.Server == "" {
			continue
		}
		form := confusable(t.Name)
		if prev, dup := name[form]; dup {
			return nil, fmt.Errorf("%s: %q and %q read alike: a federated endpoint lists no two such names", path, prev, t.Name)
		}
		name[form], p[form] = t.Name, t.Server
	}
	if len(p) == 0 && len(l.Tools) > 0 {
		return nil, fmt.Errorf("%s: no tool names its server: write it with caddy mcp-lock of the federated endpoint", path)
	}
	return p, nil
}

// pinsOf are the pins of a list of k: the lockfile holds tools.
func (f *federation) pinsOf(k *kind) pins {
	if k == toolsList {
		return f.pins
	}
	return nil
}

// name gives the entries of each server (in the order of the servers) the
// names they are advertised by, keeping the names pinned (nil: none), and
// returns those left out.
func (f *federation) name(perServer [][]*entry, pinned pins) (names, []dropped, int) {
	out := ownNames(perServer)
	kept := f.kept(perServer, pinned)
	owner := owners(perServer, kept)
	var all []*entry
	prefixed := 0
	holder := map[string]*entry{} // a pinned name's entry takes it first
	for _, list := range perServer {
		for _, e := range list {
			if e.advertised == "" {
				continue
			}
			if owner[confusable(e.advertised)] != e.server {
				e.advertised = e.server.name + f.sep + e.advertised
				prefixed++
			}
			if _, ok := kept[e]; ok {
				holder[confusable(e.advertised)] = e
			}
			all = append(all, e)
		}
	}
	n := names{byName: map[string]*entry{}, byForm: map[string][]*entry{}}
	for _, e := range all {
		form := confusable(e.advertised)
		if h := holder[form]; h != nil && h != e {
			out = append(out, dropped{e.server.name, e.own, "its name, or its prefixed name, reads like another server's tool"})
			continue
		}
		holder[form] = e
		n.byName[e.advertised] = e
		n.byForm[form] = append(n.byForm[form], e)
		n.all = append(n.all, e)
	}
	return n, out, prefixed
}

// ownNames gives each entry the name its server gives it, or the one a
// rename gives it, and leaves out (and returns) a second of one server's
// names that read alike.
func ownNames(perServer [][]*entry) []dropped {
	var out []dropped
	for i, list := range perServer {
		own := map[string]bool{}
		kept := list[:0]
		for _, e := range list {
			e.advertised = e.own
			if to, ok := e.server.rename[e.own]; ok {
				e.advertised = to
			}
			form := confusable(e.advertised)
			if own[form] {
				out = append(out, dropped{e.server.name, e.own, "the server lists this name twice, or two names that read alike"})
				continue
			}
			own[form] = true
			kept = append(kept, e)
		}
		perServer[i] = kept
	}
	return out
}

// kept are the entries whose names are pinned, each true when the name
// pinned is its bare one, false when its prefixed one. A name pinned to a
// server is kept by the first of its entries it can be: an entry's bare
// name, or its prefixed one when its bare name is not pinned to it (as a
// server's entries met in its order take a name when none are pinned).
func (f *federation) kept(perServer [][]*entry, pinned pins) map[*entry]bool {
	kept := map[*entry]bool{}
	if len(pinned) == 0 {
		return kept
	}
	for _, list := range perServer {
		taken := map[string]bool{}
		for _, e := range list {
			if form := confusable(e.advertised); pinned[form] == e.server.name {
				if !taken[form] {
					taken[form], kept[e] = true, true
				}
				continue
			}
			if p := confusable(e.server.name + f.sep + e.advertised); pinned[p] == e.server.name && !taken[p] {
				taken[p], kept[e] = true, false
			}
		}
	}
	return kept
}

// owners are the servers that own each form bare: the server whose entry
// keeps it pinned; else the first server to list it, but for one whose
// entry keeps its prefixed name pinned.
func owners(perServer [][]*entry, kept map[*entry]bool) map[string]*server {
	owner := map[string]*server{}
	for e, bare := range kept {
		if bare {
			owner[confusable(e.advertised)] = e.server
		}
	}
	for _, list := range perServer {
		for _, e := range list {
			form := confusable(e.advertised)
			if _, ok := owner[form]; ok {
				continue
			}
			if bare, ok := kept[e]; ok && !bare {
				continue // a pinned prefixed name stays as it is
			}
			owner[form] = e.server
		}
	}
	return owner
}

// lookup is the entry a client's name stands for; when none, what the
// model is told: the names it may have meant, and whether the name is one
// of a server's (a prefixed name, or one a client would confuse with an
// advertised one: HANDOFF_NAMESPACE_MISMATCH) or none at all
// (UNKNOWN_ACTION).
func (n *names) lookup(f *federation, name string) (e *entry, candidates []string, namespace bool) {
	if e, ok := n.byName[name]; ok {
		return e, nil, false
	}
	if alike := n.byForm[confusable(name)]; len(alike) > 0 {
		for _, e := range alike {
			candidates = append(candidates, e.advertised)
		}
		return nil, candidates, true
	}
	if server, rest, ok := f.prefixedName(name); ok {
		for _, e := range n.all {
			if e.server == server && (e.own == rest || confusable(e.own) == confusable(rest)) {
				return nil, []string{e.advertised}, true
			}
		}
		var own []string
		advertised := map[string]string{}
		for _, e := range n.all {
			if e.server == server {
				own = append(own, e.own)
				advertised[e.own] = e.advertised
			}
		}
		for _, name := range nearest(rest, own) {
			candidates = append(candidates, advertised[name])
		}
		return nil, candidates, true
	}
	all := make([]string, 0, len(n.all))
	for _, e := range n.all {
		all = append(all, e.advertised)
	}
	return nil, nearest(name, all), false
}

// prefixedName reads name as "<server><separator><rest>", for a server
// of the federation.
func (f *federation) prefixedName(name string) (*server, string, bool) {
	prefix, rest, ok := strings.Cut(name, f.sep)
	if !ok {
		return nil, "", false
	}
	s, ok := f.byName[prefix]
	return s, rest, ok
}

// maxSuggested bounds the names an answer suggests.
const maxSuggested = 5

// nearest are the names of candidates a model may have meant by name:
// the closest by spelling, then those that hold it or that it holds.
func nearest(name string, candidates []string) []string {
	var out []string
	if best := spelling.Nearest(name, candidates); best != "" {
		out = append(out, best)
	}
	lower := strings.ToLower(name)
	for _, c := range candidates {
		if len(out) >= maxSuggested {
			break
		}
		lc := strings.ToLower(c)
		if lower != "" && (strings.Contains(lc, lower) || strings.Contains(lower, lc)) && !slices.Contains(out, c) {
			out = append(out, c)
		}
	}
	return out
}
