package results

import (
	"encoding/json"
	"math/rand/v2"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/caddyserver/certmagic"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/caddymcp/caddy-mcp/envelope"
	"github.com/caddymcp/caddy-mcp/feature"
	"github.com/caddymcp/caddy-mcp/feature/featuretest"
	"github.com/caddymcp/caddy-mcp/resultstore"
)

// clock is a store's time, moved by the test.
type clock struct{ ns atomic.Int64 }

func (c *clock) now() time.Time      { return time.Unix(0, c.ns.Load()) }
func (c *clock) add(d time.Duration) { c.ns.Add(int64(d)) }
func newClock() *clock               { c := new(clock); c.ns.Store(time.Now().UnixNano()); return c }
func sessionCall(t *testing.T, sid string) *feature.Exchange {
	x := featuretest.Post(t, `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"logs"}}`)
	if sid != "" {
		x.Request.Header.Set("Mcp-Session-Id", sid)
	}
	return x
}

// pager is budgets whose "log*" tools page, on a file storage of the
// test's, with chunks of 4 KiB.
func pager(t *testing.T, budget int64, lim resultstore.Limits) (*Budgets, *resultstore.Store, *clock) {
	t.Helper()
	c := newClock()
	lim.Chunk = resultstore.MinChunk
	s, err := resultstore.Open(&certmagic.FileStorage{Path: t.TempDir()}, []byte(strings.Repeat("k", 32)), lim, c.now)
	require.NoError(t, err)
	b := newBudgets(t, &Config{Max: budget, Page: []string{"log*"}, Store: &StoreConfig{Key: "{env.KEY}"}})
	b.SetStore(s)
	return b, s, c
}

// keepIn gives msg to the hook of x in pieces of n bytes, as the core
// gives what it cannot hold; it returns the answer or the hook's words.
func keepIn(t *testing.T, b *Budgets, x *feature.Exchange, msg string, n int) ([]byte, *envelope.Envelope) {
	t.Helper()
	h, ok := b.Open(x).(*keeping)
	require.True(t, ok, "page names the tool")
	c := h.Cut(x)
	for i := 0; i < len(msg); i += n {
		if !c.Write([]byte(msg[i:min(i+n, len(msg))])) {
			break
		}
	}
	out, err := c.Close()
	if err != nil {
		e := h.Unreadable(x, err)
		return nil, &e
	}
	return out, nil
}

// mixedText is a text of n characters or so, with multibyte ones, and the
// JSON string writing it with escapes of every kind (surrogate pairs
// too), so that characters and escapes straddle pieces, chunks and pages.
func mixedText(n int) (text, written string) {
	r := rand.New(rand.NewPCG(1, 2))
	runes := []rune("abc é€😀\n\t\"\\/<")
	var t, w strings.Builder
	for range n {
		c := runes[r.IntN(len(runes))]
		t.WriteRune(c)
		switch {
		case r.IntN(3) == 0 && c > 0xffff:
			c -= 0x10000
			w.WriteString(`\u` + strconv.FormatInt(int64(0xd800+(c>>10)), 16) + `\u` + strconv.FormatInt(int64(0xdc00+(c&0x3ff)), 16))
		case r.IntN(3) == 0 && c <= 0xffff:
			w.WriteString(`\u` + strings.ToUpper(strconv.FormatInt(int64(c)+0x10000, 16)[1:]))
		default:
			q, _ := json.Marshal(string(c))
			w.Write(q[1 : len(q)-1])
		}
	}
	return t.String(), w.String()
}

type pagedResult struct {
	Result struct {
		Content []struct {
			Type     string `json:"type"`
			Text     string `json:"text"`
			URI      string `json:"uri"`
			MimeType string `json:"mimeType"`
			Size     int64  `json:"size"`
		} `json:"content"`
		IsError bool `json:"isError"`
	} `json:"result"`
}

func TestALargeTextIsKeptPreviewedLinkedAndReadBackByteForByte(t *testing.T) {
	text, written := mixedText(60000)
	msg := `{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"` + written + `"}],"isError":false}}`
	for _, n := range []int{7, 4096, len(msg)} {
		b, _, _ := pager(t, 8192, resultstore.Limits{})
		out, words := keepIn(t, b, sessionCall(t, "s1"), msg, n)
		require.Nil(t, words)
		require.LessOrEqual(t, len(out), 8192, "within the budget")
		var r pagedResult
		require.NoError(t, json.Unmarshal(out, &r), "%s", out)
		require.Len(t, r.Result.Content, 3)
		assert.False(t, r.Result.IsError)
		warning, err := envelope.Parse(r.Result.Content[0].Text)
		require.NoError(t, err)
		assert.Equal(t, Truncated, warning.Code)
		assert.Equal(t, envelope.SeverityWarning, warning.Severity)
		preview, link := r.Result.Content[1].Text, r.Result.Content[2]
		assert.True(t, strings.HasPrefix(text, preview), "the text's beginning")
		assert.Greater(t, len(preview), 3000, "the budget is used")
		assert.Contains(t, warning.Message, "You have its first "+strconv.Itoa(len(preview))+" bytes")
		assert.Contains(t, warning.Recovery, link.URI+"?from="+strconv.Itoa(len(preview)))
		assert.Equal(t, "resource_link", link.Type)
		assert.Equal(t, "text/plain", link.MimeType)
		assert.Equal(t, int64(len(text)), link.Size)
		assert.Equal(t, text, readAll(t, b, link.URI, "s1"), "pieces of %d", n)
	}
}

