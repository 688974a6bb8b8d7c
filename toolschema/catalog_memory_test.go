package toolschema

import (
	"crypto/sha256"
	"fmt"
	"runtime"
	"runtime/metrics"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// What a catalog holds, measured: the bytes of live heap objects after a
// full collection, which no other goroutine of this package's tests
// allocates meanwhile.
func liveHeap() int64 {
	runtime.GC()
	runtime.GC()
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(s)
	return int64(s[0].Value.Uint64())
}

// caller is the scope of the i-th caller, as the handler makes one: 16
// bytes of a digest of its credentials.
func caller(i int) string {
	sum := sha256.Sum256(fmt.Appendf(nil, "Bearer token-%d", i))
	return string(sum[:16])
}

// listing is a tools/list result of n tools, named by name and with the
// schema schema gives each, and the text greeting says in every
// description (answers that differ only there hold the same tools).
func listing(n int, name, schema func(i int) string, greeting string) []byte {
	var b strings.Builder
	b.WriteString(`{"tools":[`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"name":%q,"description":"%s Does thing %d.","inputSchema":%s}`, name(i), greeting, i, schema(i))
	}
	b.WriteString(`]}`)
	return []byte(b.String())
}

func sameSchema(int) string { return `{"type":"object","properties":{"id":{"type":"string"}}}` }

func ownSchema(i int) string {
	return fmt.Sprintf(`{"type":"object","properties":{"n":{"type":"integer","maximum":%d}}}`, i)
}

// Finding: a 5,000-tool list cost 5.2 MiB of heap per caller with long
// names, 0.4 MiB with short ones, so a client rotating its Authorization
// made the gateway keep 5.1 GiB. A list is kept once: a thousand callers
// given it cost less than twice what one does, even when every tool shares
// one schema (the list is then mostly its names) and the answers differ
// in bytes the catalog does not keep.
func TestAThousandCallersOfOneListCostLessThanTwiceOne(t *testing.T) {
	for name, toolName := range map[string]func(int) string{
		"short names":          func(i int) string { return fmt.Sprintf("get_invoice_%d", i) },
		"names of 1,000 bytes": func(i int) string { return fmt.Sprintf("%04d_%s", i, strings.Repeat("n", 995)) },
	} {
		t.Run(name, func(t *testing.T) {
			answers := [][]byte{listing(5000, toolName, sameSchema, "Hello."), listing(5000, toolName, sameSchema, "Hi.")}
			c := NewCatalog(1 << 30)
			base := liveHeap()
			_, err := c.Learn(ListKey{Endpoint: "e", Scope: caller(0)}, answers[0], true, now)
			require.NoError(t, err)
			one := liveHeap() - base
			for i := 1; i < 1000; i++ {
				page, err := c.Learn(ListKey{Endpoint: "e", Scope: caller(i)}, answers[i%2], true, now)
				require.NoError(t, err)
				require.True(t, page.Complete)
			}
			thousand := liveHeap() - base
			stats := c.Stats()
			t.Logf("one caller: %d bytes (counted %d); 1,000 callers: %d bytes (counted %d), %d bytes each more",
				one, stats.Bytes-999*entryBytes(caller(0)), thousand, stats.Bytes, (thousand-one)/999)
			assert.Less(t, thousand, 2*one)
			assert.Equal(t, Stats{MaxBytes: 1 << 30, Bytes: stats.Bytes, Keys: 1000, Lists: 1, Schemas: 1}, stats)
			_, found, _ := c.Lookup(ListKey{Endpoint: "e", Scope: caller(999)}, toolName(4999), now)
			assert.Equal(t, Known, found)
			runtime.KeepAlive(answers)
		})
	}
}

// The bound is in bytes of heap: the catalog never counts less than it
// holds, or a bound would not hold, nor half as much more, or it would
// hold much less than it could. Forgetting every key gives it all back.
func TestTheCatalogCountsWhatItHolds(t *testing.T) {
	invoiceSchema := func(int) string { return strings.ReplaceAll(strings.ReplaceAll(invoice, "\n", ""), "\t", "") }
	fill := func(c *Catalog) []ListKey {
		var keys []ListKey
		learn := func(key ListKey, result []byte, first bool) {
			_, err := c.Learn(key, result, first, now)
			require.NoError(t, err)
			keys = append(keys, key)
		}
		short := func(i int) string { return fmt.Sprintf("t%d", i) }
		for i := range 40 {
			// Lists of their own, some of long names, some sharing schemas.
			n := func(j int) string { return fmt.Sprintf("caller_%d_tool_%d", i, j) }
			if i%4 == 0 {
				n = func(j int) string { return fmt.Sprintf("%d_%d_%s", i, j, strings.Repeat("x", 300)) }
			}
			learn(ListKey{Endpoint: fmt.Sprintf("10.0.0.1:443 https mcp%d.example.com/mcp", i%3), Scope: caller(i)}, listing(50+i, n, ownSchema, ""), true)
		}
		for i := range 300 {
			learn(ListKey{Endpoint: "e", Scope: caller(i)}, listing(200, short, ownSchema, ""), true)
		}
		learn(ListKey{Endpoint: "e"}, listing(30, short, invoiceSchema, ""), true)
		for i := range 20 {
			// Listings under way.
			key := ListKey{Endpoint: "paged", Scope: caller(i)}
			page := listing(100, func(j int) string { return fmt.Sprintf("p%d_%d", i, j) }, ownSchema, "")
			learn(key, append(page[:len(page)-1], `,"nextCursor":"2"}`...), true)
		}
		return keys
	}
	c := NewCatalog(1 << 30)
	base := liveHeap()
	keys := fill(c)
	held := liveHeap() - base
	counted := c.Stats().Bytes
	t.Logf("heap held: %d bytes; counted: %d", held, counted)
	assert.GreaterOrEqual(t, counted, held)
	assert.Less(t, counted, held*3/2)

	for _, key := range keys {
		c.Forget(key)
	}
	assert.Equal(t, Stats{MaxBytes: 1 << 30}, c.Stats())
	assert.Less(t, liveHeap()-base, int64(64<<10), "what is forgotten is freed")
	runtime.KeepAlive(c)
}

// A compiled schema takes from 4 to over 70 times its text: the catalog
// weighs each one as it is, never less than it holds.
func TestACompiledSchemaIsWeighedAsItIs(t *testing.T) {
	props := func(n int) string {
		var ps []string
		for i := range n {
			ps = append(ps, fmt.Sprintf(`"field_%d":{"type":"string","minLength":1,"maxLength":%d,"description":"a field"}`, i, 100+i))
		}
		return `{"type":"object","properties":{` + strings.Join(ps, ",") + `},"required":["field_0"]}`
	}
	enum := func(n int) string {
		var vs []string
		for i := range n {
			vs = append(vs, fmt.Sprintf(`"value-%05d"`, i))
		}
		return `{"type":"object","properties":{"e":{"enum":[` + strings.Join(vs, ",") + `]}}}`
	}
	nested := func(n int) string {
		s := `{"type":"string"}`
		for i := range n {
			s = fmt.Sprintf(`{"type":"object","properties":{"a%d":%s,"b":{"type":"integer"}}}`, i, s)
		}
		return s
	}
	patterns := func(n int) string {
		var ps []string
		for i := range n {
			ps = append(ps, fmt.Sprintf(`"p%d":{"type":"string","pattern":"^[a-z]{%d,}[0-9]+$"}`, i, i%10+1))
		}
		return `{"type":"object","properties":{` + strings.Join(ps, ",") + `}}`
	}
	for name, raw := range map[string]string{
		"the smallest":               `{"type":"object"}`,
		"the golden tests' invoice":  invoice,
		"500 properties":             props(500),
		"an enum of 3,000 strings":   enum(3000),
		"objects nested 30 deep":     nested(30),
		"50 patterns":                patterns(50),
		"a pattern":                  `{"type":"object","properties":{"p":{"type":"string","pattern":"^[a-z]{5,}[0-9]+$"}}}`,
		"a $ref to itself, repeated": `{"$defs":{"n":{"type":"object","properties":{"next":{"$ref":"#/$defs/n"}}}},"properties":{"a":{"$ref":"#/$defs/n"},"b":{"$ref":"#/$defs/n"}}}`,
	} {
		t.Run(name, func(t *testing.T) {
			const copies = 20
			held := make([]*compiled, copies)
			base := liveHeap()
			for i := range held {
				s, err := Compile([]byte(raw))
				require.NoError(t, err)
				held[i] = &compiled{schema: s}
			}
			measured := (liveHeap() - base) / copies
			weighed := held[0].weight()
			t.Logf("%d bytes of text: %d bytes of heap, weighed %d", len(raw), measured, weighed)
			assert.GreaterOrEqual(t, weighed, measured)
			assert.Less(t, weighed, 2*measured)
			runtime.KeepAlive(held)
		})
	}
}
