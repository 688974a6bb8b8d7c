// Package answertest holds what tests of the readers of an upstream's
// answer share: the messages they send and answer, and a reference
// client's reading of an event stream, against which what the gateway
// sends is checked.
package answertest

import (
	"bytes"
	"strings"
)

// A call, its result, and a notification a stream carries before it.
const (
	CallOne   = `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"search"}}`
	ResultOne = `{"jsonrpc":"2.0","id":1,"result":{"content":[]}}`
	Progress  = `{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"p","progress":1}}`
)

// Event is one event as a client's EventSource parser dispatches it.
type Event struct {
	Type, Data, LastID string
}

// ClientEvents reads a complete event stream as the HTML Living Standard's
// event-stream interpretation does: lines end with CRLF, LF or CR; a blank
// line dispatches; an event cut off by the end of the stream is dropped; an
// id holding NUL is ignored. It returns every dispatched event and the last
// event id at the end.
func ClientEvents(stream []byte) (events []Event, lastID string) {
	var data []string
	typ, hasData := "", false
	for len(stream) > 0 {
		i := bytes.IndexAny(stream, "\r\n")
		if i < 0 {
			break // an unterminated last line is never processed
		}
		line := string(stream[:i])
		if stream[i] == '\r' && i+1 < len(stream) && stream[i+1] == '\n' {
			i++
		}
		stream = stream[i+1:]
		switch {
		case line == "":
			if hasData {
				t := typ
				if t == "" {
					t = "message"
				}
				events = append(events, Event{Type: t, Data: strings.Join(data, "\n"), LastID: lastID})
			}
			data, typ, hasData = nil, "", false
			continue
		case line[0] == ':':
			continue
		}
		field, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		switch field {
		case "data":
			data, hasData = append(data, value), true
		case "event":
			typ = value
		case "id":
			if !strings.Contains(value, "\x00") {
				lastID = value
			}
		}
	}
	return events, lastID
}

// DataOf is the data of every event, of any type: what a client may read
// as a message (the Go SDK's reads some types the others do not).
func DataOf(events []Event) []string {
	out := make([]string, 0, len(events))
	for _, e := range events {
		out = append(out, e.Data)
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// MessagesOf keeps the events a client hands to its JSON-RPC layer: those
// of type message.
func MessagesOf(events []Event) []string {
	var out []string
	for _, e := range events {
		if e.Type == "message" {
			out = append(out, e.Data)
		}
	}
	return out
}

// Tape is a fuzz input read as a list of decisions, one a byte; once it is
// used up, every decision is the first choice.
type Tape []byte

func (t *Tape) Next(choices int) int {
	if len(*t) == 0 {
		return 0
	}
	c := (*t)[0]
	*t = (*t)[1:]
	return int(c) % choices
}
