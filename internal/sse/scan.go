package sse

import "bytes"

// Reading an event stream as it is written, in writes cut anywhere: its
// lines, as the SSE specification (the HTML Living Standard's event-stream
// interpretation) frames them. A line ends with CRLF, LF or CR alone; a
// byte order mark at the stream's start is dropped; a line is a blank line
// (which dispatches an event), a comment (it begins with a colon), or a
// field: a name, up to the first colon, and a value after it, one space
// after the colon dropped. What an event is made of (which fields count,
// what a dispatch does) is left to the Follower.
//
// Memory is bounded: a line longer than Max is not held; its value is
// passed on in pieces as they come. Nothing is allocated per line once the
// held line's room has grown to the longest line held, and that room is let
// go after a line that grew it past 64 KiB.

// State is where a Scanner is in its stream: between lines, or within one.
type State uint8

const (
	// Begin: nothing of the stream read yet; a byte order mark may open it.
	Begin State = iota
	// FirstLine: within the stream's first line, held as it came (a byte
	// order mark still at its start).
	FirstLine
	// LineStart: at the start of a line.
	LineStart
	// AfterCR: at the start of a line, after a CR that ended the last
	// write: an LF that opens the next one ends no line (it was a CRLF).
	AfterCR
	// MidLine: within a line, held.
	MidLine
	// LongValue: within a field line too long to hold, whose value is
	// passed on in pieces.
	LongValue
	// LongSkip: within a line too long to hold whose rest is passed on to
	// no one: a comment, or a field whose name is longer than a name the
	// specification gives.
	LongSkip
)

var stateNames = [...]string{"Begin", "FirstLine", "LineStart", "AfterCR", "MidLine", "LongValue", "LongSkip"}

func (s State) String() string {
	if int(s) < len(stateNames) {
		return stateNames[s]
	}
	return "State(?)"
}

// Kind is what an Event tells of the stream.
type Kind uint8

const (
	// Field: a field line within the bound: Name and Value.
	Field Kind = iota + 1
	// Comment: a comment line within the bound; Value is its text after
	// the colon.
	Comment
	// Blank: a blank line, which dispatches the event received.
	Blank
	// LongField: a field line outgrew the bound. Name is its name, or,
	// for a name of more than 11 bytes (none the specification gives),
	// perhaps only its first bytes, and then its value is not passed on;
	// any other's value follows in Pieces.
	LongField
	// LongComment: a comment line outgrew the bound.
	LongComment
	// Piece: the next bytes of a long field's value (never empty).
	Piece
	// LongEnd: the end of a line that outgrew the bound.
	LongEnd
	// JoinedLF: the LF of a CRLF whose CR ended the last write, and the
	// line it ended with it: the line's break ends one byte into this
	// write.
	JoinedLF
)

var kindNames = [...]string{"?", "Field", "Comment", "Blank", "LongField", "LongComment", "Piece", "LongEnd", "JoinedLF"}

func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return "Kind(?)"
}

// Event is what a Scanner tells its Follower. Its slices are valid only
// until Follow returns. It is passed by value: a pointer to it would make
// every event an allocation, or the scanner the larger by one.
type Event struct {
	Kind        Kind
	Name, Value []byte
	// End is where the line ends in the write being read, its line break
	// included (Field, Comment, Blank, LongEnd, JoinedLF): the bytes of the
	// write before End are read.
	End int
	// Tentative: the line ended with a CR that is the write's last byte.
	// A client that waits for the byte after a CR (it may be a CRLF's)
	// has not read the line yet.
	Tentative bool
}

// A Follower is told, in order, what a Scanner reads.
type Follower interface {
	Follow(e Event)
}

// window is what a Scanner reads of a line that outgrew its bound to learn
// what it is: a field's name is within it, or is no name the
// specification gives (data, event, id, retry: five bytes at most).
const window = 16

// byteOrderMark may open a stream; clients drop it.
var byteOrderMark = []byte("\xef\xbb\xbf")

// Scanner reads the lines of an event stream as it is written. Its zero
// value is ready, at the stream's start.
type Scanner struct {
	// Max bounds what is held of a line (at least window bytes); a longer
	// line is passed on as a LongField or a LongComment.
	Max    int
	held   []byte
	state  State
	loneCR bool
	win    [window]byte
}

// State is where the scanner is in its stream.
func (s *Scanner) State() State { return s.state }

// Held is what is held of the line being received, as it came (a byte
// order mark at the stream's start included): empty between lines and
// within a line too long to hold.
func (s *Scanner) Held() []byte { return s.held }

// HeldLine is what is held of the line being received, as clients read
// it: without the byte order mark that opened the stream.
func (s *Scanner) HeldLine() []byte {
	if s.state == FirstLine {
		return bytes.TrimPrefix(s.held, byteOrderMark)
	}
	return s.held
}

// Unfinished reports whether a line was begun and not ended.
func (s *Scanner) Unfinished() bool {
	switch s.state {
	case FirstLine, MidLine, LongValue, LongSkip:
		return true
	}
	return false
}

// Long reports whether the line being received is too long to hold.
func (s *Scanner) Long() bool { return s.state == LongValue || s.state == LongSkip }

