package toolschema

import (
	"fmt"
	"strings"
	"testing"
)

// listOfTools is a tools/list result of n tools named prefix0, prefix1, …,
// each with a small schema of its own, greeting the caller in its
// descriptions.
func listOfTools(n int, prefix, greeting string) []byte {
	var b strings.Builder
	b.WriteString(`{"tools":[`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"name":"%s%d","description":"%s Does thing %d.","inputSchema":{"type":"object","properties":{"n":{"type":"integer","maximum":%d}}}}`, prefix, i, greeting, i, i)
	}
	b.WriteString(`]}`)
	return []byte(b.String())
}

// BenchmarkCatalogLearn learns one list again and again under ever new
// callers' keys (up to 1,000 of them), once its schemas are compiled: what
// each caller that lists its tools costs, when the answers are the same
// bytes, and when they differ (each greets its caller by name) but list
// the same tools.
func BenchmarkCatalogLearn(b *testing.B) {
	for _, tools := range []int{50, 5000} {
		for _, answers := range []string{"same answer", "answers of their own"} {
			b.Run(fmt.Sprintf("%d tools, %s", tools, answers), func(b *testing.B) {
				lists := [][]byte{listOfTools(tools, "get_invoice_", "Hello.")}
				if answers != "same answer" {
					for i := range 31 {
						lists = append(lists, listOfTools(tools, "get_invoice_", fmt.Sprintf("Hello caller %d.", i)))
					}
				}
				c := newBenchCatalog()
				if _, err := c.Learn(ListKey{Endpoint: "e"}, lists[0], true, now); err != nil {
					b.Fatal(err) // its schemas compiled once, before the loop
				}
				b.ReportAllocs()
				i := 0
				for b.Loop() {
					if _, err := c.Learn(ListKey{Endpoint: "e", Scope: fmt.Sprint(i % 1000)}, lists[i%len(lists)], true, now); err != nil {
						b.Fatal(err)
					}
					i++
				}
			})
		}
	}
}

// BenchmarkCatalogLookup finds a tool's schema in a list of 5,000, and a
// tool the list lacks (the names for "did you mean").
func BenchmarkCatalogLookup(b *testing.B) {
	c := newBenchCatalog()
	key := ListKey{Endpoint: "e", Scope: "alice"}
	if _, err := c.Learn(key, listOfTools(5000, "get_invoice_", "Hello."), true, now); err != nil {
		b.Fatal(err)
	}
	for name, tool := range map[string]string{"known": "get_invoice_4321", "absent": "get_invoce_4321"} {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				c.Lookup(key, tool, now)
			}
		})
	}
}

func newBenchCatalog() *Catalog { return NewCatalog(0) }
