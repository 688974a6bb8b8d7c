package jsonrpc

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// chunks is a body arriving size bytes at a time. It checks what the scan
// tells it: the bytes read never go back, and bytes said to be inside the
// open top-level value hold no value a decoder could act on.
type chunks struct {
	t        *testing.T
	body     []byte
	size, n  int
	lastRead int
	// safe is the most bytes the scan said were inside the open value.
	safe int
}

func (c *chunks) More(read int, open bool) ([]byte, bool) {
	if read < c.lastRead || read > c.n {
		c.t.Fatalf("read %d after %d, of %d given", read, c.lastRead, c.n)
	}
	c.lastRead = read
	if open && read > c.safe {
		var v any
		if err := json.NewDecoder(bytes.NewReader(c.body[:read])).Decode(&v); err == nil {
			c.t.Fatalf("the first %d bytes of %q are said to be inside the open value, yet decode", read, c.body)
		}
		c.safe = read
	}
	if c.n == len(c.body) {
		return nil, false
	}
	c.n = min(c.n+c.size, len(c.body))
	return c.body[:c.n], true
}

func parseInChunks(t *testing.T, body []byte, size int, head func(Message) bool) ([]Message, bool, error) {
	c := &chunks{t: t, body: body, size: size}
	return ParseStream(c, nil, unlimited, head)
}

// sameParse checks that a body read in chunks of every size gives what it
// gives read at once.
func sameParse(t *testing.T, body []byte, sizes ...int) {
	want, wantBatch, wantErr := Parse(body, nil, unlimited)
	for _, size := range sizes {
		got, batch, err := parseInChunks(t, body, size, nil)
		if wantErr != nil {
			require.Error(t, err, "%q in chunks of %d", body, size)
			require.Equal(t, wantErr.Error(), err.Error(), "%q in chunks of %d", body, size)
			continue
		}
		require.NoError(t, err, "%q in chunks of %d", body, size)
		require.Equal(t, wantBatch, batch)
		require.Equal(t, len(want), len(got))
		for i := range want {
			assert.Equal(t, textOf(want[i]), textOf(got[i]), "%q in chunks of %d", body, size)
			assert.Equal(t, want[i].Carrier(), got[i].Carrier(), "%q in chunks of %d", body, size)
		}
	}
}

func textOf(m Message) [6]string {
	return [6]string{string(rune('0' + m.Kind)), string(m.Method), string(m.ID), string(m.Name), string(m.URI), string(m.TaskID)}
}

func TestParseStreamReadsWhatParseReads(t *testing.T) {
	for _, body := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"search","arguments":{"q":"x"}}}`,
		"\xef\xbb\xbf  {\"id\":12345,\"method\":\"tools/call\",\"params\":{\"name\":\"a\"}}  \n",
		`[{"jsonrpc":"2.0","id":"a","method":"tools/list"},{"jsonrpc":"2.0","method":"notifications/initialized"}]`,
		`{"id":1e5,"method":"tools\/call","params":{"name":"\u0061","arguments":[1.5e-3,-0,true,false,null]}}`,
		`{"id":1,"method":"x","params":{"name":"a","arguments":[NaN,Infinity,-Infinity,-1]}}`,
		`{"id":1,"id":2}`,
		`{"id":1,"Method":"x"}`,
		`{"id":1} {"id":2}`,
		`{"id":1}x`,
		`{"id":12`,
		`{"id":"abc`,
		`{"id":tru}`,
		`{"id":-Inf}`,
		`{"a":"\u00e`,
		`12345`,
		`  `,
		``,
		`"\ud800"`,
	} {
		sameParse(t, []byte(body), 1, 2, 3, 5, 7, 64)
	}
}

func FuzzParseStream(f *testing.F) {
	f.Add([]byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"search","arguments":{"q":"x"}}}`), uint8(3))
	f.Add([]byte(`[1, 2 ,{"id" : 3}]  `), uint8(1))
	f.Add([]byte(`{"id":-Infinity,"method":"m"} `), uint8(2))
	f.Add([]byte(`[{"id":1,"method":"m","params":{"_meta":{"traceparent" : "00-a"},"_Meta":1}}, {"method":"n","params":{"_meta":{}}}]`), uint8(4))
	f.Fuzz(func(t *testing.T, body []byte, size uint8) {
		sameParse(t, body, int(size)+1)
	})
}

// The head is shown once the name is read, while the arguments that follow
// have not arrived; a name after the arguments is shown after them.
func TestParseStreamShowsTheHeadBeforeTheArguments(t *testing.T) {
	args := `{"text":"` + strings.Repeat("a", 60<<10) + `"}`
	for _, tc := range []struct {
		body     string
		shownBy  int // bytes given by the time the head is shown, at most
		shownAny bool
	}{
		{`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"summarize","arguments":` + args + `}}`, 2 << 10, true},
		{`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"arguments":` + args + `,"name":"summarize"}}`, 1 << 20, true},
		{`[{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"summarize","arguments":` + args + `}}]`, 0, false},
	} {
		c := &chunks{t: t, body: []byte(tc.body), size: 1 << 10}
		var shown []Message
		shownAt := -1
		msgs, _, err := ParseStream(c, nil, unlimited, func(m Message) bool {
			shown = append(shown, m)
			shownAt = c.n
			return m.Name != nil
		})
		require.NoError(t, err)
		if !tc.shownAny {
			assert.Empty(t, shown)
			continue
		}
		require.Len(t, shown, 1)
		assert.LessOrEqual(t, shownAt, tc.shownBy)
		assert.Equal(t, "summarize", string(shown[0].Name))
		assert.Equal(t, "7", string(shown[0].ID))
		assert.Equal(t, "tools/call", string(shown[0].Method))
		full, head := textOf(msgs[0]), textOf(shown[0])
		assert.Equal(t, full[1:4], head[1:4], "the head's method, id and name are the whole body's")
	}
}

// A long run of digits (or of whitespace) arriving in small pieces costs
// what its bytes cost: the scan looks at each received byte once to find
// where it may stop, not at the whole run each time a piece arrives.
func TestParseStreamLooksAtEachByteOnce(t *testing.T) {
	for _, run := range []string{"1", " "} {
		body := []byte(`{"id":1,"method":"tools/call","params":{"name":"x","arguments":[1` + strings.Repeat(run, 256<<10) + `]}}`)
		c := &chunks{t: t, body: body, size: 16}
		s := scanner{src: c}
		_, err := s.each(func(Message) error { return nil })
		require.NoError(t, err)
		assert.LessOrEqual(t, s.lookedBack, len(body), "bytes looked at to find where the scan may stop, for a body of %d", len(body))
	}
}
