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
	c := NewCatalog(0, 0)
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
	assert.Len(t, s.Check([]byte(`{"n":"x"}`)), 1)
	_, found, names := c.Lookup(key, "d", now)
	assert.Equal(t, Absent, found)
	assert.Equal(t, []string{"a", "b", "c"}, names)

	_, found, _ = c.Lookup(ListKey{Endpoint: key.Endpoint, Scope: "bob"}, "a", now)
	assert.Equal(t, NoList, found, "private to alice's scope")
}

func TestAPageWithoutItsStartLeavesTheListIncomplete(t *testing.T) {
	c := NewCatalog(0, 0)
	key := ListKey{Endpoint: "e"}
	_, err := c.Learn(key, listPage([]string{"z"}, "", ""), false, now)
	require.NoError(t, err)
	_, found, _ := c.Lookup(key, "z", now)
	assert.Equal(t, Known, found)
	_, found, _ = c.Lookup(key, "y", now)
	assert.Equal(t, Unlisted, found, "not known to be absent")
}

func TestPublicListsAreSharedAndTTLBoundsAbsence(t *testing.T) {
	c := NewCatalog(0, 0)
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
	c := NewCatalog(0, 0)
	key := ListKey{Endpoint: "e"}
	page, err := c.Learn(key, []byte(`{"tools":[{"name":"ok","inputSchema":{"type":"object"}},{"name":"bad","inputSchema":{"type":"object","properties":{"a":{"$ref":"https://evil.example/s.json"}}}},{"name":"worse","inputSchema":{"type":7}}]}`), true, now)
	require.NoError(t, err)
	assert.Len(t, page.Bad, 2)
	_, found, _ := c.Lookup(key, "bad", now)
	assert.Equal(t, BadSchema, found)
}

func TestCatalogIsBounded(t *testing.T) {
	c := NewCatalog(3, 2)
	for i := range 10 {
		_, err := c.Learn(ListKey{Endpoint: fmt.Sprint(i)}, []byte(fmt.Sprintf(`{"tools":[{"name":"t","inputSchema":{"type":"object","maxProperties":%d}}]}`, i)), true, now)
		require.NoError(t, err)
	}
	lists, schemas := c.Len()
	assert.Equal(t, 3, lists)
	assert.Equal(t, 2, schemas)
}

func TestEvictedSchemasAreFreedAndTruncatedListsIncomplete(t *testing.T) {
	c := NewCatalog(10, 1)
	key := ListKey{Endpoint: "e"}
	_, err := c.Learn(key, []byte(`{"tools":[{"name":"a","inputSchema":{"type":"object","minProperties":1}},{"name":"b","inputSchema":{"type":"object","minProperties":2}}]}`), true, now)
	require.NoError(t, err)
	_, schemas := c.Len()
	assert.Equal(t, 1, schemas, "one schema held: the other's list entry names it only")
	_, fa, _ := c.Lookup(key, "a", now)
	_, fb, _ := c.Lookup(key, "b", now)
	assert.ElementsMatch(t, []Found{Known, Unlisted}, []Found{fa, fb}, "the evicted one passes unchecked")

	var tools []string
	for i := range MaxTools + 1 {
		tools = append(tools, fmt.Sprintf(`{"name":"t%d","inputSchema":{"type":"object"}}`, i))
	}
	_, err = c.Learn(key, []byte(`{"tools":[{"name":""},`+strings.Join(tools, ",")+`]}`), true, now)
	require.NoError(t, err)
	_, found, _ := c.Lookup(key, "zzz", now)
	assert.Equal(t, Unlisted, found, "a list cut at MaxTools says nothing of the tools beyond")
	_, found, _ = c.Lookup(key, "t3", now)
	assert.Equal(t, Known, found, "a nameless tool does not end the list")
}
