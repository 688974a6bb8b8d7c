package toolschema

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func listPage(names []string, next string, extra string) []byte {
	var tools []string
	for _, n := range names {
		tools = append(tools, fmt.Sprintf(`{"name":%q,"inputSchema":{"type":"object","properties":{"n":{"type":"integer"}}}}`, n))
	}
	cursor := ""
	if next != "" {
		cursor = fmt.Sprintf(`,"nextCursor":%q`, next)
	}
	return []byte(`{"tools":[` + strings.Join(tools, ",") + `]` + cursor + extra + `}`)
}

var now = time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)

func TestPagesMakeACompleteList(t *testing.T) {
	c := NewCatalog(0)
	key := ListKey{Endpoint: "mcp.example.com/mcp", Scope: "alice"}
	page, err := c.Learn(key, listPage([]string{"a", "b"}, "p2", ""), true, now)
	require.NoError(t, err)
	assert.False(t, page.Complete)
	_, found, _ := c.Lookup(key, "c", now)
	assert.Equal(t, Unlisted, found, "a listing under way is not yet the list")

	page, err = c.Learn(key, listPage([]string{"c"}, "", ""), false, now)
	require.NoError(t, err)
	assert.True(t, page.Complete)
	s, found, _ := c.Lookup(key, "c", now)
	assert.Equal(t, Known, found)
	assert.Len(t, mustCheck(t, s, []byte(`{"n":"x"}`)), 1)
	_, found, names := c.Lookup(key, "d", now)
	assert.Equal(t, Absent, found)
	assert.Equal(t, []string{"a", "b", "c"}, names)

	_, found, _ = c.Lookup(ListKey{Endpoint: key.Endpoint, Scope: "bob"}, "a", now)
	assert.Equal(t, NoList, found, "private to alice's scope")
}

func TestAPageWithoutItsStartLeavesTheListIncomplete(t *testing.T) {
	c := NewCatalog(0)
	key := ListKey{Endpoint: "e"}
	_, err := c.Learn(key, listPage([]string{"z"}, "", ""), false, now)
	require.NoError(t, err)
	_, found, _ := c.Lookup(key, "z", now)
	assert.Equal(t, Known, found)
	_, found, _ = c.Lookup(key, "y", now)
	assert.Equal(t, Unlisted, found, "not known to be absent")
}

func TestPublicListsAreSharedAndTTLBoundsAbsence(t *testing.T) {
	c := NewCatalog(0)
	_, err := c.Learn(ListKey{Endpoint: "e", Scope: "alice"}, listPage([]string{"a"}, "", `,"cacheScope":"public","ttlMs":60000`), true, now)
	require.NoError(t, err)
	bob := ListKey{Endpoint: "e", Scope: "bob"}
	_, found, _ := c.Lookup(bob, "a", now)
	assert.Equal(t, Known, found, "a public list serves every scope")
	_, found, _ = c.Lookup(bob, "b", now.Add(59*time.Second))
	assert.Equal(t, Absent, found)
	_, found, _ = c.Lookup(bob, "b", now.Add(time.Minute))
	assert.Equal(t, Unlisted, found, "stale: b may have been added")
	_, found, _ = c.Lookup(bob, "a", now.Add(time.Hour))
	assert.Equal(t, Known, found, "the schema the client was given still checks its calls")
}

func TestBadSchemasAreReportedAndPassUnchecked(t *testing.T) {
	c := NewCatalog(0)
	key := ListKey{Endpoint: "e"}
	page, err := c.Learn(key, []byte(`{"tools":[{"name":"ok","inputSchema":{"type":"object"}},{"name":"bad","inputSchema":{"type":"object","properties":{"a":{"$ref":"https://evil.example/s.json"}}}},{"name":"worse","inputSchema":{"type":7}}]}`), true, now)
	require.NoError(t, err)
	assert.Len(t, page.Bad, 2)
	_, found, _ := c.Lookup(key, "bad", now)
	assert.Equal(t, BadSchema, found)
}

func TestTruncatedListsAreIncomplete(t *testing.T) {
	c := NewCatalog(0)
	key := ListKey{Endpoint: "e"}
	var tools []string
	for i := range MaxTools + 1 {
		tools = append(tools, fmt.Sprintf(`{"name":"t%d","inputSchema":{"type":"object"}}`, i))
	}
	_, err := c.Learn(key, []byte(`{"tools":[{"name":""},`+strings.Join(tools, ",")+`]}`), true, now)
	require.NoError(t, err)
	_, found, _ := c.Lookup(key, "zzz", now)
	assert.Equal(t, Unlisted, found, "a list cut at MaxTools says nothing of the tools beyond")
	_, found, _ = c.Lookup(key, "t3", now)
	assert.Equal(t, Known, found, "a nameless tool does not end the list")
}

