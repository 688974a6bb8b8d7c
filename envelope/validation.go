package envelope

import (
	"bytes"
	"encoding/json"
	"strconv"
	"unicode/utf16"
)

// FieldProblem is one rejected field of a tool call's arguments.
type FieldProblem struct {
	// Path is the field's path, dot-separated ("items.0.sku"); empty for the
	// arguments as a whole, written "(root)".
	Path string
	// Problem says what was wrong, without a final period ("Invalid email format").
	Problem string
	// Sent is the JSON the client sent at Path; nil when the field was missing.
	Sent json.RawMessage
	// Expected is the closing hint, a full sentence ("Expected a valid email
	// address."); left out when empty.
	Expected string
}

// validationRecovery is the closing instruction: a model's instinct is to
// apologise to the user instead of calling again.
const validationRecovery = "Fix the fields above and call the tool again. Do not explain the error."

// ValidationText renders a <validation_error> for the action (tool) name: one
// <field> line per problem, then the recovery instruction.
//
//	<validation_error action="billing.get_invoice">
//	<field name="id">Invalid email format. You sent: 'not-an-email'. Expected a valid email address.</field>
//	<recovery>Fix the fields above and call the tool again. Do not explain the error.</recovery>
//	</validation_error>
func ValidationText(action string, problems []FieldProblem) string {
	var b []byte
	b = append(b, `<validation_error action="`...)
	b = appendAttr(b, action)
	b = append(b, "\">\n"...)
	for _, f := range problems {
		path := f.Path
		if path == "" {
			path = "(root)"
		}
		b = append(b, `<field name="`...)
		b = appendAttr(b, path)
		b = append(b, `">`...)
		line := f.Problem + ". You sent: " + SentValue(f.Sent) + "."
		if f.Expected != "" {
			line += " " + f.Expected
		}
		b = appendText(b, line)
		b = append(b, "</field>\n"...)
	}
	b = append(b, "<recovery>"+validationRecovery+"</recovery>\n</validation_error>"...)
	return string(b)
}

// SentValue renders what the client sent, as the reference formatter does:
// missing → (missing); null → null; a string in single quotes, cut to its
// first 47 characters and "..." when longer than 50; numbers and booleans as
// JavaScript prints them; an array → array(N); an object → its JSON, cut to
// 50 characters. Lengths count UTF-16 code units, as JavaScript does.
func SentValue(sent json.RawMessage) string {
	v := bytes.TrimSpace(sent)
	if len(v) == 0 {
		return "(missing)"
	}
	switch v[0] {
	case 'n':
		return "null"
	case 't', 'f':
		return string(v)
	case '"':
		var s string
		if json.Unmarshal(v, &s) != nil {
			return string(v)
		}
		if utf16Len(s) > 50 {
			s = cutUTF16(s, 47) + "..."
		}
		return "'" + s + "'"
	case '[':
		var a []json.RawMessage
		if json.Unmarshal(v, &a) != nil {
			return string(v)
		}
		return "array(" + strconv.Itoa(len(a)) + ")"
	case '{':
		var c bytes.Buffer
		if json.Compact(&c, v) != nil {
			return cutUTF16(string(v), 50)
		}
		return cutUTF16(c.String(), 50)
	default:
		f, err := strconv.ParseFloat(string(v), 64)
		if err != nil {
			return string(v)
		}
		return string(AppendNumber(nil, f))
	}
}

func utf16Len(s string) int {
	n := 0
	for _, r := range s {
		n += utf16.RuneLen(r)
	}
	return n
}

// cutUTF16 returns the longest prefix of s that has at most n UTF-16 code
// units. Unlike JavaScript's slice, it never splits a surrogate pair.
func cutUTF16(s string, n int) string {
	units := 0
	for i, r := range s {
		units += utf16.RuneLen(r)
		if units > n {
			return s[:i]
		}
	}
	return s
}
