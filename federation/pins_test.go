package federation

import (
	"context"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/caddymcp/caddy-mcp/contract"
)

// pinsOfNames are the pins of names as a lockfile records them: advertised
// name → "server/own" as named gives them.
func pinsOfNames(advertised map[string]string) pins {
	p := pins{}
	for name, e := range advertised {
		server, _, _ := strings.Cut(e, "/")
		p[confusable(name)] = server
	}
	return p
}

func TestPinsKeepTheNamesTheyRecordWhateverTheOrder(t *testing.T) {
	for _, tc := range []struct {
		name     string
		servers  []given
		pinned   map[string]string // advertised name → server
		want     map[string]string
		dropped  []string
		prefixed int
	}{{
		name:     "a pin overrides the order",
		servers:  []given{{server: "a", names: []string{"x"}}, {server: "b", names: []string{"x"}}},
		pinned:   map[string]string{"x": "b", "a__x": "a"},
		want:     map[string]string{"x": "b/x", "a__x": "a/x"},
		prefixed: 1,
	}, {
		name: "a new server put first does not take a pinned bare name",
		servers: []given{
			{server: "new", names: []string{"x", "y", "z"}},
			{server: "a", names: []string{"x"}},
			{server: "b", names: []string{"x", "y"}},
		},
		pinned:   map[string]string{"x": "a", "b__x": "b", "y": "b"},
		want:     map[string]string{"x": "a/x", "b__x": "b/x", "y": "b/y", "new__x": "new/x", "new__y": "new/y", "z": "new/z"},
		prefixed: 3,
	}, {
		name:     "two servers swapped keep their names",
		servers:  []given{{server: "b", names: []string{"x", "y"}}, {server: "a", names: []string{"x", "y"}}},
		pinned:   map[string]string{"x": "a", "b__x": "b", "y": "a", "b__y": "b"},
		want:     map[string]string{"x": "a/x", "y": "a/y", "b__x": "b/x", "b__y": "b/y"},
		prefixed: 2,
	}, {
		name:     "a pinned server gone: the order decides",
		servers:  []given{{server: "b", names: []string{"x"}}, {server: "c", names: []string{"x"}}},
		pinned:   map[string]string{"x": "a", "c__x": "c"},
		want:     map[string]string{"x": "b/x", "c__x": "c/x"},
		prefixed: 1,
	}, {
		name:     "a pinned server no longer listing the name: the order decides",
		servers:  []given{{server: "c", names: []string{"x"}}, {server: "a", names: []string{"y"}}, {server: "b", names: []string{"x"}}},
		pinned:   map[string]string{"x": "a", "y": "a"},
		want:     map[string]string{"x": "c/x", "y": "a/y", "b__x": "b/x"},
		prefixed: 1,
	}, {
		name:     "a pinned prefixed name stays prefixed, its bare name free",
		servers:  []given{{server: "b", names: []string{"x"}}},
		pinned:   map[string]string{"x": "a", "b__x": "b"},
		want:     map[string]string{"b__x": "b/x"},
		prefixed: 1,
	}, {
		name:     "a pinned prefixed name stays prefixed when a new server takes the bare one",
		servers:  []given{{server: "new", names: []string{"x"}}, {server: "b", names: []string{"x"}}},
		pinned:   map[string]string{"x": "a", "b__x": "b"},
		want:     map[string]string{"x": "new/x", "b__x": "b/x"},
		prefixed: 1,
	}, {
		name:     "a pin holds the names a client would confuse with it",
		servers:  []given{{server: "a", names: []string{"Search"}}, {server: "b", names: []string{"search"}}},
		pinned:   map[string]string{"search": "b", "a__search": "a"},
		want:     map[string]string{"search": "b/search", "a__Search": "a/Search"},
		prefixed: 1,
	}, {
		name: "a pinned name taken first by a server's own name like it: the own name is left out",
		servers: []given{
			{server: "c", names: []string{"a__x"}},
			{server: "a", names: []string{"x"}},
			{server: "b", names: []string{"x"}},
		},
		pinned:   map[string]string{"x": "b", "a__x": "a"},
		want:     map[string]string{"x": "b/x", "a__x": "a/x"},
		dropped:  []string{"c/a__x"},
		prefixed: 1,
	}, {
		// A pinned "b__x" of b's is its x prefixed, or its own "b__x":
		// the first of them b lists, as when no name is pinned.
		name:     "a server's prefixed name like its own name: the first it lists is pinned",
		servers:  []given{{server: "b", names: []string{"x", "b__x"}}, {server: "a", names: []string{"x"}}},
		pinned:   map[string]string{"x": "a", "b__x": "b"},
		want:     map[string]string{"x": "a/x", "b__x": "b/x"},
		dropped:  []string{"b/b__x"},
		prefixed: 1,
	}, {
		name:     "a server's own name like its prefixed name: the first it lists is pinned",
		servers:  []given{{server: "b", names: []string{"b__x", "x"}}, {server: "a", names: []string{"x"}}},
		pinned:   map[string]string{"x": "a", "b__x": "b"},
		want:     map[string]string{"x": "a/x", "b__x": "b/b__x"},
		dropped:  []string{"b/x"},
		prefixed: 1,
	}, {
		name:     "a renamed name is pinned by the name advertised",
		servers:  []given{{server: "a", names: []string{"search"}}, {server: "b", rename: map[string]string{"find": "search"}, names: []string{"find"}}},
		pinned:   map[string]string{"search": "b", "a__search": "a"},
		want:     map[string]string{"search": "b/find", "a__search": "a/search"},
		prefixed: 1,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			pinned := pins{}
			for name, server := range tc.pinned {
				pinned[confusable(name)] = server
			}
			_, _, got, dropped, prefixed := namedPinned(t, tc.servers, pinned)
			assert.Equal(t, tc.want, got)
			assert.ElementsMatch(t, tc.dropped, dropped)
			assert.Equal(t, tc.prefixed, prefixed)
		})
	}
}

