package toolpolicy

import (
	"bytes"
	"errors"
	"unicode/utf8"

	"github.com/caddymcp/caddy-mcp/envelope"
	"github.com/caddymcp/caddy-mcp/internal/jsonrpc"
)

// ErrUnreadable is a result the rules cannot be applied to with certainty:
// it is not JSON, or a member the decision reads is given twice or under
// another letter case (Go's decoder matches keys in any case, JavaScript's
// does not, so clients would disagree about what it holds).
var ErrUnreadable = jsonrpc.ErrUncertain

// FilterList applies the rules to a tools/list result: tools that are not
// allowed are removed (and so is any entry whose name cannot be read with
// certainty, when the rules hide tools), and a deprecated tool's
// description starts with its notice. Everything else is kept as written.
// It returns result itself when nothing changes, and how many tools it
// removed.
func (r *Rules) FilterList(result []byte) (out []byte, removed int, err error) {
	return FilterEntries(result, "tools", "name", func(tool []byte, name string, ok bool) ([]byte, bool) {
		if (!ok && r.Hides()) || (ok && !r.Allowed(name)) {
			return nil, false
		}
		if d := r.Deprecated(name); ok && d != nil {
			return describe(tool, d.Notice()), true
		}
		return tool, true
	})
}

// An Edit decides about one entry of a listed result: it keeps it, as
// written (entry itself) or rewritten, or removes it. name is the entry's
// member that names it, ok false when that cannot be read with certainty
// (absent, not a string, given twice or under another letter case).
type Edit func(entry []byte, name string, ok bool) (out []byte, keep bool)

// FilterEntries applies edit to each entry of the array member list of a
// list result (tools/list's "tools", resources/list's "resources"), each
// named by its member key ("name", "uri"). Everything else is kept as
// written. It returns result itself when nothing changes, and how many
// entries edit removed; ErrUnreadable when the result cannot be read with
// certainty.
func FilterEntries(result []byte, list, key string, edit Edit) (out []byte, removed int, err error) {
	var (
		entries   jsonrpc.Member
		ambiguous bool
		kept      [][]byte
		changed   bool
		walk      = jsonrpc.NewWalker(result)
	)
	err = walk.Object(func(k []byte) error {
		// No length check first: the long s and the Kelvin sign fold to
		// ASCII letters in other lengths, as encoding/json reads them.
		if !bytes.EqualFold(k, []byte(list)) {
			return walk.Skip()
		}
		if string(k) != list || entries.Start != 0 {
			ambiguous = true
			return walk.Skip()
		}
		entries.Start = walk.Pos()
		var err error
		if walk.Peek() == '[' {
			kept, removed, changed, err = filterArray(walk, result, key, edit)
		} else {
			err = walk.Skip() // not a list: clients refuse it as it is
		}
		entries.End = walk.Offset()
		return err
	})
	if err == nil {
		err = walk.End()
	}
	switch {
	case err != nil:
		return result, 0, errors.Join(ErrUnreadable, err)
	case ambiguous:
		return result, 0, ErrUnreadable
	case !changed:
		return result, 0, nil
	}
	return withEntries(result, entries, kept), removed, nil
}

// filterArray reads the array that comes next in the walk over result,
// and returns the entries edit kept, how many it removed, and whether it
// changed or removed any.
func filterArray(walk *jsonrpc.Walker, result []byte, key string, edit Edit) (kept [][]byte, removed int, changed bool, err error) {
	err = walk.Array(func() error {
		start := walk.Pos()
		name, ok, err := nameOf(walk, result, key)
		if err != nil {
			return err
		}
		entry := result[start:walk.Offset()]
		out, keep := edit(entry, name, ok)
		switch {
		case !keep:
			removed++
			changed = true
		case len(out) != len(entry) || &out[0] != &entry[0]:
			changed = true
			fallthrough
		default:
			kept = append(kept, out)
		}
		return nil
	})
	return kept, removed, changed, err
}

