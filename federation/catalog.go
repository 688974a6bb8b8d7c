package federation

import (
	"context"
	"strings"
	"time"

	"github.com/caddymcp/caddy-mcp/feature"
)

// What the federation knows of the servers' names and URIs, to route by:
// made from the last lists any client was given (a client's tools/list
// remakes it), asked again once a server said its list changed, and, for
// a name the last lists did not give, at most once every minRelist. The
// lists are asked under the session of the request that needs them.

// minRelist is the least time between two listings made for a name or a
// URI the last lists did not give, and between two listings made after
// list_changed.
const minRelist = time.Second

func toolsOf(c *catalog) *names   { return &c.tools }
func promptsOf(c *catalog) *names { return &c.prompts }

// catalog is what the federation knows of the servers' tools and prompts,
// asked of the servers when it knows nothing yet, when it is stale, or
// when again is set.
func (f *federation) catalog(x *feature.Exchange, o *opened, again bool) *catalog {
	c := f.names.Load()
	if c != nil && !again && (c.generation == f.changed.Load() || f.now().Sub(c.made) < minRelist) {
		// Fresh, or made less than minRelist ago: a storm of list_changed
		// costs the servers one listing every minRelist at most.
		return c
	}
	v, _, _ := f.relists.Do("names", func() (any, error) {
		if c := f.names.Load(); c != nil && f.now().Sub(c.made) < minRelist && c.generation == f.changed.Load() {
			return c, nil // remade while this one waited
		}
		return f.relist(x, o), nil
	})
	return v.(*catalog)
}

// relist asks every server for its tools and prompts.
func (f *federation) relist(x *feature.Exchange, o *opened) *catalog {
	ctx := context.WithoutCancel(x.Request.Context())
	generation := f.changed.Load()
	c := &catalog{made: f.now(), generation: generation}
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer f.recover("federation relist")
		_, n := f.merge(promptsList, f.listAll(ctx, x.Request, o, promptsList))
		c.prompts = *n
	}()
	_, n := f.merge(toolsList, f.listAll(ctx, x.Request, o, toolsList))
	c.tools = *n
	<-done
	if c.prompts.byName == nil {
		c.prompts = names{byName: map[string]*entry{}, byForm: map[string][]*entry{}}
	}
	c.prefixed = countPrefixed(&c.tools) + countPrefixed(&c.prompts)
	f.names.Store(c)
	return c
}

// learned keeps what a client's list of k made of the names.
func (f *federation) learned(k *kind, n *names, generation uint64) {
	if n == nil {
		return
	}
	for {
		old := f.names.Load()
		c := &catalog{made: f.now(), generation: generation}
		if old != nil {
			*c = *old
			c.made, c.generation = f.now(), min(old.generation, generation)
		} else {
			c.tools = names{byName: map[string]*entry{}, byForm: map[string][]*entry{}}
			c.prompts = c.tools
		}
		if k == toolsList {
			c.tools = *n
		} else {
			c.prompts = *n
		}
		c.prefixed = countPrefixed(&c.tools) + countPrefixed(&c.prompts)
		if f.names.CompareAndSwap(old, c) {
			return
		}
	}
}

func countPrefixed(n *names) int {
	k := 0
	for _, e := range n.all {
		base := e.own
		if to, ok := e.server.rename[e.own]; ok {
			base = to
		}
		if e.advertised != base {
			k++
		}
	}
	return k
}

// located is what the federation knows of the servers' resources.
type located struct {
	byURI      map[string]*server
	templates  []template
	made       time.Time
	generation uint64
}

// template is a resource template's literal head (before its first
// expression), and its server.
type template struct {
	head   string
	server *server
}

// located is where the servers' resources are, asked of the servers when
// the federation knows nothing yet or it is stale.
func (f *federation) located(x *feature.Exchange, o *opened, again bool) *located {
	if l := f.resources.Load(); l != nil && !again && (l.generation == f.changed.Load() || f.now().Sub(l.made) < minRelist) {
		return l
	}
	v, _, _ := f.relists.Do("resources", func() (any, error) {
		ctx := context.WithoutCancel(x.Request.Context())
		l := &located{made: f.now(), generation: f.changed.Load()}
		resources, _ := f.merge(resourcesList, f.listAll(ctx, x.Request, o, resourcesList))
		templates, _ := f.merge(templatesList, f.listAll(ctx, x.Request, o, templatesList))
		l.learn(resources, templates)
		f.resources.Store(l)
		return l, nil
	})
	return v.(*located)
}

// learn indexes resources and templates by where they lead.
func (l *located) learn(resources, templates []*entry) {
	l.byURI = make(map[string]*server, len(resources))
	for _, e := range resources {
		l.byURI[e.own] = e.server
	}
	for _, e := range templates {
		head, _, _ := strings.Cut(e.own, "{")
		l.templates = append(l.templates, template{head: head, server: e.server})
	}
}
