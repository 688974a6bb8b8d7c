package jsonrpc

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestMembers(t *testing.T) {
	doc := ` {"a":1, "b\u0063" : {"x":[1,2]}, "d":"s"} `
	var got []string
	require.NoError(t, Members([]byte(doc), func(m Member) bool {
		got = append(got, string(m.Key)+"="+doc[m.Start:m.End])
		return true
	}))
	assert.Equal(t, []string{"a=1", `bc={"x":[1,2]}`, `d="s"`}, got)

	n := 0
	require.NoError(t, Members([]byte(`{"a":1,"b":2} trailing`), func(Member) bool { n++; return false }), "stopped before the end: not read further")
	assert.Equal(t, 1, n)

	for _, bad := range []string{``, `[]`, `{"a"}`, `{"a":1,}`, `{"a":1} x`, `{"a":tru}`, `{1:2}`, `{"a":1`} {
		assert.Error(t, Members([]byte(bad), func(Member) bool { return true }), bad)
	}
	require.NoError(t, Members([]byte(`{}`), func(Member) bool { t.Fatal("no member"); return true }))
}

func TestWalkerDepth(t *testing.T) {
	deep := strings.Repeat(`{"a":`, MaxDepth+1) + "1" + strings.Repeat("}", MaxDepth+1)
	var descend func(w *Walker) error
	descend = func(w *Walker) error {
		return w.Object(func([]byte) error {
			if w.Peek() == '{' {
				return descend(w)
			}
			return w.Skip()
		})
	}
	var syntax *SyntaxError
	assert.ErrorAs(t, descend(NewWalker([]byte(deep))), &syntax, "descending")
	assert.ErrorAs(t, Members([]byte(deep), func(Member) bool { return true }), &syntax, "skipping")
}

func TestWalkerArray(t *testing.T) {
	doc := []byte(`[ 1, {"k":"v"} ,[],"s" ]`)
	w := NewWalker(doc)
	var got []string
	require.NoError(t, w.Array(func() error {
		start := w.Pos()
		err := w.Skip()
		got = append(got, string(doc[start:w.Offset()]))
		return err
	}))
	require.NoError(t, w.End())
	assert.Equal(t, []string{"1", `{"k":"v"}`, "[]", `"s"`}, got)
	assert.Error(t, NewWalker([]byte(`[1,]`)).Array(func() error { return nil }), "an element not read is an error")
}
