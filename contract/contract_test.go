package contract

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/caddymcp/caddy-mcp/internal/cputime"
)

func tool(name, desc, schema string) Tool {
	return Tool{Name: name, Description: desc, InputSchema: json.RawMessage(schema)}
}

const invoiceV1 = `{"type":"object","properties":{
	"id":{"type":"string"},
	"status":{"type":"string","enum":["draft","sent","paid"]},
	"limit":{"type":"integer","minimum":1,"maximum":100,"default":10},
	"note":{"type":"string","maxLength":200},
	"lines":{"type":"array","items":{"type":"object","properties":{"qty":{"type":"integer","minimum":1}}}}
},"required":["id"],"additionalProperties":false}`

const invoiceV2 = `{"type":"object","properties":{
	"id":{"type":"integer"},
	"status":{"type":"string","enum":["draft","paid","void"]},
	"limit":{"type":"integer","minimum":1,"maximum":50,"default":20},
	"note":{"type":"string","maxLength":500},
	"lines":{"type":"array","items":{"type":"object","properties":{"qty":{"type":"integer","minimum":2}}}},
	"currency":{"type":"string"},
	"region":{"type":"string"}
},"required":["id","region"],"additionalProperties":false}`

func TestDiffSaysWhatChangedAndHowMuchItMatters(t *testing.T) {
	locked := []Tool{tool("get_invoice", "Gets an invoice.", invoiceV1), tool("old_tool", "", `{"type":"object"}`), tool("same", "s", `{"type":"object"}`)}
	live := []Tool{tool("get_invoice", "Gets an invoice by id.", invoiceV2), tool("new_tool", "", `{"type":"object"}`), tool("same", "s", `{"type":"object"}`)}
	var got []string
	for _, d := range Diff(locked, live) {
		got = append(got, string(d.Severity)+" "+d.Tool+": "+d.What)
	}
	assert.Equal(t, []string{
		"RISKY get_invoice: Its description changed: 'Gets an invoice by id.'",
		"BREAKING get_invoice: Field 'id': the type is now integer (was string).",
		"RISKY get_invoice: Field 'limit': the default is now 20 (was 10).",
		"BREAKING get_invoice: Field 'limit': the maximum is now 50 (was 100).",
		"BREAKING get_invoice: Field 'lines.items.qty': the minimum is now 2 (was 1).",
		"RISKY get_invoice: Field 'note': the longest length is now 500 (was 200).",
		"BREAKING get_invoice: Field 'status': no longer allows 'sent'.",
		"RISKY get_invoice: Field 'status': now also allows 'void'.",
		"SAFE get_invoice: Field 'currency': a new optional field.",
		"BREAKING get_invoice: Field 'region': a new required field.",
		"BREAKING old_tool: The tool was removed.",
		"SAFE new_tool: A new tool.",
	}, got)
	assert.Equal(t, Breaking, Worst(Diff(locked, live)))
	assert.Empty(t, Diff(locked, locked))
}

// A keyword that only narrows (const, pattern, format, type) breaks calls
// when added or changed, and none when lifted.
func TestNarrowingKeywordsBreakWhenAddedNotWhenLifted(t *testing.T) {
	schema := func(props string) string { return `{"type":"object","properties":{` + props + `}}` }
	tests := []struct{ old, now, want string }{
		{`"a":{"type":"string","format":"email"}`, `"a":{"type":"string"}`, "RISKY Field 'a': the format ('email') was lifted."},
		{`"a":{"type":"string"}`, `"a":{"type":"string","format":"email"}`, "BREAKING Field 'a': the format is now 'email' (there was none)."},
		{`"a":{"type":"string","pattern":"^x"}`, `"a":{"type":"string","pattern":"^y"}`, "BREAKING Field 'a': the pattern is now '^y' (was '^x')."},
		{`"a":{"const":"v1"}`, `"a":{}`, "RISKY Field 'a': the only allowed value ('v1') was lifted."},
		{`"a":{}`, `"a":{"const":"v2"}`, "BREAKING Field 'a': the only allowed value is now 'v2' (there was none)."},
		{`"a":{"type":"integer"}`, `"a":{}`, "RISKY Field 'a': any type is now accepted (was integer)."},
		{`"a":{}`, `"a":{"type":"integer"}`, "BREAKING Field 'a': the type must now be integer (any was accepted)."},
	}
	for _, tt := range tests {
		var got []string
		for _, d := range Diff([]Tool{tool("t", "", schema(tt.old))}, []Tool{tool("t", "", schema(tt.now))}) {
			got = append(got, string(d.Severity)+" "+d.What)
		}
		assert.Equal(t, []string{tt.want}, got, "%s -> %s", tt.old, tt.now)
	}
}

