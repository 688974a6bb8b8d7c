package federation

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// given is what one server lists, in a test of naming.
type given struct {
	server string
	rename map[string]string
	names  []string
}

// named runs name() over what the servers list, in their order: the
// entries by advertised name ("server/own"), those left out
// ("server/own"), and the count prefixed.
func named(t *testing.T, servers []given) (*federation, names, map[string]string, []string, int) {
	t.Helper()
	return namedPinned(t, servers, nil)
}

// namedPinned is named, keeping the names pinned.
func namedPinned(t *testing.T, servers []given, pinned pins) (*federation, names, map[string]string, []string, int) {
	t.Helper()
	var ss []*server
	for _, g := range servers {
		ss = append(ss, testServer(g.server, nil, g.rename))
	}
	f := testFederation(ss...)
	per := make([][]*entry, len(servers))
	for i, g := range servers {
		per[i] = entriesOf(ss[i], g.names...)
	}
	n, left, prefixed := f.name(per, pinned)
	got := map[string]string{}
	for _, e := range n.all {
		got[e.advertised] = e.server.name + "/" + e.own
	}
	var dropped []string
	for _, d := range left {
		dropped = append(dropped, d.server+"/"+d.name)
	}
	tellsNoTwoApart(t, &n)
	return f, n, got, dropped, prefixed
}

// tellsNoTwoApart checks what every list of names must hold: no two
// entries a client would confuse, and the indexes agree with the list.
func tellsNoTwoApart(t *testing.T, n *names) {
	t.Helper()
	forms := map[string]string{}
	for _, e := range n.all {
		form := confusable(e.advertised)
		if prev, dup := forms[form]; dup {
			t.Errorf("%q and %q are listed both, and read alike", prev, e.advertised)
		}
		forms[form] = e.advertised
		assert.Same(t, e, n.byName[e.advertised])
		assert.Equal(t, []*entry{e}, n.byForm[form])
	}
	assert.Len(t, n.byName, len(n.all))
	assert.Len(t, n.byForm, len(n.all))
}

func TestNamesStayBareUnlessTwoServersGiveOneAndThenTheLaterIsPrefixed(t *testing.T) {
	for _, tc := range []struct {
		name     string
		servers  []given
		want     map[string]string
		dropped  []string
		prefixed int
	}{{
		name:    "unique names stay bare",
		servers: []given{{server: "a", names: []string{"search", "admin"}}, {server: "b", names: []string{"fetch"}}},
		want:    map[string]string{"search": "a/search", "admin": "a/admin", "fetch": "b/fetch"},
	}, {
		name:     "a conflict prefixes the later server's only",
		servers:  []given{{server: "a", names: []string{"search"}}, {server: "b", names: []string{"search", "fetch"}}},
		want:     map[string]string{"search": "a/search", "b__search": "b/search", "fetch": "b/fetch"},
		prefixed: 1,
	}, {
		name:     "the order of the servers, not of the names, decides",
		servers:  []given{{server: "z", names: []string{"search"}}, {server: "a", names: []string{"search"}}},
		want:     map[string]string{"search": "z/search", "a__search": "a/search"},
		prefixed: 1,
	}, {
		name: "three servers",
		servers: []given{
			{server: "a", names: []string{"x", "y"}},
			{server: "b", names: []string{"x", "z"}},
			{server: "c", names: []string{"x", "y", "z", "w"}},
		},
		want: map[string]string{
			"x": "a/x", "y": "a/y", "b__x": "b/x", "z": "b/z",
			"c__x": "c/x", "c__y": "c/y", "c__z": "c/z", "w": "c/w",
		},
		prefixed: 4,
	}, {
		name:     "a rename that causes a conflict is prefixed",
		servers:  []given{{server: "a", names: []string{"search"}}, {server: "b", rename: map[string]string{"find": "search"}, names: []string{"find"}}},
		want:     map[string]string{"search": "a/search", "b__search": "b/find"},
		prefixed: 1,
	}, {
		name:    "a rename that avoids a conflict stays bare",
		servers: []given{{server: "a", names: []string{"search"}}, {server: "b", rename: map[string]string{"search": "web_search"}, names: []string{"search"}}},
		want:    map[string]string{"search": "a/search", "web_search": "b/search"},
	}, {
		name:     "the earlier server's rename takes the bare name",
		servers:  []given{{server: "a", rename: map[string]string{"find": "search"}, names: []string{"find"}}, {server: "b", names: []string{"search"}}},
		want:     map[string]string{"search": "a/find", "b__search": "b/search"},
		prefixed: 1,
	}, {
		name:     "a fullwidth letter reads like its ASCII one",
		servers:  []given{{server: "a", names: []string{"admin"}}, {server: "b", names: []string{"ａdmin"}}},
		want:     map[string]string{"admin": "a/admin", "b__ａdmin": "b/ａdmin"},
		prefixed: 1,
	}, {
		name:     "letter case is no difference",
		servers:  []given{{server: "a", names: []string{"admin"}}, {server: "b", names: []string{"Admin"}}},
		want:     map[string]string{"admin": "a/admin", "b__Admin": "b/Admin"},
		prefixed: 1,
	}, {
		name:     "a server that lists a name twice, or two that read alike, keeps the first",
		servers:  []given{{server: "a", names: []string{"x", "x", "X", "ｘ"}}, {server: "b", names: []string{"x"}}},
		want:     map[string]string{"x": "a/x", "b__x": "b/x"},
		dropped:  []string{"a/x", "a/X", "a/ｘ"},
		prefixed: 1,
	}, {
		name:     "a server's own name like another's prefixed one: the later is left out",
		servers:  []given{{server: "a", names: []string{"x", "b__x"}}, {server: "b", names: []string{"x"}}},
		want:     map[string]string{"x": "a/x", "b__x": "a/b__x"},
		dropped:  []string{"b/x"},
		prefixed: 1,
	}, {
		name: "a prefixed name taken first leaves out a later server's own",
		servers: []given{
			{server: "a", names: []string{"x"}},
			{server: "b", names: []string{"x"}},
			{server: "c", names: []string{"b__x", "B__X"}},
		},
		want:     map[string]string{"x": "a/x", "b__x": "b/x"},
		dropped:  []string{"c/B__X", "c/b__x"},
		prefixed: 1,
	}, {
		name:    "a name holding the separator with no conflict stays bare",
		servers: []given{{server: "a", names: []string{"b__x"}}, {server: "b", names: []string{"y"}}},
		want:    map[string]string{"b__x": "a/b__x", "y": "b/y"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, got, dropped, prefixed := named(t, tc.servers)
			assert.Equal(t, tc.want, got)
			assert.ElementsMatch(t, tc.dropped, dropped)
			assert.Equal(t, tc.prefixed, prefixed)
		})
	}
}