// withEntries is a copy of result whose list, at entries, holds the kept
// entries instead.
func withEntries(result []byte, entries jsonrpc.Member, kept [][]byte) []byte {
	size := len(result) - (entries.End - entries.Start) + 2
	for _, t := range kept {
		size += len(t) + 1
	}
	out := make([]byte, 0, size)
	out = append(out, result[:entries.Start]...)
	out = append(out, '[')
	for i, t := range kept {
		if i > 0 {
			out = append(out, ',')
		}
		out = append(out, t...)
	}
	out = append(out, ']')
	return append(out, result[entries.End:]...)
}

// nameOf reads the entry that comes next in the walk over doc, and returns
// its member key, if it can be read with certainty: a string, given once
// and in no other letter case.
func nameOf(walk *jsonrpc.Walker, doc []byte, key string) (name string, ok bool, err error) {
	if walk.Peek() != '{' {
		return "", false, walk.Skip()
	}
	var raw []byte
	seen, sure := false, true
	err = walk.Object(func(k []byte) error {
		if !bytes.EqualFold(k, []byte(key)) { // in any length, as above
			return walk.Skip()
		}
		isString := walk.Peek() == '"'
		sure = sure && !seen && string(k) == key && isString
		seen = true
		start := walk.Pos()
		err := walk.Skip()
		if err == nil && isString {
			raw = doc[start+1 : walk.Offset()-1]
		}
		return err
	})
	if err != nil || !seen || !sure {
		return "", false, err
	}
	if bytes.IndexByte(raw, '\\') < 0 && utf8.Valid(raw) {
		return string(raw), true, nil
	}
	return string(jsonrpc.AppendUnquoted(nil, raw)), true, nil
}

// member finds the member named key in the object obj, written exactly
// so and once; a zero Member when it has none, ErrUnreadable when it is
// given twice or under another letter case.
func member(obj []byte, key string) (jsonrpc.Member, error) {
	var (
		found jsonrpc.Member
		bad   bool
	)
	err := jsonrpc.Members(obj, func(m jsonrpc.Member) bool {
		if !bytes.EqualFold(m.Key, []byte(key)) {
			return true
		}
		if string(m.Key) != key || found.Start != 0 {
			bad = true
			return false
		}
		found = m
		return true
	})
	switch {
	case err != nil:
		return jsonrpc.Member{}, errors.Join(ErrUnreadable, err)
	case bad:
		return jsonrpc.Member{}, ErrUnreadable
	}
	return found, nil
}

// describe returns a copy of tool whose description starts with notice:
// the description is rewritten when it is a string, added when there is
// none.
func describe(tool []byte, notice string) []byte {
	m, err := member(tool, "description")
	if err != nil {
		return tool
	}
	out := make([]byte, 0, len(tool)+len(notice)+32)
	if m.Start == 0 {
		out = append(out, '{')
		out = append(out, `"description":`...)
		out = envelope.AppendJSONString(out, notice[:len(notice)-1])
		rest := bytes.TrimLeft(tool[1:], " \t\r\n")
		if len(rest) > 0 && rest[0] != '}' {
			out = append(out, ',')
		}
		return append(out, tool[1:]...)
	}
	if tool[m.Start] != '"' {
		return tool
	}
	text := jsonrpc.AppendUnquoted([]byte(notice), tool[m.Start+1:m.End-1])
	out = append(out, tool[:m.Start]...)
	out = envelope.AppendJSONString(out, string(text))
	return append(out, tool[m.End:]...)
}

// Private is result with its cacheScope made "private" (a list edited for
// one caller must not be shared with another by a cache that reads it);
// result itself when it has none or it is private already.
func Private(result []byte) ([]byte, error) {
	m, err := member(result, "cacheScope")
	if err != nil || m.Start == 0 || string(result[m.Start:m.End]) == `"private"` {
		return result, err
	}
	return jsonrpc.Splice(result, m, []byte(`"private"`)), nil
}
