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
	var (
		tools     jsonrpc.Member
		ambiguous bool
		kept      [][]byte
		changed   bool
		walk      = jsonrpc.NewWalker(result)
		toolsKey  = []byte("tools")
	)
	err = walk.Object(func(key []byte) error {
		if !bytes.EqualFold(key, toolsKey) {
			return walk.Skip()
		}
		if string(key) != "tools" || tools.Start != 0 {
			ambiguous = true
			return walk.Skip()
		}
		tools.Start = walk.Pos()
		var err error
		if walk.Peek() == '[' {
			kept, removed, changed, err = r.filterTools(walk, result)
		} else {
			err = walk.Skip() // not a list: clients refuse it as it is
		}
		tools.End = walk.Offset()
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
	return withTools(result, tools, kept), removed, nil
}

// filterTools reads the list of tools that comes next in the walk over
// result, and returns the tools kept (each as written, or with its
// notice), how many it removed, and whether it changed or removed any.
func (r *Rules) filterTools(walk *jsonrpc.Walker, result []byte) (kept [][]byte, removed int, changed bool, err error) {
	err = walk.Array(func() error {
		start := walk.Pos()
		name, ok, err := toolNameOf(walk, result)
		if err != nil {
			return err
		}
		tool := result[start:walk.Offset()]
		if (!ok && r.Hides()) || (ok && !r.Allowed(name)) {
			removed++
			changed = true
			return nil
		}
		if d := r.Deprecated(name); ok && d != nil {
			tool = describe(tool, d.Notice())
			changed = true
		}
		kept = append(kept, tool)
		return nil
	})
	return kept, removed, changed, err
}

// withTools is a copy of result whose list of tools, at tools, holds the
// kept tools instead.
func withTools(result []byte, tools jsonrpc.Member, kept [][]byte) []byte {
	size := len(result) - (tools.End - tools.Start) + 2
	for _, t := range kept {
		size += len(t) + 1
	}
	out := make([]byte, 0, size)
	out = append(out, result[:tools.Start]...)
	out = append(out, '[')
	for i, t := range kept {
		if i > 0 {
			out = append(out, ',')
		}
		out = append(out, t...)
	}
	out = append(out, ']')
	return append(out, result[tools.End:]...)
}

// toolNameOf reads the listed tool that comes next in the walk over doc,
// and returns its name, if it can be read with certainty: the member
// "name", a string, given once and in no other letter case.
func toolNameOf(walk *jsonrpc.Walker, doc []byte) (name string, ok bool, err error) {
	if walk.Peek() != '{' {
		return "", false, walk.Skip()
	}
	var raw []byte
	seen, sure := false, true
	err = walk.Object(func(key []byte) error {
		if len(key) != len("name") || !bytes.EqualFold(key, []byte("name")) {
			return walk.Skip()
		}
		isString := walk.Peek() == '"'
		sure = sure && !seen && string(key) == "name" && isString
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
