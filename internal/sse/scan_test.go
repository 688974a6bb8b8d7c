package sse

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// recorder keeps what a Scanner tells of a stream, each line's end as an
// offset in the whole stream, so that readings of one stream in different
// writes compare: a JoinedLF moves the end of the line before it, and the
// pieces of a long value are joined.
type recorder struct {
	t      testing.TB
	p      []byte // the write being read
	base   int    // where it begins in the stream
	events []string
	// ended is the index in events of the last line ended, and its end.
	ended, end int
	piece      []byte
}

func (r *recorder) Follow(e Event) {
	if e.Kind != Piece {
		r.flushPiece()
	}
	switch e.Kind {
	case Piece:
		require.NotEmpty(r.t, e.Value, "a piece is never empty")
		r.piece = append(r.piece, e.Value...)
		return
	case JoinedLF:
		require.Equal(r.t, 1, e.End)
		require.Equal(r.t, r.base, r.end, "a JoinedLF follows a line ended at the last write's end")
		require.Equal(r.t, byte('\n'), r.p[0])
		r.end = r.base + e.End
		r.events[r.ended] = r.events[r.ended][:strings.LastIndexByte(r.events[r.ended], '@')] + fmt.Sprintf("@%d", r.end)
		return
	case Field, Comment, Blank, LongEnd:
		require.LessOrEqual(r.t, e.End, len(r.p))
		last := r.p[e.End-1]
		require.True(r.t, last == '\n' || last == '\r', "End is just past a line break")
		require.Equal(r.t, last == '\r' && e.End == len(r.p), e.Tentative, "Tentative: a CR that ends the write")
		r.end = r.base + e.End
		r.ended = len(r.events)
		r.events = append(r.events, fmt.Sprintf("%v %q %q @%d", e.Kind, e.Name, e.Value, r.end))
		return
	}
	require.Zero(r.t, e.End)
	r.events = append(r.events, fmt.Sprintf("%v %q %q", e.Kind, e.Name, e.Value))
}

// write has s read p, the stream's next write.
func (r *recorder) write(s *Scanner, p []byte) {
	r.p = p
	s.Write(p, r)
	r.base += len(p)
}

func (r *recorder) flushPiece() {
	if len(r.piece) > 0 {
		r.events = append(r.events, fmt.Sprintf("Piece %q", r.piece))
		r.piece = r.piece[:0]
	}
}

// reading is what a Scanner bounded by max tells of stream written in the
// writes cut at cuts, and what it is left with.
type reading struct {
	events []string
	state  State
	held   string
	loneCR bool
}

func read(t testing.TB, stream []byte, max int, cuts []int) reading {
	s := Scanner{Max: max}
	r := &recorder{t: t}
	prev := 0
	for _, c := range append(cuts, len(stream)) {
		r.p, r.base = stream[prev:c], prev
		s.Write(r.p, r)
		prev = c
	}
	r.flushPiece()
	return reading{events: r.events, state: s.State(), held: string(s.Held()), loneCR: s.LoneCR()}
}

