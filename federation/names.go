package federation

import (
	"slices"
	"strings"
	"time"

	"golang.org/x/text/cases"
	"golang.org/x/text/unicode/norm"

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
}

// names is one kind's entries (tools, or prompts), by advertised name and
// by confusable form.
type names struct {
	byName map[string]*entry
	byForm map[string][]*entry
	all    []*entry
	// held are entries routed by but not listed: a server's, kept from
	// the last lists for a list it was left out of (see reserve).
	held []*entry
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

// name gives the entries of each server (in the order of the servers) the
// names they are advertised by, and returns those left out.
func (f *federation) name(perServer [][]*entry) (names, []dropped, int) {
	var out []dropped
	// The first server to give a form owns it bare.
	owner := map[string]*server{}
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
			if _, ok := owner[form]; !ok {
				owner[form] = e.server
			}
		}
		perServer[i] = kept
	}
	n := names{byName: map[string]*entry{}, byForm: map[string][]*entry{}}
	prefixed := 0
	for _, list := range perServer {
		for _, e := range list {
			if e.advertised == "" {
				continue
			}
			if owner[confusable(e.advertised)] != e.server {
				e.advertised = e.server.name + f.sep + e.advertised
				prefixed++
			}
			form := confusable(e.advertised)
			if len(n.byForm[form]) > 0 {
				out = append(out, dropped{e.server.name, e.own, "its name, or its prefixed name, reads like another server's tool"})
				continue
			}
			n.byName[e.advertised] = e
			n.byForm[form] = append(n.byForm[form], e)
			n.all = append(n.all, e)
		}
	}
	return n, out, prefixed
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