// LoneCR reports whether a line ended with a CR alone (not a CRLF's),
// since the stream began. A CR that ends a write is known to be alone only
// once the next write begins.
func (s *Scanner) LoneCR() bool { return s.loneCR }

// Reset readies the scanner for a new stream, keeping its room.
func (s *Scanner) Reset() {
	s.state, s.held, s.loneCR = Begin, s.held[:0], false
}

func (s *Scanner) max() int { return max(s.Max, window) }

// Write reads the next bytes of the stream, and tells f what they hold.
func (s *Scanner) Write(p []byte, f Follower) {
	n := len(p)
	if n == 0 {
		return // the CR of a CRLF may still be waiting for its LF
	}
	if s.state == AfterCR {
		s.state = LineStart
		if p[0] == '\n' {
			p = p[1:]
			s.emit(f, JoinedLF, 1, false)
		} else {
			s.loneCR = true
		}
	}
	crAtEnd := len(p) > 0 && p[len(p)-1] == '\r'
	for len(p) > 0 {
		i := bytes.IndexAny(p, "\r\n")
		if i < 0 {
			s.add(p, f)
			return
		}
		if p[i] == '\r' && i+1 < len(p) && p[i+1] != '\n' {
			s.loneCR = true
		}
		line, first := p[:i], s.state == Begin
		if s.state != Begin && s.state != LineStart || len(line) > s.max() {
			first = s.state == Begin || s.state == FirstLine
			s.add(line, f)
			line = s.held
		}
		// A CR LF pair ends one line.
		end := i
		if p[i] == '\r' && i+1 < len(p) && p[i+1] == '\n' {
			end++
		}
		p = p[end+1:]
		at, tentative := n-len(p), len(p) == 0 && crAtEnd
		if s.Long() {
			s.emit(f, LongEnd, at, tentative)
		} else {
			s.line(f, line, first, at, tentative)
		}
		s.state = LineStart
		s.held = shrink(s.held)
	}
	if crAtEnd {
		s.state = AfterCR
	}
}

// line tells f of a line held whole; first: the stream's first.
func (s *Scanner) line(f Follower, line []byte, first bool, end int, tentative bool) {
	if first {
		line = bytes.TrimPrefix(line, byteOrderMark)
	}
	e := Event{End: end, Tentative: tentative}
	switch {
	case len(line) == 0:
		e.Kind = Blank
	case line[0] == ':':
		e.Kind, e.Value = Comment, line[1:]
	default:
		name, value, _ := bytes.Cut(line, []byte(":"))
		e.Kind, e.Name, e.Value = Field, name, bytes.TrimPrefix(value, []byte(" "))
	}
	f.Follow(e)
}

func (s *Scanner) emit(f Follower, k Kind, end int, tentative bool) {
	f.Follow(Event{Kind: k, End: end, Tentative: tentative})
}

// add adds a piece of the line being received; once the line outgrows
// the bound it is not held.
func (s *Scanner) add(p []byte, f Follower) {
	switch s.state {
	case LongValue:
		s.piece(f, p)
		return
	case LongSkip:
		return
	}
	if len(s.held)+len(p) > s.max() {
		s.startLong(p, f)
		return
	}
	s.held = append(s.held, p...)
	switch s.state {
	case Begin:
		s.state = FirstLine
	case LineStart:
		s.state = MidLine
	}
}

// startLong begins a line too long to hold, whose first bytes are held
// and p: what it is is read from its start, and the rest of it is passed
// on as it comes.
func (s *Scanner) startLong(p []byte, f Follower) {
	start := append(s.win[:0], s.held[:min(len(s.held), window)]...)
	start = append(start, p[:min(len(p), window-len(start))]...)
	skip := 0
	if (s.state == Begin || s.state == FirstLine) && bytes.HasPrefix(start, byteOrderMark) {
		skip = len(byteOrderMark)
	}
	// The bound is at least window bytes: start is the line's first
	// window bytes, and a colon before the last is followed by a byte.
	colon := bytes.IndexByte(start[skip:len(start)-1], ':')
	e := Event{Kind: LongField}
	switch {
	case colon == 0:
		e.Kind, s.state = LongComment, LongSkip
	case colon < 0:
		e.Name, s.state = start[skip:], LongSkip
	default:
		e.Name, s.state = start[skip:skip+colon], LongValue
	}
	f.Follow(e)
	if s.state == LongValue {
		// The value begins after the field's colon and one space.
		from := skip + colon + 1
		if start[from] == ' ' {
			from++
		}
		if from < len(s.held) {
			s.piece(f, s.held[from:])
			s.piece(f, p)
		} else {
			s.piece(f, p[from-len(s.held):])
		}
	}
	s.held = shrink(s.held)
}

// piece tells f of the next bytes of a long field's value.
func (s *Scanner) piece(f Follower, p []byte) {
	if len(p) == 0 {
		return
	}
	f.Follow(Event{Kind: Piece, Value: p})
}

// shrink empties a buffer, and lets it go when a large line grew it: a
// stream may live for hours after one.
func shrink(b []byte) []byte {
	if cap(b) > 64<<10 {
		return nil
	}
	return b[:0]
}