// A list is named by its tools and their schemas: answers that differ in
// anything else (descriptions, the order of the tools) give one list, kept
// once; a key given another list leaves the first to the keys that still
// hold it, and the last key forgotten frees it.
func TestIdenticalListsAreKeptOnce(t *testing.T) {
	c := NewCatalog(0)
	alice, bob, carol := ListKey{"e", "alice"}, ListKey{"e", "bob"}, ListKey{"e", "carol"}
	learn := func(key ListKey, result string) {
		t.Helper()
		page, err := c.Learn(key, []byte(result), true, now)
		require.NoError(t, err)
		require.True(t, page.Complete)
	}
	learn(alice, `{"tools":[{"name":"a","description":"Hello Alice","inputSchema":{"type":"object"}},{"name":"b","inputSchema":{"minProperties":1}}]}`)
	learn(bob, `{"tools":[{"name":"b","inputSchema":{"minProperties":1}},{"name":"a","description":"Hello Bob","inputSchema":{"type":"object"}}]}`)
	assert.Equal(t, Stats{MaxBytes: DefaultMaxBytes, Bytes: c.Stats().Bytes, Keys: 2, Lists: 1, Schemas: 2}, c.Stats())

	learn(bob, `{"tools":[{"name":"a","inputSchema":{"type":"object"}}]}`)
	assert.Equal(t, 2, c.Stats().Lists, "bob's list changed, alice's did not")
	_, found, _ := c.Lookup(alice, "b", now)
	assert.Equal(t, Known, found)
	_, found, _ = c.Lookup(bob, "b", now)
	assert.Equal(t, Absent, found)

	// The same bytes again are not read again, and make what they made.
	learn(carol, `{"tools":[{"name":"a","inputSchema":{"type":"object"}}]}`)
	assert.Equal(t, 2, c.Stats().Lists)
	_, found, names := c.Lookup(carol, "b", now)
	assert.Equal(t, Absent, found)
	assert.Equal(t, []string{"a"}, names)

	c.Forget(alice)
	assert.Equal(t, 1, c.Stats().Lists)
	assert.Equal(t, 1, c.Stats().Schemas, "b's schema went with the only list that held it")
	c.Forget(bob)
	c.Forget(carol)
	assert.Equal(t, Stats{MaxBytes: DefaultMaxBytes}, c.Stats())
}

// An answer learned again from its digest is read as it was the first
// time: its cacheScope and its ttlMs too.
func TestAnAnswerLearnedAgainKeepsItsScopeAndTTL(t *testing.T) {
	c := NewCatalog(0)
	result := listPage([]string{"a"}, "", `,"cacheScope":"public","ttlMs":60000`)
	_, err := c.Learn(ListKey{Endpoint: "e", Scope: "alice"}, result, true, now)
	require.NoError(t, err)
	c.Forget(ListKey{Endpoint: "e"})
	_, err = c.Learn(ListKey{Endpoint: "e", Scope: "bob"}, result, true, now)
	require.NoError(t, err)
	carol := ListKey{Endpoint: "e", Scope: "carol"}
	_, found, _ := c.Lookup(carol, "b", now.Add(59*time.Second))
	assert.Equal(t, Absent, found, "public, and fresh")
	_, found, _ = c.Lookup(carol, "b", now.Add(time.Minute))
	assert.Equal(t, Unlisted, found, "stale")
}

// rotating learns, under n new keys, a list of its own for each (tools
// named after the key, sharing twenty schemas), and calls what call says.
func rotating(t *testing.T, c *Catalog, n int, call func(i int) bool) {
	t.Helper()
	for i := range n {
		key := ListKey{Endpoint: "e", Scope: fmt.Sprintf("rotating-%d", i)}
		var names []string
		for j := range 20 {
			names = append(names, fmt.Sprintf("c%d_t%d", i, j))
		}
		_, err := c.Learn(key, listPage(names, "", ""), true, now)
		require.NoError(t, err)
		if call(i) {
			c.Lookup(key, names[0], now)
		}
		require.LessOrEqual(t, c.Stats().Bytes, c.Stats().MaxBytes, "after %d keys", i+1)
	}
}