var scanCases = []struct {
	name   string
	stream string
	events []string
	state  State
	held   string
	loneCR bool
}{
	{"LF", "data: x\nid: 7\n\n",
		[]string{`Field "data" "x" @8`, `Field "id" "7" @14`, `Blank "" "" @15`}, LineStart, "", false},
	{"CRLF", "data: x\r\nevent: message\r\n\r\n",
		[]string{`Field "data" "x" @9`, `Field "event" "message" @25`, `Blank "" "" @27`}, LineStart, "", false},
	{"lone CR", "data: x\rdata:y\r\r",
		[]string{`Field "data" "x" @8`, `Field "data" "y" @15`, `Blank "" "" @16`}, AfterCR, "", true},
	{"CR then CRLF", "a\r\r\nb\n",
		[]string{`Field "a" "" @2`, `Blank "" "" @4`, `Field "b" "" @6`}, LineStart, "", true},
	{"byte order mark", "\xef\xbb\xbfdata: x\n\xef\xbb\xbfdata: y\n\n",
		[]string{`Field "data" "x" @11`, `Field "\ufeffdata" "y" @22`, `Blank "" "" @23`}, LineStart, "", false},
	{"byte order mark alone", "\xef\xbb\xbf\n:\n",
		[]string{`Blank "" "" @4`, `Comment "" "" @6`}, LineStart, "", false},
	{"comment", ": keep-alive\n:x\n",
		[]string{`Comment "" " keep-alive" @13`, `Comment "" "x" @16`}, LineStart, "", false},
	{"empty id, fields without a value", "id:\nid\ndata\n\n",
		[]string{`Field "id" "" @4`, `Field "id" "" @7`, `Field "data" "" @12`, `Blank "" "" @13`}, LineStart, "", false},
	{"only one space dropped", "data:  x \n",
		[]string{`Field "data" " x " @10`}, LineStart, "", false},
	{"long data line", "data: " + strings.Repeat("y", 100) + "\r\ndata: z\n\n",
		[]string{`LongField "data" ""`, `Piece "` + strings.Repeat("y", 100) + `"`, `LongEnd "" "" @108`, `Field "data" "z" @116`, `Blank "" "" @117`}, LineStart, "", false},
	{"long data line after a byte order mark", "\xef\xbb\xbfdata:" + strings.Repeat("y", 100) + "\n",
		[]string{`LongField "data" ""`, `Piece "` + strings.Repeat("y", 100) + `"`, `LongEnd "" "" @109`}, LineStart, "", false},
	{"long id", "id: " + strings.Repeat("7", 80) + "\n\n",
		[]string{`LongField "id" ""`, `Piece "` + strings.Repeat("7", 80) + `"`, `LongEnd "" "" @85`, `Blank "" "" @86`}, LineStart, "", false},
	{"long comment", ":" + strings.Repeat("c", 80) + "\r",
		[]string{`LongComment "" ""`, `LongEnd "" "" @82`}, AfterCR, "", false},
	{"long name", strings.Repeat("n", 70) + ": v\n",
		[]string{`LongField "` + strings.Repeat("n", 16) + `" ""`, `LongEnd "" "" @74`}, LineStart, "", false},
	{"long line not ended", "data: " + strings.Repeat("y", 70),
		[]string{`LongField "data" ""`, `Piece "` + strings.Repeat("y", 70) + `"`}, LongValue, "", false},
	{"line not ended", "data: x\nevent: mes",
		[]string{`Field "data" "x" @8`}, MidLine, "event: mes", false},
	{"first line not ended", "\xef\xbb\xbfdata",
		nil, FirstLine, "\xef\xbb\xbfdata", false},
	{"line just within the bound", strings.Repeat("d", 64) + "\n",
		[]string{`Field "` + strings.Repeat("d", 64) + `" "" @65`}, LineStart, "", false},
}

// Every reading of a stream tells the same, however its writes cut it:
// in two writes cut anywhere, and in writes of every size.
func TestAScannerReadsTheSameHoweverTheWritesCutTheStream(t *testing.T) {
	for _, tt := range scanCases {
		t.Run(tt.name, func(t *testing.T) {
			stream := []byte(tt.stream)
			want := reading{events: tt.events, state: tt.state, held: tt.held, loneCR: tt.loneCR}
			require.Equal(t, want, read(t, stream, 64, nil), "in one write")
			for c := 1; c < len(stream); c++ {
				require.Equal(t, want, read(t, stream, 64, []int{c}), "cut at %d", c)
			}
			for size := 1; size < len(stream); size++ {
				var cuts []int
				for c := size; c < len(stream); c += size {
					cuts = append(cuts, c)
				}
				require.Equal(t, want, read(t, stream, 64, cuts), "in writes of %d bytes", size)
			}
		})
	}
}

func TestScannerStatesAndKindsHaveNames(t *testing.T) {
	for s := Begin; s <= LongSkip; s++ {
		assert.NotContains(t, s.String(), "?")
	}
	for k := Field; k <= JoinedLF; k++ {
		assert.NotContains(t, k.String(), "?")
	}
	assert.Equal(t, "AfterCR", AfterCR.String())
	assert.Equal(t, "JoinedLF", JoinedLF.String())
}

