package results

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"
)

// checkAgainstOriginal checks a cut against what a JSON parser (last key
// wins, exact keys, as JSON.parse) reads of the original.
func checkAgainstOriginal(t *testing.T, msg string, out []byte) {
	t.Helper()
	var orig map[string]any
	if err := json.Unmarshal([]byte(msg), &orig); err != nil {
		return // not valid JSON: nothing to compare with
	}
	var got map[string]any
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("output not JSON: %s", out)
	}
	if id, ok := orig["id"].(float64); !ok || id != 7 {
		t.Fatalf("cut a response whose id is %v: %s", orig["id"], msg)
	}
	if _, ok := orig["error"]; ok {
		t.Fatalf("cut an error response")
	}
	res, ok := orig["result"].(map[string]any)
	if !ok {
		t.Fatalf("cut with no result object")
	}
	if _, ok := res["structuredContent"]; ok {
		t.Fatalf("cut a structuredContent")
	}
	want := res["isError"] == true
	gres := got["result"].(map[string]any)
	if gres["isError"] != want {
		t.Fatalf("isError %v, the server said %v (%v)", gres["isError"], want, res["isError"])
	}
	oc, ok := res["content"].([]any)
	if !ok {
		t.Fatalf("content is %T", res["content"])
	}
	gc := gres["content"].([]any)[1:]
	if len(gc) > len(oc) {
		t.Fatalf("more blocks than the server wrote")
	}
	for i, b := range gc {
		if reflect.DeepEqual(b, oc[i]) {
			continue
		}
		if i != len(gc)-1 {
			t.Fatalf("block %d differs: %v vs %v", i, b, oc[i])
		}
		ob, _ := oc[i].(map[string]any)
		gb := b.(map[string]any)
		if ob == nil || ob["type"] != "text" {
			t.Fatalf("cut block %d is not text in the original: %v", i, oc[i])
		}
		ot, _ := ob["text"].(string)
		gt, _ := gb["text"].(string)
		if !strings.HasPrefix(ot, gt) {
			t.Fatalf("cut text is not a prefix: %q vs %q", gt, ot)
		}
	}
	if utf8.ValidString(msg) && !utf8.Valid(out) {
		t.Fatalf("invalid UTF-8 out of UTF-8 in: %q", out)
	}
}

// Whatever a server writes, a cut result says what a JSON parser reads of
// it (the last of a key given twice, as JSON.parse): the call's id, the
// server's isError, blocks it wrote, a text cut to a start of it, and
// UTF-8 out of UTF-8.
func FuzzCutReadsAsAParserDoes(f *testing.F) {
	f.Add(`{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"hello\nworld, hello world"}],"isError":true}}`, 120, 3)
	f.Add(`{"result":{"content":[{"text":"\u00e9\ud83d\ude00 abc","type":"text"},{"type":"image","data":"AAAA"}]},"id":7,"jsonrpc":"2.0"}`, 90, 5)
	f.Add(`{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"ab"},{"type":"text","text":"cd\n\"ef"}],"isError":false}}`, 40, 1)
	f.Add(`{"jsonrpc":"2.0","id":7,"result":{"_meta":{"p":"ppppppppppppppppppppppp"},"content":[{"type":"text","text":"ééééééééééééééééé"}]}}`, 20, 7)
	f.Add(`{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"\ud83dabcdeé\ud83dabcdeé\ud83dabcdeé\ud83dabcdeé"}]}}`, 20, 4)
	// Read two ways: refused, never cut.
	f.Add(`{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"abcdefghijklmnopqrstuvwxyz"}],"IsError":true}}`, 20, 3)
	f.Add(`{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"abcdefghijklmnopqrstuvwxyz"}],"Content":[]}}`, 20, 5)
	f.Add(`{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","Type":"image","text":"abcdefghijklmnopqrstuvwxyz"}]}}`, 20, 2)
	f.Fuzz(func(t *testing.T, msg string, budget, piece int) {
		if budget <= 0 || budget > 1<<16 || piece <= 0 || piece > 1<<20 {
			return
		}
		h := &held{b: &Budgets{}, tool: "logs", budget: budget, id: []byte("7")}
		h.budget += h.overhead()
		c := newCut(h)
		for i := 0; i < len(msg); i += piece {
			c.Write([]byte(msg[i:min(i+piece, len(msg))]))
		}
		out, err := c.close()
		if err != nil {
			return
		}
		if len(out) > h.budget || !json.Valid(out) {
			t.Fatalf("budget %d: %d bytes: %s", h.budget, len(out), out)
		}
		checkAgainstOriginal(t, msg, out)
	})
}