// Finding: a client rotating its Authorization filled the catalog's 1,000
// lists, each evicting an arbitrary one. Past the bound, the keys that
// only listed go first: ever new credentials evict one another, and never
// a list calls use. Keys that call too are kept by how recently they did,
// within their share of the bound.
func TestRotatingCredentialsEvictNoListCallsUse(t *testing.T) {
	c := NewCatalog(1 << 20)
	steady := ListKey{Endpoint: "e", Scope: "steady"}
	var names []string
	for i := range 100 {
		names = append(names, fmt.Sprintf("steady_%d", i))
	}
	_, err := c.Learn(steady, listPage(names, "", ""), true, now)
	require.NoError(t, err)
	_, found, _ := c.Lookup(steady, "steady_7", now)
	require.Equal(t, Known, found)

	rotating(t, c, 2000, func(int) bool { return false })
	_, found, _ = c.Lookup(steady, "steady_7", now)
	assert.Equal(t, Known, found, "a list a call used outlives 2,000 that were only listed")
	assert.Greater(t, c.Stats().Evictions, uint64(1000))

	rotating(t, c, 2000, func(i int) bool {
		if i%10 == 0 {
			c.Lookup(steady, "steady_7", now)
		}
		return true
	})
	_, found, _ = c.Lookup(steady, "steady_7", now)
	assert.Equal(t, Known, found, "used every 10 keys, it stays among the used")
}

// Keys calls used keep at most 3/4 of the bound: a new list still finds
// room, and lists used long ago make it.
func TestUsedListsLeaveRoomForNewOnes(t *testing.T) {
	c := NewCatalog(256 << 10)
	list := func(i int) []byte {
		var tools []string
		for j := range 10 {
			tools = append(tools, fmt.Sprintf(`{"name":"t%d","inputSchema":{"type":"object","maxProperties":%d}}`, j, 100*i+j))
		}
		return []byte(`{"tools":[` + strings.Join(tools, ",") + `]}`)
	}
	for i := range 40 {
		key := ListKey{Endpoint: "e", Scope: fmt.Sprint(i)}
		_, err := c.Learn(key, list(i), true, now)
		require.NoError(t, err)
		c.Lookup(key, "t1", now)
		require.LessOrEqual(t, c.Stats().Bytes, c.Stats().MaxBytes)
	}
	newcomer := ListKey{Endpoint: "e", Scope: "new"}
	page, err := c.Learn(newcomer, list(99), true, now)
	require.NoError(t, err)
	assert.True(t, page.Complete)
	_, found, _ := c.Lookup(newcomer, "t1", now)
	assert.Equal(t, Known, found)
	_, found, _ = c.Lookup(ListKey{Endpoint: "e", Scope: "0"}, "t1", now)
	assert.Equal(t, NoList, found, "the least recently used went")
}

// A list that takes more than the whole bound is not kept, and evicts
// nothing: its calls pass unchecked, everyone else's are still checked.
func TestAListLargerThanTheBoundIsDroppedAlone(t *testing.T) {
	c := NewCatalog(128 << 10)
	small := ListKey{Endpoint: "e", Scope: "small"}
	_, err := c.Learn(small, listPage([]string{"a"}, "", ""), true, now)
	require.NoError(t, err)
	var tools []string
	for j := range 100 {
		tools = append(tools, fmt.Sprintf(`{"name":"t%d","inputSchema":{"type":"object","maxProperties":%d}}`, j, j))
	}
	large := ListKey{Endpoint: "e", Scope: "large"}
	page, err := c.Learn(large, []byte(`{"tools":[`+strings.Join(tools, ",")+`]}`), true, now)
	require.NoError(t, err)
	assert.True(t, page.Dropped)
	assert.False(t, page.Complete)
	_, found, _ := c.Lookup(large, "t1", now)
	assert.Equal(t, NoList, found)
	_, found, _ = c.Lookup(small, "a", now)
	assert.Equal(t, Known, found)
	stats := c.Stats()
	assert.Equal(t, 1, stats.Keys)
	assert.LessOrEqual(t, stats.Bytes, stats.MaxBytes)
}

// Listings under way count as lists do: keys that start listings and never
// end them are bounded too.
func TestListingsUnderWayAreBounded(t *testing.T) {
	c := NewCatalog(256 << 10)
	var names []string
	for j := range 200 {
		names = append(names, fmt.Sprintf("tool_%d", j))
	}
	first := listPage(names, "p2", "")
	for i := range 500 {
		_, err := c.Learn(ListKey{Endpoint: "e", Scope: fmt.Sprint(i)}, first, true, now)
		require.NoError(t, err)
		require.LessOrEqual(t, c.Stats().Bytes, c.Stats().MaxBytes)
	}
	assert.Positive(t, c.Stats().Evictions)
}
