package answer

import (
	"bytes"
	"cmp"
	"errors"

	"github.com/caddymcp/caddy-mcp/feature"
	"github.com/caddymcp/caddy-mcp/internal/jsonrpc"
)

// An answer that overruns what the hooks read of it. When a hook fails
// closed on the response a request is owed (a result's budget, a list the
// tool policy filters), the gateway never reads that response past the
// hook's bound: not in a JSON answer (rewrite.go), and not in an event
// stream, however its upstream writes it (endlessly, or a trickle at a
// time). Past the bound, an event that may still be the response owed
// stops the reading: the proxy's copy ends, the client is answered at once
// with the hook's words for the request, and the upstream is told to stop
// it, as at a deadline. An event found not to be that response (a
// server's notification or request, or a response to no request still
// owed) is read on, within the core's bounds (stream.go).

// errResponseOverrun stops a stream whose event, which may be the response
// owed, outgrew the bound of the hook that fails closed on it.
var errResponseOverrun error = &feature.TooLargeError{What: "the response is larger than the gateway reads of it"}

// checkBound stops reading the stream when the event being received may
// be the response owed and has outgrown the bound of the hook that fails
// closed on it: past the hook's bound, or the core's (where it is
// withheld), or past what the cut reading it reads.
func (t *Stream) checkBound() {
	if t.stop != nil || t.probed || t.hooks == nil || t.owed.msgs == nil {
		return
	}
	var skim *jsonrpc.Skimmer
	switch {
	case t.cutErr != nil:
		skim = t.skim // the cut gave up
	case t.cut != nil:
		return // it reads on, within its own bound
	case t.over:
		skim = t.skim // withheld and skimmed (nil: passing unread)
	case t.hooks.stopAt > 0:
		skim = t.probe()
	}
	if skim == nil {
		return
	}
	t.probed = true
	if t.mayBeOwed(skim.Known()) {
		t.stop = cmp.Or(t.cutErr, errResponseOverrun)
	}
}

// errLinesTwoWays stops a stream whose lines clients read two ways.
var errLinesTwoWays = errors.New("the answer ends lines with a carriage return alone, which MCP clients read two ways")

// checkLines stops reading a stream, where a hook fails closed, once a
// line of it ended with a CR alone: the Go SDK's client ends lines at LF
// only, so that what it takes for an event is not what the gateway read
// (an event it reads whole where the gateway read two, neither over a
// budget; data that is JSON for it and not for the gateway). Servers end
// lines with LF, or CRLF.
func (t *Stream) checkLines() {
	if t.loneCR && t.stop == nil && t.hooks != nil && t.hooks.failClosed {
		t.stop = errLinesTwoWays
	}
}

// probe skims what is held of the data of the event being received, when
// it outgrew the bound of the hook that fails closed (nil when it did
// not).
func (t *Stream) probe() *jsonrpc.Skimmer {
	value, partial := t.partialData()
	n := len(t.data) + len(value)
	if partial && t.dataLines > 0 {
		n++ // the line break between the data lines
	}
	if n <= t.hooks.stopAt {
		return nil
	}
	skim := jsonrpc.NewSkimmer(maxResponseID)
	skim.Write(t.data)
	if partial && t.dataLines > 0 {
		skim.Write(newline)
	}
	skim.Write(value)
	return skim
}

// partialData is the value of the data line being received, ok when the
// line being received is one.
func (t *Stream) partialData() (value []byte, ok bool) {
	line := t.sc.HeldLine()
	if !bytes.HasPrefix(line, []byte("data")) {
		return nil, false
	}
	value, colon := bytes.CutPrefix(line[len("data"):], []byte(":"))
	if !colon && len(value) > 0 {
		return nil, false // a field whose name only begins with "data"
	}
	return bytes.TrimPrefix(value, []byte(" ")), true
}

// mayBeOwed reports whether a message that has not ended, of which kn is
// known, may still be a response to a request of the POST: unless it is
// certainly no response, or one to none of them. One to a request answered
// already counts: a client may have refused the first (the TypeScript
// SDK's schema refuses a response with a member it does not know), and
// take this one.
func (t *Stream) mayBeOwed(kn jsonrpc.Known) bool {
	switch {
	case kn.Uncertain:
		return true
	case kn.Method:
		return false
	case kn.ID != nil:
		return t.owed.answers(kn.ID)
	}
	return true
}

// cutGaveUp notes that the cut reading a withheld event reads no more of
// it (past its own bound, or on what it cannot cut): the reading stops
// there, for Close's error, when the event may be the response owed.
func (t *Stream) cutGaveUp() {
	_, err := t.cut.Close()
	if err == nil {
		err = errResponseOverrun
	}
	t.cut, t.cutErr = nil, err
}
