// Package sse writes and reads the events of a server-sent event stream
// (the Streamable HTTP transport's answers): every event the gateway
// writes into a stream is written here, and every stream it follows is
// split into lines here (Scanner, scan.go).
package sse

import "bytes"

// AppendMessage appends a message event carrying data, one data line per
// line of data, with the event id id when hasID:
//
//	id: <id>
//	event: message
//	data: <line>
//	(blank line)
func AppendMessage(dst []byte, id []byte, hasID bool, data []byte) []byte {
	if hasID {
		dst = append(dst, "id: "...)
		dst = append(dst, id...)
		dst = append(dst, '\n')
	}
	dst = append(dst, "event: message\n"...)
	for line := range bytes.SplitSeq(data, []byte("\n")) {
		dst = append(dst, "data: "...)
		dst = append(dst, line...)
		dst = append(dst, '\n')
	}
	return append(dst, '\n')
}

// AppendEvent appends an event of the type typ with no data: clients read
// only "message" events, so one of another type is dropped by them.
func AppendEvent(dst []byte, typ string) []byte {
	dst = append(dst, "event: "...)
	dst = append(dst, typ...)
	return append(dst, "\n\n"...)
}

// KeepAlive is an empty comment line, which clients ignore: written
// between lines, it keeps an idle stream's connection open.
var KeepAlive = []byte(":\n")