// A server added last renames nothing, and leaves out nothing, that the
// servers before it advertised: over random lists of names drawn from a
// few that read alike or hold another server's prefix.
func TestAServerAddedLastRenamesNothingClientsKnow(t *testing.T) {
	pool := []string{
		"search", "Search", "ｓearch", "fetch", "admin", "ADMIN", "x", "y",
		"s1__search", "s2__fetch", "S3__x", "s0__admin", "s3__y", "run", "s1__run",
	}
	rng := rand.New(rand.NewPCG(1, 2))
	draw := func() []string {
		var out []string
		for range rng.IntN(6) {
			out = append(out, pool[rng.IntN(len(pool))])
		}
		return out
	}
	for round := range 300 {
		servers := []given{{server: "s0", names: draw()}, {server: "s1", names: draw()}, {server: "s2", names: draw()}}
		if rng.IntN(3) == 0 {
			servers[1].rename = map[string]string{pool[rng.IntN(len(pool))]: pool[rng.IntN(len(pool))]}
		}
		_, _, before, _, _ := named(t, servers)
		_, _, after, _, _ := named(t, append(servers, given{server: "s3", names: draw()}))
		for name, e := range before {
			if !assert.Equal(t, e, after[name], "round %d: %q", round, name) {
				t.Logf("servers: %v; fourth: %v", servers, after)
			}
		}
	}
}

func TestANameNotAdvertisedIsAnsweredWithTheNamesItMayMean(t *testing.T) {
	f, n, got, _, _ := named(t, []given{
		{server: "a", names: []string{"search", "admin", "only_a"}},
		{server: "b", names: []string{"search", "fetch_page"}},
	})
	require.Equal(t, map[string]string{"search": "a/search", "admin": "a/admin", "only_a": "a/only_a", "b__search": "b/search", "fetch_page": "b/fetch_page"}, got)
	for _, tc := range []struct {
		name       string
		found      string // "server/own" when found
		candidates []string
		namespace  bool
	}{
		{name: "search", found: "a/search"},
		{name: "b__search", found: "b/search"},
		{name: "fetch_page", found: "b/fetch_page"},
		// Read alike an advertised name.
		{name: "ADMIN", candidates: []string{"admin"}, namespace: true},
		{name: "ａdmin", candidates: []string{"admin"}, namespace: true},
		{name: "B__Search", candidates: []string{"b__search"}, namespace: true},
		// A server's prefix, and a name that server does not have.
		{name: "b__serch", candidates: []string{"b__search"}, namespace: true},
		{name: "b__missing", namespace: true},
		// The prefixed form of a name advertised bare.
		{name: "b__fetch_page", candidates: []string{"fetch_page"}, namespace: true},
		{name: "a__search", candidates: []string{"search"}, namespace: true},
		{name: "b__FETCH_PAGE", candidates: []string{"fetch_page"}, namespace: true},
		// No server's.
		{name: "serch", candidates: []string{"search"}},
		{name: "fetch", candidates: []string{"fetch_page"}},
		{name: "c__search", candidates: []string{"b__search", "search"}},
		{name: "zzz"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, candidates, namespace := n.lookup(f, tc.name)
			if tc.found != "" {
				require.NotNil(t, e)
				assert.Equal(t, tc.found, e.server.name+"/"+e.own)
				assert.Nil(t, candidates)
				assert.False(t, namespace)
				return
			}
			require.Nil(t, e, "found %v", e)
			assert.Equal(t, tc.candidates, candidates)
			assert.Equal(t, tc.namespace, namespace)
		})
	}
}

// A server's prefix and a name it does not have suggest that server's
// names nearest to it, by the names they are advertised by.
func TestAPrefixedNameSuggestsTheNearestOfThatServersNames(t *testing.T) {
	var many []string
	for i := range 8 {
		many = append(many, fmt.Sprintf("tool_%d", i))
	}
	f, n, _, _, _ := named(t, []given{
		{server: "a", names: []string{"search", "tool_1"}},
		{server: "b", names: append([]string{"search"}, many...)},
	})
	_, candidates, namespace := n.lookup(f, "b__serch")
	assert.True(t, namespace)
	assert.Equal(t, []string{"b__search"}, candidates)
	_, candidates, namespace = n.lookup(f, "b__tool_")
	assert.True(t, namespace)
	assert.LessOrEqual(t, len(candidates), maxSuggested)
	assert.Contains(t, candidates, "b__tool_1", "b's tool_1 is advertised prefixed")
	assert.NotContains(t, candidates, "tool_1", "a's tool_1 is not b's")
}