// readAll follows the pages of uri from its first, as session sid.
func readAll(t *testing.T, b *Budgets, uri, sid string) string {
	t.Helper()
	var all strings.Builder
	for pages := 0; uri != ""; pages++ {
		require.Less(t, pages, 1000)
		body := read(t, b, uri, sid)
		require.LessOrEqual(t, len(body), b.pageBudget(), "a page within the budget")
		var p struct {
			Result struct {
				Contents []struct{ URI, MimeType, Text string } `json:"contents"`
				Meta     map[string]any                         `json:"_meta"`
			} `json:"result"`
		}
		require.NoError(t, json.Unmarshal(body, &p), "%s", body)
		require.Len(t, p.Result.Contents, 1, "%s", body)
		assert.Equal(t, uri, p.Result.Contents[0].URI)
		assert.Equal(t, "text/plain", p.Result.Contents[0].MimeType)
		assert.True(t, utf8.ValidString(p.Result.Contents[0].Text))
		assert.EqualValues(t, all.Len(), p.Result.Meta[MetaFrom])
		all.WriteString(p.Result.Contents[0].Text)
		next, _ := p.Result.Meta[MetaNext].(string)
		uri = next
	}
	return all.String()
}

// read answers resources/read of uri, as session sid.
func read(t *testing.T, b *Budgets, uri, sid string) []byte {
	t.Helper()
	q, _ := json.Marshal(uri)
	x := featuretest.Post(t, `{"jsonrpc":"2.0","id":"r","method":"resources/read","params":{"uri":`+string(q)+`}}`)
	if sid != "" {
		x.Request.Header.Set("Mcp-Session-Id", sid)
	}
	h := b.Answer(x)
	require.NotNil(t, h, "the gateway answers its own links")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, x.Request)
	return w.Body.Bytes()
}

func TestAnotherOwnerAnExpiredAMadeUpOrAMalformedLinkAreTheSameNotFound(t *testing.T) {
	b, _, clk := pager(t, 4096, resultstore.Limits{TTL: time.Hour})
	msg := `{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"` + strings.Repeat("x", 20000) + `"}]}}`
	out, words := keepIn(t, b, sessionCall(t, "s1"), msg, 1000)
	require.Nil(t, words)
	var r pagedResult
	require.NoError(t, json.Unmarshal(out, &r))
	link := r.Result.Content[2].URI
	require.Contains(t, string(read(t, b, link, "s1")), `"text":"xxx`)

	notFound := string(read(t, b, link, "s2"))
	var e struct {
		Error struct{ Data struct{ Code string } } `json:"error"`
	}
	require.NoError(t, json.Unmarshal([]byte(notFound), &e))
	assert.Equal(t, "NOT_FOUND", e.Error.Data.Code)
	for _, other := range []struct{ uri, sid string }{
		{link, ""}, {link + "?from=100", "s2"}, {URIPrefix + exampleID, "s1"}, {link + "x", "s1"},
		{link + "?from=-1", "s1"}, {link + "?from=1&x=2", "s1"}, {URIPrefix, "s1"},
	} {
		assert.Equal(t, notFound, string(read(t, b, other.uri, other.sid)), "%+v", other)
	}
	clk.add(time.Hour)
	assert.Equal(t, notFound, string(read(t, b, link, "s1")), "expired")
}

func TestResourcesListsAndOtherURIsPassUntouched(t *testing.T) {
	b, _, _ := pager(t, 4096, resultstore.Limits{})
	for _, body := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"resources/list"}`,
		`{"jsonrpc":"2.0","id":1,"method":"resources/templates/list"}`,
		`{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{"uri":"file:///etc/hosts"}}`,
	} {
		assert.Nil(t, b.Answer(featuretest.Post(t, body)), body)
	}
}

func TestAPrincipalReadsWhatItsCallsKeptFromAnySession(t *testing.T) {
	b, _, _ := pager(t, 4096, resultstore.Limits{})
	x := sessionCall(t, "s1")
	x.Principal = &feature.Principal{Issuer: "https://idp", Subject: "alice"}
	out, words := keepIn(t, b, x, `{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"`+strings.Repeat("y", 9000)+`"}]}}`, 512)
	require.Nil(t, words)
	var r pagedResult
	require.NoError(t, json.Unmarshal(out, &r))
	assert.Contains(t, string(read(t, b, r.Result.Content[2].URI, "s1")), "NOT_FOUND", "the principal's, not the session's")
}

// A request id as long as the budget leaves no room for text: the page
// still gives some, and names the next one, rather than read as the end.
func TestAReadWithAnIDAsLongAsTheBudgetStillReadsOn(t *testing.T) {
	b, _, _ := pager(t, 4096, resultstore.Limits{})
	msg := `{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"` + strings.Repeat("x", 20000) + `"}]}}`
	out, words := keepIn(t, b, sessionCall(t, "s1"), msg, 1000)
	require.Nil(t, words)
	var r pagedResult
	require.NoError(t, json.Unmarshal(out, &r))
	q, _ := json.Marshal(r.Result.Content[2].URI)
	x := featuretest.Post(t, `{"jsonrpc":"2.0","id":"`+strings.Repeat("i", 5000)+`","method":"resources/read","params":{"uri":`+string(q)+`}}`)
	x.Request.Header.Set("Mcp-Session-Id", "s1")
	w := httptest.NewRecorder()
	b.Answer(x).ServeHTTP(w, x.Request)
	var p struct {
		Result struct {
			Contents []struct{ Text string } `json:"contents"`
			Meta     map[string]any          `json:"_meta"`
		} `json:"result"`
	}
	require.NoError(t, json.Unmarshal(w.Body.Bytes(), &p), "%s", w.Body.Bytes())
	require.Len(t, p.Result.Contents, 1)
	assert.Len(t, p.Result.Contents[0].Text, minText)
	assert.Contains(t, p.Result.Meta[MetaNext], "?from="+strconv.Itoa(minText))
}
