package federation

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestACursorReadsBackTheOffsetItSealed(t *testing.T) {
	f := testFederation()
	bind := []byte("a session token")
	for _, k := range []*kind{toolsList, promptsList, resourcesList, templatesList} {
		for _, at := range [][2]int{{1, 2}, {1000, 2500}, {0, 0}, {1 << 20, 1 << 21}} {
			offset, total, err := f.offset(k, f.cursor(k, at[0], at[1], bind), bind)
			require.NoError(t, err, k.method)
			assert.Equal(t, at, [2]int{offset, total}, k.method)
		}
	}
}

func TestACursorTheGatewayDidNotWriteForThisListAndSessionIsRefused(t *testing.T) {
	f := testFederation()
	bind := []byte("a session token")
	good := f.cursor(toolsList, 1000, 2500, bind)
	raw, err := base64.RawURLEncoding.DecodeString(good)
	require.NoError(t, err)
	flipped := func(i int) string {
		b := append([]byte(nil), raw...)
		b[i] ^= 1
		return base64.RawURLEncoding.EncodeToString(b)
	}
	random := make([]byte, 32)
	_, _ = rand.Read(random)

	other := testFederation()
	other.cursorKey = []byte("another node's key, not this one")
	later := testFederation()
	later.now = func() time.Time { return f.now().Add(cursorLife + time.Second) }
	justInTime := testFederation()
	justInTime.now = func() time.Time { return f.now().Add(cursorLife) }

	for _, tc := range []struct {
		name   string
		f      *federation
		k      *kind
		cursor string
		bind   []byte
	}{
		{name: "the offset's bit flipped", cursor: flipped(3)},
		{name: "the length's bit flipped", cursor: flipped(7)},
		{name: "the time's bit flipped", cursor: flipped(15)},
		{name: "the seal's bit flipped", cursor: flipped(31)},
		{name: "truncated", cursor: good[:len(good)-1]},
		{name: "truncated to its head", cursor: base64.RawURLEncoding.EncodeToString(raw[:16])},
		{name: "lengthened", cursor: good + "AA"},
		{name: "random", cursor: base64.RawURLEncoding.EncodeToString(random)},
		{name: "padded", cursor: base64.URLEncoding.EncodeToString(raw)},
		{name: "not base64", cursor: "not a cursor!"},
		{name: "empty", cursor: ""},
		{name: "another list", k: promptsList, cursor: good},
		{name: "another session", cursor: good, bind: []byte("another session token")},
		{name: "no session", cursor: good, bind: []byte{}},
		{name: "another node's key", f: other, cursor: good},
		{name: "expired", f: later, cursor: good},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, k, b := f, toolsList, bind
			if tc.f != nil {
				f = tc.f
			}
			if tc.k != nil {
				k = tc.k
			}
			if tc.bind != nil {
				b = tc.bind
			}
			_, _, err := f.offset(k, tc.cursor, b)
			assert.ErrorIs(t, err, errCursor)
		})
	}
	_, _, err = justInTime.offset(toolsList, good, bind)
	assert.NoError(t, err, "a cursor is read for its whole life")
}

// A page is a JSON object holding page_size entries at most, and the
// cursor of the next only when more remain; following the cursors gives
// every entry once, in order.
func TestPagesAreJSONAndTheirCursorsLeadThroughTheWholeList(t *testing.T) {
	s := testServer("a", nil, nil)
	bind := []byte("token")
	for _, tc := range []struct{ entries, pageSize, pages int }{
		{0, 3, 1}, {1, 3, 1}, {3, 3, 1}, {4, 3, 2}, {7, 3, 3}, {9, 3, 3}, {5, 1, 5},
	} {
		t.Run(fmt.Sprintf("%d by %d", tc.entries, tc.pageSize), func(t *testing.T) {
			f := testFederation(s)
			f.pageSize = tc.pageSize
			var names []string
			for i := range tc.entries {
				names = append(names, fmt.Sprintf("t%d", i))
			}
			entries := entriesOf(s, names...)
			for _, e := range entries {
				e.advertised = e.own
			}
			var got []string
			offset, pages := 0, 0
			for {
				pages++
				require.LessOrEqual(t, pages, tc.entries+1)
				out := f.page(toolsList, entries, offset, bind)
				require.True(t, json.Valid(out), "%s", out)
				var page struct {
					Tools      []struct{ Name string } `json:"tools"`
					NextCursor *string                 `json:"nextCursor"`
				}
				require.NoError(t, json.Unmarshal(out, &page))
				require.NotNil(t, page.Tools, "an empty list is [], not null: %s", out)
				assert.LessOrEqual(t, len(page.Tools), tc.pageSize)
				for _, tool := range page.Tools {
					got = append(got, tool.Name)
				}
				if page.NextCursor == nil {
					break
				}
				var total int
				var err error
				offset, total, err = f.offset(toolsList, *page.NextCursor, bind)
				require.NoError(t, err)
				assert.Equal(t, tc.entries, total)
			}
			assert.Equal(t, tc.pages, pages)
			assert.Equal(t, names, got)
		})
	}
}

// A page past the end of the list (a cursor cut from a longer one) is
// empty, and valid.
func TestAPagePastTheEndIsEmpty(t *testing.T) {
	s := testServer("a", nil, nil)
	f := testFederation(s)
	out := f.page(toolsList, entriesOf(s, "x"), 5, nil)
	assert.JSONEq(t, `{"tools":[]}`, string(out))
}

// An entry advertised under another name is listed under it, with every
// other member as its server wrote it, and the server it comes from in its
// _meta.
func TestAnEntryIsListedUnderItsAdvertisedName(t *testing.T) {
	s := testServer("b", nil, nil)
	f := testFederation(s)
	e := &entry{server: s, own: "search", advertised: "b__search", raw: []byte(`{"name":"search","description":"finds \u003cthings\u003e","inputSchema":{"type":"object"}}`)}
	plain := &entry{server: s, own: "fetch", advertised: "fetch", raw: []byte(`{"name":"fetch", "x":1}`)}
	out := f.page(toolsList, []*entry{e, plain}, 0, nil)
	assert.JSONEq(t, `{"tools":[
		{"name":"b__search","description":"finds <things>","inputSchema":{"type":"object"},"_meta":{"caddymcp.dev/server":"b"}},
		{"name":"fetch","x":1,"_meta":{"caddymcp.dev/server":"b"}}]}`, string(out))
	assert.Contains(t, string(out), `{"name":"fetch", "x":1,"_meta":{"caddymcp.dev/server":"b"}}`, "an entry under its own name is the server's bytes, and its server")
}
