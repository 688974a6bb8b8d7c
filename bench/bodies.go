package main

// listBody is a tools/list, the request of the List configurations.
var listBody = []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)

// body is a tools/call of the echo tool, exactly size bytes long: text
// with spaces, punctuation and escapes, as a model's arguments are.
func body(size int) []byte {
	const head = `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"`
	const tail = `"}}}`
	const prose = `The gateway reads every call before the server does; it must not be what the user waits for. \"Quoted,\" she said.\n`
	b := make([]byte, 0, size)
	b = append(b, head...)
	for n := size - len(head) - len(tail); n > 0; {
		chunk := prose[:min(n, len(prose))]
		// Never cut an escape in two.
		if chunk[len(chunk)-1] == '\\' {
			chunk = chunk[:len(chunk)-1] + " "
		}
		b = append(b, chunk...)
		n -= len(chunk)
	}
	return append(b, tail...)
}
