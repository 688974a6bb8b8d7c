package toolpolicy

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func rules(t *testing.T, allow, deny []string, deps ...Deprecation) *Rules {
	t.Helper()
	r, err := New(allow, deny, deps, []Deadline{{Tools: "slow_*", After: 45 * time.Second}, {Tools: "*", After: time.Minute}})
	require.NoError(t, err)
	return r
}

func TestAllowed(t *testing.T) {
	r := rules(t, []string{"search_*", "get_*", "old_search"}, []string{"admin_*", "*delete*"})
	for name, want := range map[string]bool{
		"search_docs": true, "get_user": true, "old_search": true,
		"search_delete_all": false, // deny wins
		"admin_reset":       false, "set_user": false, "": false,
	} {
		assert.Equal(t, want, r.Allowed(name), name)
	}
	all := rules(t, nil, []string{"admin_*"})
	assert.True(t, all.Allowed("anything"))
	assert.False(t, all.Allowed("admin_"))
	assert.Equal(t, 45*time.Second, r.Deadline("slow_report"))
	assert.Equal(t, time.Minute, r.Deadline("fast"), "the first matching deadline is the tool's")
	none, err := New(nil, nil, nil, nil)
	require.NoError(t, err)
	assert.True(t, none.Allowed("x"))
	assert.False(t, none.Hides())
	assert.Zero(t, none.Deadline("x"))
}

func TestNewRefuses(t *testing.T) {
	for _, tt := range []struct {
		name string
		deps []Deprecation
		dl   []Deadline
		want string
	}{
		{"denied deprecated", []Deprecation{{Tool: "admin_x", Message: "m"}}, nil, "deprecate admin_x: the tool is not allowed"},
		{"denied replacement", []Deprecation{{Tool: "old", Message: "m", Replacements: []string{"admin_new"}}}, nil, "its replacement admin_new is not allowed"},
		{"no message", []Deprecation{{Tool: "old", Message: " "}}, nil, "a message is needed"},
		{"no tool", []Deprecation{{Message: "m"}}, nil, "a tool is needed"},
		{"zero deadline", nil, []Deadline{{Tools: "x"}}, "timeout x: 0s is not a positive duration"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := New(nil, []string{"admin_*"}, tt.deps, tt.dl)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
		})
	}
	_, err := New([]string{""}, nil, nil, nil)
	assert.ErrorContains(t, err, "allow: an empty pattern")
}

const list = `{"tools":[
 {"name":"search_docs","description":"Search.","inputSchema":{"type":"object"}},
 {"name":"admin_reset","inputSchema":{"type":"object"}},
 {"name":"old_search","description":"Old \"search\".","inputSchema":{"type":"object"}},
 {"inputSchema":{"type":"object"},"name":"a\u0064min_escaped"},
 {"name":"nodesc","inputSchema":{}}
],"nextCursor":"abc", "_meta":{"x":1}}`

func TestFilterList(t *testing.T) {
	r := rules(t, nil, []string{"admin_*"},
		Deprecation{Tool: "old_search", Message: "Use search_docs instead", Replacements: []string{"search_docs"}},
		Deprecation{Tool: "nodesc", Message: "Going away."})
	out, removed, err := r.FilterList([]byte(list))
	require.NoError(t, err)
	assert.Equal(t, 2, removed, "the escaped name is read as clients read it")
	var got struct {
		Tools []struct {
			Name        string
			Description *string
			InputSchema json.RawMessage
		}
		NextCursor string
		Meta       json.RawMessage `json:"_meta"`
	}
	require.NoError(t, json.Unmarshal(out, &got), "%s", out)
	require.Len(t, got.Tools, 3)
	assert.Equal(t, "search_docs", got.Tools[0].Name)
	assert.Equal(t, "Search.", *got.Tools[0].Description)
	assert.Equal(t, `DEPRECATED: Use search_docs instead. Old "search".`, *got.Tools[1].Description)
	assert.Equal(t, "DEPRECATED: Going away.", *got.Tools[2].Description)
	assert.Equal(t, "{}", string(got.Tools[2].InputSchema))
	assert.Equal(t, "abc", got.NextCursor)
	assert.JSONEq(t, `{"x":1}`, string(got.Meta))
	// What it keeps, it keeps as written.
	assert.Contains(t, string(out), `{"name":"search_docs","description":"Search.","inputSchema":{"type":"object"}}`)
	assert.True(t, strings.HasSuffix(string(out), `],"nextCursor":"abc", "_meta":{"x":1}}`))
}

func TestFilterListUnchanged(t *testing.T) {
	r := rules(t, nil, []string{"admin_*"})
	in := []byte(`{"tools":[{"name":"a"},{"name":"b"}]}`)
	out, removed, err := r.FilterList(in)
	require.NoError(t, err)
	assert.Zero(t, removed)
	assert.Same(t, &in[0], &out[0], "nothing to change: the result itself")
	for _, in := range []string{`{}`, `{"tools":null}`, `{"tools":[]}`, `{"nextCursor":"x"}`} {
		out, _, err := r.FilterList([]byte(in))
		require.NoError(t, err)
		assert.Equal(t, in, string(out))
	}
}