// Pins of the names the servers were advertised by keep every one of them,
// whatever the new order of the servers, wherever a new server is put, and
// when one of them is gone:
// over random lists of names drawn from a few that read alike or hold
// another server's prefix.
func TestPinnedNamesSurviveAnyOrderAndANewServerAnywhere(t *testing.T) {
	pool := []string{
		"search", "Search", "ｓearch", "fetch", "admin", "ADMIN", "x", "y",
		"s1__search", "s2__fetch", "S3__x", "s0__admin", "s3__y", "run", "s1__run", "S1__RUN",
	}
	rng := rand.New(rand.NewPCG(3, 4))
	draw := func() []string {
		var out []string
		for range rng.IntN(6) {
			out = append(out, pool[rng.IntN(len(pool))])
		}
		return out
	}
	for round := range 500 {
		servers := []given{{server: "s0", names: draw()}, {server: "s1", names: draw()}, {server: "s2", names: draw()}}
		if rng.IntN(3) == 0 {
			servers[1].rename = map[string]string{pool[rng.IntN(len(pool))]: pool[rng.IntN(len(pool))]}
		}
		_, _, before, _, _ := named(t, servers)
		moved := append([]given(nil), servers...)
		gone := ""
		if rng.IntN(3) == 0 {
			i := rng.IntN(len(moved))
			gone = moved[i].server
			moved = append(moved[:i], moved[i+1:]...)
		}
		rng.Shuffle(len(moved), func(i, j int) { moved[i], moved[j] = moved[j], moved[i] })
		at := rng.IntN(len(moved) + 1)
		moved = append(moved[:at], append([]given{{server: "s3", names: draw()}}, moved[at:]...)...)
		_, _, after, _, _ := namedPinned(t, moved, pinsOfNames(before))
		for name, e := range before {
			if strings.HasPrefix(e, gone+"/") {
				continue
			}
			if !assert.Equal(t, e, after[name], "round %d: %q", round, name) {
				t.Logf("before: %v\nafter: %v\nservers: %v", before, after, moved)
			}
		}
	}
}