func TestAwarenessListsFiveBreakingFirst(t *testing.T) {
	deltas := Diff([]Tool{tool("get_invoice", "Gets an invoice.", invoiceV1)}, []Tool{tool("get_invoice", "Gets an invoice by id.", invoiceV2)})
	assert.Equal(t, `<contract_awareness action="get_invoice">
<change severity="BREAKING">Field 'id': the type is now integer (was string).</change>
<change severity="BREAKING">Field 'limit': the maximum is now 50 (was 100).</change>
<change severity="BREAKING">Field 'lines.items.qty': the minimum is now 2 (was 1).</change>
<change severity="BREAKING">Field 'status': no longer allows 'sent'.</change>
<change severity="BREAKING">Field 'region': a new required field.</change>
<recovery>The tool changed since the contract you may know: list the tools again and call it as it is now.</recovery>
</contract_awareness>`, Awareness("get_invoice", deltas))
	assert.Empty(t, Awareness("other", deltas))
	assert.Empty(t, Awareness("t", []Delta{{Tool: "t", Severity: Safe, What: "x"}}), "SAFE changes are not told")
	assert.Contains(t, Awareness(`a"<b`, []Delta{{Tool: `a"<b`, Severity: Risky, What: "x < y & z"}}), `action="a&quot;&lt;b"`)
}

func TestLockfileRoundTrip(t *testing.T) {
	l := &Lockfile{Version: Version, Server: "http://x/mcp", Tools: []Tool{tool("b", "", `{ "type" : "object" }`), tool("a", "A", `{}`)}}
	b, err := l.Marshal()
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "tools.lock.json")
	require.NoError(t, os.WriteFile(path, b, 0o644))
	got, err := Load(path)
	require.NoError(t, err)
	assert.Equal(t, []string{"a", "b"}, []string{got.Tools[0].Name, got.Tools[1].Name}, "sorted")
	assert.JSONEq(t, `{"type":"object"}`, string(got.Tools[1].InputSchema))

	require.NoError(t, os.WriteFile(path, []byte(`{"caddy_mcp_lock":2}`), 0o644))
	_, err = Load(path)
	assert.ErrorContains(t, err, "version 2")
	require.NoError(t, os.WriteFile(path, []byte(`not json`), 0o644))
	_, err = Load(path)
	assert.True(t, strings.Contains(err.Error(), "not a lockfile"))
}

// A hostile server's enum of 200,000 values, and a schema over the bound,
// cost the comparison time in proportion to their size.
func TestDiffCostFollowsSize(t *testing.T) {
	var a, b strings.Builder
	a.WriteString(`{"type":"object","properties":{"e":{"enum":[`)
	b.WriteString(`{"type":"object","properties":{"e":{"enum":[`)
	for i := range 200000 {
		if i > 0 {
			a.WriteString(",")
			b.WriteString(",")
		}
		fmt.Fprintf(&a, "%d", i)
		fmt.Fprintf(&b, "%d", i+1)
	}
	a.WriteString(`]}}}`)
	b.WriteString(`]}}}`)
	var deltas []Delta
	spent := cputime.Of(func() { deltas = diffSchemas("t", json.RawMessage(a.String()), json.RawMessage(b.String())) })
	assert.Less(t, spent, 2*time.Second, "CPU time")
	require.Len(t, deltas, 1, "over MaxSchema: one change, not field by field")
	assert.Equal(t, Risky, deltas[0].Severity)

	spent = cputime.Of(func() {
		deltas = Diff([]Tool{tool("t", "", string(enumOf(0, 9000)))}, []Tool{tool("t", "", string(enumOf(1, 9001)))})
	})
	assert.Less(t, spent, time.Second, "CPU time: linear in the values")
	require.Len(t, deltas, 2)
	assert.Equal(t, "Field 'e': no longer allows 0.", deltas[0].What)
	assert.Equal(t, "Field 'e': now also allows 9000.", deltas[1].What)
}

func enumOf(from, to int) []byte {
	var b strings.Builder
	b.WriteString(`{"properties":{"e":{"enum":[`)
	for i := from; i < to; i++ {
		if i > from {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, "%d", i)
	}
	b.WriteString(`]}}}`)
	return []byte(b.String())
}