// A list whose tools clients could read differently is never passed as it
// is when the rules hide tools.
func TestFilterListAmbiguous(t *testing.T) {
	r := rules(t, nil, []string{"admin_*"})
	for _, in := range []string{
		`{"tools":[{"name":"a"}],"tools":[{"name":"admin_x"}]}`,
		`{"tools":[{"name":"a"}],"Tools":[{"name":"admin_x"}]}`,
		// The long s and the escaped s: encoding/json reads both as tools.
		`{"tools":[{"name":"a"}],"toolſ":[{"name":"admin_x"}]}`,
		`{"tools":[{"name":"a"}],"tool\u0073":[{"name":"admin_x"}]}`,
		`{"tools":[{"name":"a"}]`,
		`not json`,
	} {
		_, _, err := r.FilterList([]byte(in))
		assert.ErrorIs(t, err, ErrUnreadable, in)
	}
	// A tool whose name cannot be read with certainty is removed.
	out, removed, err := r.FilterList([]byte(`{"tools":[{"name":"a"},{"name":"ok","Name":"admin_x"},{"name":"b","name":"admin_y"},{"name":1},{"x":1},"str",{"name":"c"}]}`))
	require.NoError(t, err)
	assert.Equal(t, 5, removed)
	assert.Equal(t, `{"tools":[{"name":"a"},{"name":"c"}]}`, string(out))
	// Without anything hidden, they are kept.
	d := rules(t, nil, nil, Deprecation{Tool: "a", Message: "m"})
	out, removed, err = d.FilterList([]byte(`{"tools":[{"name":"a"},{"x":1}]}`))
	require.NoError(t, err)
	assert.Zero(t, removed)
	assert.Equal(t, `{"tools":[{"description":"DEPRECATED: m.","name":"a"},{"x":1}]}`, string(out))
}

func TestAppendContent(t *testing.T) {
	block := []byte(`{"type":"text","text":"w"}`)
	for in, want := range map[string]string{
		`{"content":[{"type":"text","text":"ok"}]}`:                              `{"content":[{"type":"text","text":"ok"},{"type":"text","text":"w"}]}`,
		`{"content":[ ],"isError":false}`:                                        `{"content":[ {"type":"text","text":"w"}],"isError":false}`,
		`{"content":[{"type":"text","text":"ok"}],"structuredContent":{"a":1}} `: `{"content":[{"type":"text","text":"ok"},{"type":"text","text":"w"}],"structuredContent":{"a":1}} `,
		`{"content":[{"type":"text","text":"fail"}],"isError":true}`:             "",
		`{"content":[{"type":"text","text":"x"}],"IsError":true}`:                "",
		`{"content":[],"content":[]}`:                                            "",
		`{"task":{"taskId":"t"}}`:                                                "",
		`{"content":{}}`:                                                         "",
		`{"content":[]`:                                                          "",
	} {
		out, ok := AppendContent([]byte(in), block)
		if want == "" {
			assert.False(t, ok, in)
			assert.Equal(t, in, string(out))
			continue
		}
		assert.True(t, ok, in)
		assert.Equal(t, want, string(out))
	}
}

func TestIsError(t *testing.T) {
	for in, want := range map[string][2]bool{
		`{"content":[],"isError":true}`:    {true, true},
		`{"content":[],"isError":false}`:   {false, true},
		`{"content":[]}`:                   {false, true},
		`{"isError":true,"IsError":false}`: {false, false},
		`nope`:                             {false, false},
	} {
		isErr, ok := IsError([]byte(in))
		assert.Equal(t, want, [2]bool{isErr, ok}, in)
	}
}

func BenchmarkFilterList200(b *testing.B) {
	var sb strings.Builder
	sb.WriteString(`{"tools":[`)
	for i := range 200 {
		if i > 0 {
			sb.WriteByte(',')
		}
		prefix := "search"
		switch i % 10 {
		case 0:
			prefix = "admin"
		case 1:
			prefix = "old"
		}
		fmt.Fprintf(&sb, `{"name":"%s_%d","description":"Tool number %d does a useful thing with its arguments.","inputSchema":{"type":"object","properties":{"query":{"type":"string","description":"What to look for"},"limit":{"type":"integer","minimum":1,"maximum":100}},"required":["query"]}}`, prefix, i, i)
	}
	sb.WriteString(`],"nextCursor":"next"}`)
	in := []byte(sb.String())
	r, err := New(nil, []string{"admin_*", "*delete*"}, []Deprecation{{Tool: "old_*", Message: "Use search_* instead"}}, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(in)))
	b.ReportAllocs()
	for b.Loop() {
		if _, removed, err := r.FilterList(in); err != nil || removed != 20 {
			b.Fatal(removed, err)
		}
	}
}
