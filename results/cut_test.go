package results

import (
	"encoding/json"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/caddymcp/caddy-mcp/envelope"
	"github.com/caddymcp/caddy-mcp/feature"
	"github.com/caddymcp/caddy-mcp/feature/featuretest"
)

// cutResult is a cut response, decoded.
type cutResult struct {
	ID     json.RawMessage `json:"id"`
	Result struct {
		Content []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"content"`
		IsError bool `json:"isError"`
	} `json:"result"`
}

// cutter opens the hook that cuts tool "logs" results to budget.
func cutter(t *testing.T, budget int64) (*feature.Exchange, *cutting) {
	t.Helper()
	b := newBudgets(t, &Config{Max: budget, Truncate: []string{"log*"}})
	x := featuretest.Post(t, `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"logs"}}`)
	h, ok := b.Open(x).(*cutting)
	require.True(t, ok, "truncate names the tool: its hook cuts")
	return x, h
}

// cutInPieces gives msg to a cut in pieces of n bytes, as the core does
// with what it cannot hold.
func cutInPieces(h *cutting, msg string, n int) ([]byte, error) {
	c := h.Cut(nil)
	for i := 0; i < len(msg); i += n {
		c.Write([]byte(msg[i:min(i+n, len(msg))]))
	}
	return c.Close()
}

func decodeCut(t *testing.T, out []byte, budget int) cutResult {
	t.Helper()
	require.LessOrEqual(t, len(out), budget, "never longer than the budget")
	var r cutResult
	require.NoError(t, json.Unmarshal(out, &r), "%s", out)
	require.NotEmpty(t, r.Result.Content)
	warning, err := envelope.Parse(r.Result.Content[0].Text)
	require.NoError(t, err)
	assert.Equal(t, Truncated, warning.Code)
	assert.Equal(t, envelope.SeverityWarning, warning.Severity)
	return r
}

func TestATextResultIsCutToItsBudgetAndKeepsItsIsError(t *testing.T) {
	x, h := cutter(t, 2000)
	text := strings.Repeat("line of a log\n", 500)
	// The Go SDK writes isError after the content: it is read past the cut.
	msg := `{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":` + quote(text) + `}],"isError":true}}`
	out, err := h.Message(x, []byte(msg))
	require.NoError(t, err)
	r := decodeCut(t, out, 2000)
	assert.Equal(t, "7", string(r.ID))
	assert.True(t, r.Result.IsError, "as the server said")
	require.Len(t, r.Result.Content, 2)
	kept := r.Result.Content[1].Text
	assert.True(t, strings.HasPrefix(text, kept), "the text's beginning, as written")
	assert.Greater(t, len(kept), 1000, "the budget is used, not wasted")
	assert.Contains(t, r.Result.Content[0].Text, "the server wrote "+fmt.Sprint(len(msg))+" bytes")

	for _, n := range []int{1, 7, 512, 4096} {
		pieces, err := cutInPieces(h, msg, n)
		require.NoError(t, err)
		assert.Equal(t, string(out), string(pieces), "in pieces of %d bytes: the same answer", n)
	}
}

// The TypeScript SDK writes the result first and the id last.
func TestTheIDIsMatchedWhereverItComes(t *testing.T) {
	x, h := cutter(t, 1000)
	msg := `{"result":{"isError":false,"content":[{"type":"text","text":"` + strings.Repeat("é", 2000) + `"}]},"jsonrpc":"2.0","id":7}`
	out, err := h.Message(x, []byte(msg))
	require.NoError(t, err)
	r := decodeCut(t, out, 1000)
	assert.False(t, r.Result.IsError)
	assert.True(t, utf8.ValidString(r.Result.Content[1].Text))

	_, err = cutInPieces(h, strings.Replace(msg, `"id":7`, `"id":8`, 1), 100)
	assert.Error(t, err, "another request's response is not the call's to cut")
}