// A line is held within the bound only; after one that grew the held
// room past 64 KiB, the room is let go.
func TestAScannerHoldsALineWithinItsBound(t *testing.T) {
	s := Scanner{Max: 1 << 20}
	r := &recorder{t: t}
	chunk := bytes.Repeat([]byte("y"), 64<<10)
	r.write(&s, []byte("data: "))
	for range 2 * (1 << 20) / len(chunk) {
		r.write(&s, chunk)
		assert.LessOrEqual(t, cap(s.Held()), 2<<20)
	}
	assert.Equal(t, LongValue, s.State())
	r.write(&s, []byte("\n"))
	assert.Zero(t, cap(s.Held()), "the room a long line grew is let go")
	r.write(&s, []byte("data: "))
	r.write(&s, bytes.Repeat([]byte("y"), 100<<10))
	assert.Equal(t, MidLine, s.State())
	r.write(&s, []byte("\n"))
	assert.Zero(t, cap(s.Held()), "the room a line held grew is let go")
}

type nothing struct{}

func (nothing) Follow(Event) {}

// Reading lines allocates nothing once the held room has grown.
func TestAScannerAllocatesNothingPerLine(t *testing.T) {
	var s Scanner
	s.Max = 1 << 20
	writes := [][]byte{[]byte("id: 1\nevent: mess"), []byte("age\r"), []byte("\ndata: {\"a\":1}\r\n\r\n: ka\n"), []byte("data: " + strings.Repeat("y", 100) + "\n\n")}
	var f Follower = nothing{}
	allocs := testing.AllocsPerRun(100, func() {
		for _, w := range writes {
			s.Write(w, f)
		}
	})
	assert.Zero(t, allocs)
}

// Reset reads a new stream from its start, a byte order mark and all.
func TestAScannerResetReadsANewStream(t *testing.T) {
	s := Scanner{Max: 64}
	r := &recorder{t: t}
	r.write(&s, []byte("data: x\r"))
	assert.Equal(t, AfterCR, s.State())
	s.Reset()
	assert.Equal(t, Begin, s.State())
	r.write(&s, []byte("\xef\xbb\xbf\n"))
	assert.Equal(t, []string{`Field "data" "x" @8`, `Blank "" "" @12`}, r.events, "no JoinedLF, and the mark dropped")
}

// FuzzScannerReadsTheSameHoweverCut reads streams in writes cut where the
// input says, and holds every reading to the reading of the whole stream.
func FuzzScannerReadsTheSameHoweverCut(f *testing.F) {
	for _, tt := range scanCases {
		f.Add([]byte(tt.stream), []byte{3, 1, 7})
	}
	f.Add([]byte("\xef\xbb\xbfdata: x\r\n\r\n"), []byte{1, 1, 1, 1})
	f.Fuzz(func(t *testing.T, stream, cutting []byte) {
		if len(stream) > 4096 {
			return
		}
		var cuts []int
		c := 0
		for _, d := range cutting {
			c += 1 + int(d)
			if c >= len(stream) {
				break
			}
			cuts = append(cuts, c)
		}
		for _, max := range []int{window, 64} {
			require.Equal(t, read(t, stream, max, nil), read(t, stream, max, cuts), "bound %d, cut at %v", max, cuts)
		}
	})
}

func TestFieldValuesAreReadAsClientsReadThem(t *testing.T) {
	for value, want := range map[string]int{"0": 0, "100": 100, "0042": 42, "999999999": 999999999} {
		ms, ok := Retry([]byte(value))
		assert.True(t, ok, value)
		assert.Equal(t, want, ms, value)
	}
	for _, value := range []string{"", "+1", "-1", "1.5", " 1", "1 ", "1e3", "1_000", "1000000000", "x"} {
		_, ok := Retry([]byte(value))
		assert.False(t, ok, "%q is ignored", value)
	}
	assert.True(t, IgnoredID([]byte("a\x00b")))
	assert.False(t, IgnoredID([]byte("")))
	assert.False(t, IgnoredID([]byte("e7")))
}
