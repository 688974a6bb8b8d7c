package toolschema

import (
	"bytes"
	"errors"
	"strconv"
	"unicode/utf8"

	"github.com/caddymcp/caddy-mcp/internal/jsonrpc"
)

// Reading a tools/list result with the gateway's one JSON reader
// (internal/jsonrpc), by its rule: each member read (tools, nextCursor,
// ttlMs, cacheScope; a tool's name and inputSchema) given once and only as
// written, else the list is not learned (jsonrpc.ErrUncertain). What the
// catalog does not read is checked as JSON, not decoded.

// errListShape is a result whose members read are not of their type.
var errListShape = errors.New("not a tools/list result")

var (
	listMembers = []string{"tools", "nextCursor", "ttlMs", "cacheScope"}
	toolMembers = []string{"name", "inputSchema"}
)

// readList reads a tools/list result: an object whose tools is an array
// of objects (or null), each name a string, nextCursor and cacheScope
// strings, ttlMs an integer, any of them null or absent.
func readList(result []byte) (listResult, error) {
	var res listResult
	w := jsonrpc.NewWalker(result)
	if w.Peek() != '{' {
		return res, errListShape
	}
	fields := jsonrpc.Fields{Names: listMembers}
	err := w.Object(func(key []byte) error {
		i, err := fields.Which(key)
		if err != nil {
			return err
		}
		switch i {
		case 0:
			return readTools(w, result, &res.Tools)
		case 1:
			cursor, null, err := readString(w, result)
			if !null {
				res.NextCursor = &cursor
			}
			return err
		case 2:
			return readInt(w, result, &res.TTLMs)
		case 3:
			var err error
			res.CacheScope, _, err = readString(w, result)
			return err
		}
		return w.Skip()
	})
	if err == nil {
		err = w.End()
	}
	return res, err
}

// readTools reads the tools array at w into tools.
func readTools(w *jsonrpc.Walker, b []byte, tools *[]listedTool) error {
	switch w.Peek() {
	case 'n':
		return skipNull(w, b)
	case '[':
	default:
		return errListShape
	}
	*tools = []listedTool{}
	return w.Array(func() error {
		var t listedTool
		switch w.Peek() {
		case 'n':
			if err := skipNull(w, b); err != nil {
				return err
			}
			*tools = append(*tools, t)
			return nil
		case '{':
		default:
			return errListShape
		}
		fields := jsonrpc.Fields{Names: toolMembers}
		err := w.Object(func(key []byte) error {
			i, err := fields.Which(key)
			switch {
			case err != nil:
				return err
			case i == 0:
				t.Name, _, err = readString(w, b)
				return err
			case i == 1:
				start := w.Pos()
				err := w.Skip()
				t.InputSchema = b[start:w.Offset()]
				return err
			}
			return w.Skip()
		})
		*tools = append(*tools, t)
		return err
	})
}

// readString reads a string at w, decoded; null is "".
func readString(w *jsonrpc.Walker, b []byte) (_ string, null bool, err error) {
	switch w.Peek() {
	case 'n':
		return "", true, skipNull(w, b)
	case '"':
	default:
		return "", false, errListShape
	}
	start := w.Pos()
	if err := w.Skip(); err != nil {
		return "", false, err
	}
	raw := b[start+1 : w.Offset()-1]
	if bytes.IndexByte(raw, '\\') < 0 && utf8.Valid(raw) {
		return string(raw), false, nil
	}
	return string(jsonrpc.AppendUnquoted(nil, raw)), false, nil
}

// readInt reads an integer at w into n; null sets nothing.
func readInt(w *jsonrpc.Walker, b []byte, n **int64) error {
	start := w.Pos()
	if err := w.Skip(); err != nil {
		return err
	}
	text := string(b[start:w.Offset()])
	if text == "null" {
		return nil
	}
	v, err := strconv.ParseInt(text, 10, 64)
	if err != nil {
		return errListShape
	}
	*n = &v
	return nil
}

// skipNull reads the null at w.
func skipNull(w *jsonrpc.Walker, b []byte) error {
	start := w.Pos()
	if err := w.Skip(); err != nil {
		return err
	}
	if string(b[start:w.Offset()]) != "null" {
		return errListShape
	}
	return nil
}