func TestBlocksThatFitAreKeptWholeAndTheRestDroppedNeverCut(t *testing.T) {
	x, h := cutter(t, 1500)
	small := `{"type":"text","text":"first"}`
	image := `{"type":"image","mimeType":"image/png","data":"` + strings.Repeat("A", 4000) + `"}`
	for name, c := range map[string]struct {
		blocks  []string
		texts   []string
		dropped string
	}{
		"an image that does not fit is dropped, and what follows it": {
			blocks: []string{small, image, small}, texts: []string{"first"}, dropped: "2 more content blocks",
		},
		"a text that does not fit is cut, and what follows dropped": {
			blocks: []string{small, `{"type":"text","text":"` + strings.Repeat("b", 3000) + `"}`, image},
			texts:  []string{"first", strings.Repeat("b", 3000)}, dropped: "1 more content block was",
		},
	} {
		msg := `{"jsonrpc":"2.0","id":7,"result":{"content":[` + strings.Join(c.blocks, ",") + `]}}`
		out, err := h.Message(x, []byte(msg))
		require.NoError(t, err, name)
		r := decodeCut(t, out, 1500)
		require.Len(t, r.Result.Content, 1+len(c.texts), name)
		assert.Equal(t, "first", r.Result.Content[1].Text, name)
		if len(c.texts) > 1 {
			assert.True(t, strings.HasPrefix(c.texts[1], r.Result.Content[2].Text), name)
		}
		assert.Contains(t, r.Result.Content[0].Text, c.dropped, name)
		assert.NotContains(t, string(out), `"image"`, name)
	}
}

func TestWhatCannotBeCutIsRefusedWhole(t *testing.T) {
	x, h := cutter(t, 1000)
	long := strings.Repeat("x", 2000)
	for name, msg := range map[string]string{
		"structuredContent":          `{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"a"}],"structuredContent":{"rows":"` + long + `"}}}`,
		"an image first":             `{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"image","mimeType":"image/png","data":"` + long + `"}]}}`,
		"an error":                   `{"jsonrpc":"2.0","id":7,"error":{"code":-32603,"message":"` + long + `"}}`,
		"isError twice":              `{"jsonrpc":"2.0","id":7,"result":{"isError":false,"content":[{"type":"text","text":"` + long + `"}],"isError":true}}`,
		"an escaped key":             `{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"` + long + `"}],"is\u0045rror":true}}`,
		"a broken structure":         `{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"` + long + `"}]]}`,
		"an unfinished response":     `{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"` + long,
		"nesting past the bound":     `{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"a","x":` + strings.Repeat("[", 1001) + strings.Repeat("]", 1001) + `}],"pad":"` + long + `"}}`,
		"a content that is no array": `{"jsonrpc":"2.0","id":7,"result":{"content":"` + long + `"}}`,
		"a block without a type":     `{"jsonrpc":"2.0","id":7,"result":{"content":[{"text":"` + long + `"}]}}`,
		"a type that is no string":   `{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":null,"text":"` + long + `"}]}}`,
		"a type given twice":         `{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","type":"image","text":"` + long + `"}]}}`,
		"a block key escaped":        `{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","typ\u0065":"image","text":"` + long + `"}]}}`,
		// What the cut reads is read one way (internal/jsonrpc, oneway.go).
		"a result given twice":              `{"jsonrpc":"2.0","id":7,"result":{"content":[]},"result":{"content":[{"type":"text","text":"` + long + `"}]}}`,
		"a result in another case":          `{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"` + long + `"}]},"Result":{"content":[]}}`,
		"an id in another case":             `{"jsonrpc":"2.0","id":7,"ID":8,"result":{"content":[{"type":"text","text":"` + long + `"}]}}`,
		"an error in another case":          `{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"` + long + `"}]},"Error":{"code":1,"message":"x"}}`,
		"content in another case":           `{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"` + long + `"}],"Content":[]}}`,
		"isError folded":                    `{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"` + long + `"}],"iſError":true}}`,
		"structuredContent in another case": `{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"a"}],"StructuredContent":{"rows":"` + long + `"}}}`,
		"a type in another case":            `{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","TYPE":"image","text":"` + long + `"}]}}`,
		"a text in another case":            `{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"` + long + `","Text":"a"}]}}`,
		"a key of invalid UTF-8 escaped":    `{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"` + long + `"}],"\udc00":1}}`,
	} {
		_, err := h.Message(x, []byte(msg))
		var over errOverBudget
		require.ErrorAs(t, err, &over, name)
		assert.Equal(t, len(msg), over.size, name)
		env := h.Unreadable(x, err)
		assert.Equal(t, TooLarge, env.Code, name)
	}
}