// A lockfile holds each tool's server, and is read as pins by the forms of
// the names; one that cannot be used is refused, naming its path.
func TestPinsAreReadFromALockfileOrRefusedWithItsPath(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, l *contract.Lockfile) string {
		path := filepath.Join(dir, name)
		b, err := l.Marshal()
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(path, b, 0o600))
		return path
	}
	good := write("good.json", &contract.Lockfile{Version: contract.Version, Tools: []contract.Tool{
		{Name: "Search", Server: "a"}, {Name: "b__search", Server: "b"},
	}})
	p, err := loadPins(good)
	require.NoError(t, err)
	assert.Equal(t, pins{"search": "a", "b__search": "b"}, p)

	empty := write("empty.json", &contract.Lockfile{Version: contract.Version})
	p, err = loadPins(empty)
	require.NoError(t, err, "a federated endpoint with no tool pins nothing")
	assert.Empty(t, p)

	single := write("single.json", &contract.Lockfile{Version: contract.Version, Tools: []contract.Tool{{Name: "x"}}})
	alike := write("alike.json", &contract.Lockfile{Version: contract.Version, Tools: []contract.Tool{
		{Name: "x", Server: "a"}, {Name: "X", Server: "b"},
	}})
	malformed := filepath.Join(dir, "malformed.json")
	require.NoError(t, os.WriteFile(malformed, []byte(`{"caddy_mcp_lock":1,"tools":{}}`), 0o600))
	missing := filepath.Join(dir, "missing.json")
	for path, says := range map[string]string{
		single:    "no tool names its server",
		alike:     "read alike",
		malformed: "not a lockfile",
		missing:   "no such file",
	} {
		_, err := loadPins(path)
		require.Error(t, err, path)
		assert.Contains(t, err.Error(), path)
		assert.Contains(t, err.Error(), says)
	}

	ctx, cancel := caddy.NewContext(caddy.Context{Context: context.Background()})
	defer cancel()
	err = (&Feature{Pins: malformed}).Provision(ctx)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "federation: pins: "+malformed)
	f := &Feature{Pins: good}
	require.NoError(t, f.Provision(ctx))
	assert.Equal(t, pins{"search": "a", "b__search": "b"}, f.pins)
}

// Each entry of a merged list of tools or prompts names its server in its
// _meta, beside the server's own members; a server's own claim to the
// member is replaced, and resources are as their server wrote them.
func TestAMergedEntryNamesItsServerInItsMeta(t *testing.T) {
	for _, tc := range []struct {
		name, raw, advertised, want string
		k                           *kind
	}{
		{name: "no _meta", raw: `{"name":"x"}`, want: `{"name":"x","_meta":{"caddymcp.dev/server":"b"}}`},
		{name: "spaces", raw: " {\"name\":\"x\" }\n", want: `{"name":"x","_meta":{"caddymcp.dev/server":"b"}}`},
		{name: "its own _meta", raw: `{"name":"x","_meta":{"ui":{"icon":"i"}}}`, want: `{"name":"x","_meta":{"ui":{"icon":"i"},"caddymcp.dev/server":"b"}}`},
		{name: "a claim to the member", raw: `{"name":"x","_meta":{"caddymcp.dev/server":"a"}}`, want: `{"name":"x","_meta":{"caddymcp.dev/server":"b"}}`},
		{name: "an escaped _meta", raw: `{"name":"x","\u005fmeta":{"k":1}}`, want: `{"name":"x","_meta":{"k":1,"caddymcp.dev/server":"b"}}`},
		{name: "a _meta not an object", raw: `{"name":"x","_meta":"m"}`, want: `{"name":"x","_meta":{"caddymcp.dev/server":"b"}}`},
		{name: "a null _meta", raw: `{"name":"x","_meta":null}`, want: `{"name":"x","_meta":{"caddymcp.dev/server":"b"}}`},
		{name: "prefixed, with its _meta", raw: `{"name":"x","_meta":{"k":1}}`, advertised: "b__x", want: `{"name":"b__x","_meta":{"k":1,"caddymcp.dev/server":"b"}}`},
		{name: "a prompt", k: promptsList, raw: `{"name":"x"}`, want: `{"name":"x","_meta":{"caddymcp.dev/server":"b"}}`},
		{name: "a resource", k: resourcesList, raw: `{"uri":"file:///x"}`, want: `{"uri":"file:///x"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k := toolsList
			if tc.k != nil {
				k = tc.k
			}
			s := testServer("b", nil, nil)
			own := "x"
			if !k.named {
				own = "file:///x"
			}
			// As the list is read: the item, its name, whether it holds _meta.
			e := entriesFromRaw(t, s, k, tc.raw)
			require.Equal(t, own, e.own)
			e.advertised = own
			if tc.advertised != "" {
				e.advertised = tc.advertised
			}
			assert.JSONEq(t, tc.want, string(e.appendItem(nil, k)))
		})
	}
}

// entriesFromRaw is the one entry of s's list of k holding raw, as the
// federation reads the list.
func entriesFromRaw(t *testing.T, s *server, k *kind, raw string) *entry {
	t.Helper()
	s.route = answering(func(w http.ResponseWriter, _ *http.Request, req asked) error {
		return writeRPC(w, req.ID, `{"`+k.member+`":[`+raw+`]}`)
	})
	f := testFederation(s)
	from := httptest.NewRequest(http.MethodPost, "/mcp", strings.NewReader("{}"))
	out := f.listAll(context.Background(), from, nil, k)
	require.NoError(t, out[0].err)
	require.Len(t, out[0].entries, 1)
	return out[0].entries[0]
}
