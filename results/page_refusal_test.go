package results

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/caddymcp/caddy-mcp/envelope"
	"github.com/caddymcp/caddy-mcp/resultstore"
)

// bigText is a response of a text of n bytes.
func bigText(n int) string {
	return `{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"` + strings.Repeat("z", n) + `"}]}}`
}

func TestAFloodStopsAtTheCallersBoundAndSaysWhy(t *testing.T) {
	b, s, _ := pager(t, 4096, resultstore.Limits{PerOwnerCount: 2, PerOwner: 1 << 20})
	for range 2 {
		_, words := keepIn(t, b, sessionCall(t, "s1"), bigText(10000), 1000)
		require.Nil(t, words)
	}
	_, words := keepIn(t, b, sessionCall(t, "s1"), bigText(10000), 1000)
	require.NotNil(t, words)
	assert.Equal(t, TooLarge, words.Code)
	assert.Contains(t, words.Message, "you already have 2 results kept, the most one caller may have")
	assert.Contains(t, words.Message, "Nothing of it was kept")
	assert.Contains(t, words.Message, "larger than its budget of 4096 bytes", "read in part: what was read is not its size")

	_, words = keepIn(t, b, sessionCall(t, "s2"), bigText(2<<20), 64<<10)
	require.NotNil(t, words)
	assert.Contains(t, words.Message, "would pass 1048576 bytes, the most one caller may have")
	assert.Equal(t, 2, s.Status().Results, "the refused results are not kept")
	assert.Zero(t, s.Status().Writing)
}

func TestAResultOverTheBoundOfOneIsRefusedAndItsReadingStopped(t *testing.T) {
	b, s, _ := pager(t, 4096, resultstore.Limits{MaxResult: 64 << 10})
	h := b.Open(sessionCall(t, "s1")).(*keeping)
	c := h.Cut(nil)
	msg := bigText(1 << 20)
	more := true
	read := 0
	for ; more && read < len(msg); read += 4096 {
		more = c.Write([]byte(msg[read:min(read+4096, len(msg))]))
	}
	assert.False(t, more, "the reading stops at the bound")
	assert.Less(t, read, 128<<10)
	_, err := c.Close()
	words := h.Unreadable(nil, err)
	assert.Contains(t, words.Message, "its text is over 65536 bytes, the most one result may keep")
	assert.Zero(t, s.Status().Results+s.Status().Writing)
}

func TestACallWithNoOwnerIsRefusedSayingNothingWasKept(t *testing.T) {
	b, s, _ := pager(t, 4096, resultstore.Limits{})
	_, words := keepIn(t, b, sessionCall(t, ""), bigText(10000), 1000)
	require.NotNil(t, words)
	assert.Equal(t, TooLarge, words.Code)
	assert.Contains(t, words.Message, "neither a verified identity nor a session (Mcp-Session-Id)")
	assert.Zero(t, s.Status().Results+s.Status().Writing)

	x := sessionCall(t, "")
	h := b.Open(x).(*keeping)
	_, err := h.Message(x, []byte(bigText(10000)))
	words2 := h.Unreadable(x, err)
	assert.Contains(t, words2.Message, strconv.Itoa(len(bigText(10000)))+" bytes, over its budget of 4096 bytes", "held whole: its size is known")
}

func TestWhatCannotBeKeptFallsBackToTheRefusal(t *testing.T) {
	long := strings.Repeat("w", 10000)
	for name, msg := range map[string]string{
		"structuredContent": `{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"` + long + `"}],"structuredContent":{"a":1}}}`,
		"no text block":     `{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"image","data":"` + long + `","mimeType":"image/png"}]}}`,
		"text before type":  `{"jsonrpc":"2.0","id":7,"result":{"content":[{"text":"` + long + `","type":"text"}]}}`,
		"text given twice":  `{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"` + long + `","text":"b"}]}}`,
		"another id":        `{"jsonrpc":"2.0","id":8,"result":{"content":[{"type":"text","text":"` + long + `"}]}}`,
		"a bad escape":      `{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"` + long + `\x"}]}}`,
	} {
		b, s, _ := pager(t, 4096, resultstore.Limits{})
		_, words := keepIn(t, b, sessionCall(t, "s1"), msg, 999)
		require.NotNil(t, words, name)
		assert.Equal(t, TooLarge, words.Code, name)
		assert.NotContains(t, words.Message, "could not keep it", name)
		assert.Zero(t, s.Status().Results+s.Status().Writing, "%s: the writer aborted", name)
	}
}

func TestTextBlocksAreKeptOneAfterAnotherAndOtherBlocksCounted(t *testing.T) {
	b, _, _ := pager(t, 4096, resultstore.Limits{})
	msg := `{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"` + strings.Repeat("a", 6000) + `"},` +
		`{"type":"image","data":"AAAA","mimeType":"image/png"},{"type":"text","text":"b\u00e9"}],"isError":true}}`
	h := b.Open(sessionCall(t, "s1")).(*keeping)
	out, err := h.Message(nil, []byte(msg))
	require.NoError(t, err)
	var r pagedResult
	require.NoError(t, json.Unmarshal(out, &r))
	assert.True(t, r.Result.IsError, "as the server said")
	warning, err := envelope.Parse(r.Result.Content[0].Text)
	require.NoError(t, err)
	assert.Contains(t, warning.Message, "1 content block that is not text was left out")
	assert.Equal(t, strings.Repeat("a", 6000)+"\nbé", readAll(t, b, r.Result.Content[2].URI, "s1"))
}

func TestPageNeedsAKeyAndAStoreNeedsPage(t *testing.T) {
	err := (&Config{Max: 1000, Page: []string{"*"}}).Validate()
	require.ErrorIs(t, err, errNoKey)
	assert.Contains(t, err.Error(), "whoever runs the server can read")
	assert.Error(t, (&Config{Max: 1000, Store: &StoreConfig{Key: "k"}}).Validate())
	assert.NoError(t, (&Config{Max: 1000, Page: []string{"*"}, Store: &StoreConfig{Key: "{env.K}"}}).Validate())
	_, _, err = openStore(&StoreConfig{Key: "short"}, nil)
	assert.ErrorContains(t, err, "the key is 5 bytes")
}

func TestTheSweepStopsAtCleanupAndSurvivesAPanic(t *testing.T) {
	_, s, _ := pager(t, 4096, resultstore.Limits{})
	sweep(s, zap.NewNop()).Stop()
	assert.NotPanics(t, func() { sweepOnce(nil, zap.NewNop()) }, "a sweep's panic is recovered")
	sweepOnce(s, zap.NewNop())
	assert.False(t, s.Status().LastSweep.IsZero(), "a sweep ran")
}