// What the cut does not read may be given twice or in another letter
// case, and invalid UTF-8 is a key of its own: the response is cut.
func TestWhatTheCutDoesNotReadMayBeGivenTwice(t *testing.T) {
	x, h := cutter(t, 1000)
	long := strings.Repeat("x", 2000)
	for name, msg := range map[string]string{
		"jsonrpc in another case": `{"jsonrpc":"2.0","JSONRPC":"1","id":7,"result":{"content":[{"type":"text","text":"` + long + `"}]}}`,
		"_meta twice":             `{"jsonrpc":"2.0","id":7,"result":{"_meta":{},"_META":{"a":1,"A":2},"content":[{"type":"text","text":"` + long + `"}]}}`,
		"a block's own key twice": `{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","x":1,"X":2,"text":"` + long + `"}]}}`,
		"a key of invalid UTF-8":  "{\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{\"is\xffError\":true,\"content\":[{\"type\":\"text\",\"text\":\"" + long + "\"}]}}",
		"a dotless i is not an i": `{"jsonrpc":"2.0","id":7,"ıd":8,"result":{"content":[{"type":"text","text":"` + long + `"}]}}`,
	} {
		out, err := h.Message(x, []byte(msg))
		require.NoError(t, err, name)
		r := decodeCut(t, out, 1000)
		assert.Len(t, r.Result.Content, 2, name)
	}
}

// A cut text ends at a character: never inside one, an escape, or a
// surrogate pair.
func TestACutNeverSplitsACharacterOrAnEscape(t *testing.T) {
	text := strings.Repeat(`a\u00e9\n\"\\😀\ud83d\ude00é\ud83dabcdé`, 200)
	msg := `{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"` + text + `"}]}}`
	var whole string
	require.NoError(t, json.Unmarshal([]byte(`"`+text+`"`), &whole))
	for budget := int64(1900); budget < 2000; budget++ {
		x, h := cutter(t, budget)
		out, err := h.Message(x, []byte(msg))
		require.NoError(t, err, budget)
		r := decodeCut(t, out, int(budget))
		kept := r.Result.Content[1].Text
		assert.True(t, utf8.ValidString(kept), budget)
		assert.True(t, strings.HasPrefix(whole, kept), "budget %d: %q", budget, kept[max(0, len(kept)-20):])
	}
}

// An escape's second byte is read as part of it, even where plain bytes
// are skipped at speed: one escape, an odd number, ends the string where it
// ends.
func TestAnOddNumberOfEscapesEndsTheTextWhereItEnds(t *testing.T) {
	x, h := cutter(t, 2000)
	msg := `{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":` + quote(strings.Repeat("x", 3000)+"\n") + `}],"isError":true}}`
	for _, n := range []int{len(msg), 1, 3000} {
		out, err := cutInPieces(h, msg, n)
		require.NoError(t, err, n)
		assert.True(t, decodeCut(t, out, 2000).Result.IsError, n)
	}
	_, err := h.Message(x, []byte(msg))
	require.NoError(t, err)
}

// Text that runs past the bytes kept (a long _meta before the content) is
// cut where they end, never inside a character.
func TestTextCutWhereTheHeadEndsKeepsWholeCharacters(t *testing.T) {
	msg := `{"jsonrpc":"2.0","id":7,"result":{"_meta":{"pad":"` + strings.Repeat("p", 2000) + `"},"content":[{"type":"text","text":"` + strings.Repeat("é", 3000) + `"}]}}`
	for budget := int64(3000); budget < 3010; budget++ {
		x, h := cutter(t, budget)
		out, err := h.Message(x, []byte(msg))
		require.NoError(t, err, budget)
		kept := decodeCut(t, out, int(budget)).Result.Content[1].Text
		assert.True(t, utf8.ValidString(kept) && strings.Trim(kept, "é") == "", "budget %d", budget)
	}
}

// A response that goes on past what a cut reads (one that never ends) is
// refused there: the gateway stops reading it.
func TestAResponseLongerThanACutReadsIsRefused(t *testing.T) {
	x, h := cutter(t, 4096)
	c := newCut(h.held)
	c.maxRead = 1 << 20
	require.True(t, c.Write([]byte(`{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"`)))
	piece := []byte(strings.Repeat("x", 64<<10))
	more := 0
	for c.Write(piece) {
		more++
	}
	assert.Equal(t, 15, more, "it read up to its bound, then no more")
	_, err := c.Close()
	var over errOverBudget
	require.ErrorAs(t, err, &over)
	assert.Contains(t, h.Unreadable(x, err).Message, "larger than its budget of 4096 bytes", "how much more is not known")
}

// A result of any size costs the cut its budget and a constant.
func TestACutHoldsTheBudgetWhateverTheResultsSize(t *testing.T) {
	_, h := cutter(t, 64<<10)
	piece := []byte(strings.Repeat("x", 32<<10))
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	c := h.Cut(nil)
	c.Write([]byte(`{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"`))
	for range 1600 { // 50 MiB
		c.Write(piece)
	}
	c.Write([]byte(`"}],"isError":false}}`))
	out, err := c.Close()
	runtime.ReadMemStats(&after)
	require.NoError(t, err)
	assert.Greater(t, len(out), 63<<10, "the budget is used")
	assert.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(2*(64<<10)+32<<10), "allocated for 50 MiB read: the budget, its answer and a constant")
}

func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// Whatever a server writes, the cut answers valid JSON within the budget,
// or refuses: never a panic.
func FuzzCut(f *testing.F) {
	f.Add(`{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"hello world, hello world"}],"isError":true}}`, 120)
	f.Add(`{"result":{"content":[{"text":"\u00e9\ud83d\ude00 abc","type":"text"},{"type":"image","data":"AAAA"}]},"id":7,"jsonrpc":"2.0"}`, 90)
	f.Add(`{"jsonrpc":"2.0","id":7,"result":{"content":[[{}],{"type":"text","text":1}]}}`, 60)
	f.Fuzz(func(t *testing.T, msg string, budget int) {
		if budget <= 0 || budget > 1<<16 {
			return
		}
		// What the warning takes, and budget more for the content.
		h := &held{b: &Budgets{}, tool: "logs", budget: budget, id: []byte("7")}
		h.budget += h.overhead()
		c := newCut(h)
		c.Write([]byte(msg))
		out, err := c.close()
		if err != nil {
			return
		}
		if len(out) > h.budget || !json.Valid(out) {
			t.Fatalf("budget %d: %d bytes: %s", h.budget, len(out), out)
		}
	})
}

// BenchmarkCut is the cost of reading a result's text past the cut, per
// byte: what a cut result costs beyond its budget.
func BenchmarkCut(b *testing.B) {
	h := &held{b: &Budgets{}, tool: "logs", budget: 100_000, id: []byte("7")}
	piece := []byte(strings.Repeat("a line of a log\\n", 2048))
	b.SetBytes(int64(len(piece)) * 64)
	b.ReportAllocs()
	for b.Loop() {
		c := newCut(h)
		c.Write([]byte(`{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"`))
		for range 64 {
			c.Write(piece)
		}
		c.Write([]byte(`"}],"isError":false}}`))
		if _, err := c.close(); err != nil {
			b.Fatal(err)
		}
	}
}

// Whatever a text holds, a well-formed result is cut, never refused: its
// kept text is the start of the text, and its isError the server's, given
// whole or in pieces.
func FuzzCutText(f *testing.F) {
	f.Add(strings.Repeat("x", 300)+"\n", 40, 7, true)
	f.Add("é😀\"\\\u2028<>&\x01", 3, 1, false)
	f.Fuzz(func(t *testing.T, text string, room, piece int, isError bool) {
		if room < 1 || room > 4096 || piece < 1 {
			return
		}
		msg := `{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":` + quote(text) + `}],"isError":` + fmt.Sprint(isError) + `}}`
		var whole cutResult
		require.NoError(t, json.Unmarshal([]byte(msg), &whole))
		h := &held{b: &Budgets{}, tool: "logs", budget: room, id: []byte("7")}
		h.budget += h.overhead() + len(`,{"type":"text","text":""}`)
		c := newCut(h)
		for i := 0; i < len(msg); i += piece {
			c.Write([]byte(msg[i:min(i+piece, len(msg))]))
		}
		out, err := c.close()
		if len(msg) <= h.budget {
			return // not cut: it would pass as written
		}
		require.NoError(t, err, "%q", msg)
		var r cutResult
		require.NoError(t, json.Unmarshal(out, &r), "%s", out)
		require.LessOrEqual(t, len(out), h.budget)
		require.Len(t, r.Result.Content, 2)
		require.True(t, strings.HasPrefix(whole.Result.Content[0].Text, r.Result.Content[1].Text))
		require.Equal(t, isError, r.Result.IsError)
	})
}
