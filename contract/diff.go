package contract

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
)

// diffSchemas compares two inputSchemas field by field, down through
// properties and items. What a model sends must still pass: a field removed
// or newly required, a type changed, a value no longer allowed, a bound
// tightened is BREAKING; a bound loosened, a value newly allowed, a field
// no longer required or a default changed is RISKY (a call still passes,
// and may mean something else); a new optional field is SAFE.
func diffSchemas(tool string, oldRaw, newRaw json.RawMessage) []Delta {
	if len(oldRaw) > MaxSchema || len(newRaw) > MaxSchema {
		if !bytes.Equal(oldRaw, newRaw) {
			return []Delta{{Tool: tool, Severity: Risky, What: fmt.Sprintf("Its input schema changed (over %d KiB: not compared field by field).", MaxSchema>>10)}}
		}
		return nil
	}
	var old, now map[string]any
	_ = json.Unmarshal(oldRaw, &old)
	_ = json.Unmarshal(newRaw, &now)
	d := differ{tool: tool}
	d.schema("", old, now, 0)
	return d.out
}

type differ struct {
	tool string
	out  []Delta
}

// MaxSchema bounds the schemas compared field by field, as the gateway
// bounds the schemas it compiles.
const MaxSchema = 64 << 10

// maxDiffDepth bounds how far into nested schemas changes are looked for.
const maxDiffDepth = 16

func (d *differ) add(sev Severity, field, format string, args ...any) {
	what := fmt.Sprintf(format, args...)
	if field != "" {
		what = "Field '" + field + "': " + what
	}
	d.out = append(d.out, Delta{Tool: d.tool, Severity: sev, What: what})
}

func join(parent, name string) string {
	if parent == "" {
		return name
	}
	return parent + "." + name
}

func (d *differ) schema(field string, old, now map[string]any, depth int) {
	if depth > maxDiffDepth || old == nil || now == nil {
		return
	}
	switch ot, nt := typeSet(old["type"]), typeSet(now["type"]); {
	case ot != nil && nt != nil && !slices.Equal(ot, nt):
		sev := Breaking
		if subset(ot, nt) {
			sev = Risky
		}
		d.add(sev, field, "the type is now %s (was %s).", strings.Join(nt, " or "), strings.Join(ot, " or "))
	case ot != nil && nt == nil:
		d.add(Risky, field, "any type is now accepted (was %s).", strings.Join(ot, " or "))
	case ot == nil && nt != nil:
		d.add(Breaking, field, "the type must now be %s (any was accepted).", strings.Join(nt, " or "))
	}
	d.enum(field, old["enum"], now["enum"])
	d.constraint(field, "the only allowed value", old["const"], now["const"])
	for _, k := range []string{"pattern", "format"} {
		d.constraint(field, "the "+k, old[k], now[k])
	}
	if !reflect.DeepEqual(old["default"], now["default"]) && (old["default"] != nil || now["default"] != nil) {
		d.add(Risky, field, "the default is now %s (was %s).", show(now["default"]), show(old["default"]))
	}
	for _, b := range bounds {
		d.bound(field, b, old[b.keyword], now[b.keyword])
	}
	d.properties(field, old, now, depth)
	if oi, ni := asMap(old["items"]), asMap(now["items"]); oi != nil && ni != nil {
		d.schema(join(field, "items"), oi, ni, depth+1)
	}
	if closed(old) && !closed(now) {
		d.add(Risky, field, "fields beyond those listed are now accepted.")
	} else if !closed(old) && closed(now) {
		d.add(Breaking, field, "fields beyond those listed are now refused.")
	}
}

func (d *differ) properties(field string, old, now map[string]any, depth int) {
	op, np := asMap(old["properties"]), asMap(now["properties"])
	oreq, nreq := stringSet(old["required"]), stringSet(now["required"])
	for _, name := range sortedKeys(op) {
		if _, ok := np[name]; !ok {
			d.add(Breaking, join(field, name), "the field was removed.")
			continue
		}
		d.schema(join(field, name), asMap(op[name]), asMap(np[name]), depth+1)
	}
	for _, name := range sortedKeys(np) {
		if _, ok := op[name]; ok {
			continue
		}
		if slices.Contains(nreq, name) {
			d.add(Breaking, join(field, name), "a new required field.")
		} else {
			d.add(Safe, join(field, name), "a new optional field.")
		}
	}
	for _, name := range nreq {
		if _, existed := op[name]; existed && !slices.Contains(oreq, name) {
			d.add(Breaking, join(field, name), "the field is now required.")
		}
	}
	for _, name := range oreq {
		if !slices.Contains(nreq, name) {
			if _, still := np[name]; still {
				d.add(Risky, join(field, name), "the field is no longer required.")
			}
		}
	}
}

// constraint compares a keyword that only narrows what is allowed (const,
// pattern, format): added or changed, calls that passed may not; removed,
// every call that passed still does.
func (d *differ) constraint(field, words string, old, now any) {
	switch {
	case reflect.DeepEqual(old, now):
	case now == nil:
		d.add(Risky, field, "%s (%s) was lifted.", words, show(old))
	case old == nil:
		d.add(Breaking, field, "%s is now %s (there was none).", words, show(now))
	default:
		d.add(Breaking, field, "%s is now %s (was %s).", words, show(now), show(old))
	}
}

// bound is a keyword that bounds a value from below or above.
type bound struct {
	keyword string
	lower   bool   // a larger value narrows
	words   string // "the maximum"
}

var bounds = []bound{
	{"minimum", true, "the minimum"}, {"exclusiveMinimum", true, "the exclusive minimum"},
	{"maximum", false, "the maximum"}, {"exclusiveMaximum", false, "the exclusive maximum"},
	{"minLength", true, "the shortest length"}, {"maxLength", false, "the longest length"},
	{"minItems", true, "the fewest items"}, {"maxItems", false, "the most items"},
	{"minProperties", true, "the fewest fields"}, {"maxProperties", false, "the most fields"},
	{"multipleOf", true, "the step (multipleOf)"},
}

func (d *differ) bound(field string, b bound, old, now any) {
	o, oOK := old.(float64)
	n, nOK := now.(float64)
	switch {
	case !oOK && !nOK:
		return
	case !oOK:
		d.add(Breaking, field, "%s is now %s (there was none).", b.words, num(n))
		return
	case !nOK:
		d.add(Risky, field, "%s (%s) was lifted.", b.words, num(o))
		return
	case n == o:
		return
	}
	narrowed := (n > o) == b.lower
	if b.keyword == "multipleOf" {
		narrowed = true // a new step can refuse values the old allowed
	}
	sev := Risky
	if narrowed {
		sev = Breaking
	}
	d.add(sev, field, "%s is now %s (was %s).", b.words, num(n), num(o))
}

func (d *differ) enum(field string, old, now any) {
	ov, ook := old.([]any)
	nv, nok := now.([]any)
	if !ook && !nok {
		return
	}
	if !nok {
		d.add(Risky, field, "any value is now allowed (was one of %s).", showList(ov))
		return
	}
	if !ook {
		d.add(Breaking, field, "the value must now be one of %s.", showList(nv))
		return
	}
	// Compared by their JSON, in sets: linear in the values, however many
	// a hostile server lists.
	removed, added := missing(ov, nv), missing(nv, ov)
	if len(removed) > 0 {
		d.add(Breaking, field, "no longer allows %s.", showList(removed))
	}
	if len(added) > 0 {
		d.add(Risky, field, "now also allows %s.", showList(added))
	}
}

// missing is the values of a that b lacks.
func missing(a, b []any) []any {
	in := make(map[string]bool, len(b))
	for _, v := range b {
		k, _ := json.Marshal(v)
		in[string(k)] = true
	}
	var out []any
	for _, v := range a {
		if k, _ := json.Marshal(v); !in[string(k)] {
			out = append(out, v)
		}
	}
	return out
}

func typeSet(v any) []string {
	switch t := v.(type) {
	case string:
		return []string{t}
	case []any:
		out := stringSet(t)
		slices.Sort(out)
		return out
	}
	return nil
}

func subset(a, b []string) bool {
	for _, x := range a {
		if !slices.Contains(b, x) && !(x == "integer" && slices.Contains(b, "number")) {
			return false
		}
	}
	return true
}

func stringSet(v any) []string {
	list, _ := v.([]any)
	out := make([]string, 0, len(list))
	for _, x := range list {
		if s, ok := x.(string); ok {
			out = append(out, s)
		}
	}
	return out
}

func asMap(v any) map[string]any {
	m, _ := v.(map[string]any)
	return m
}

func closed(m map[string]any) bool {
	switch ap := m["additionalProperties"].(type) {
	case bool:
		return !ap
	case map[string]any:
		_, not := ap["not"]
		return not && len(asMap(ap["not"])) == 0
	}
	return false
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func num(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }

func show(v any) string {
	if v == nil {
		return "none"
	}
	if s, ok := v.(string); ok {
		return "'" + s + "'"
	}
	b, _ := json.Marshal(v)
	return string(b)
}

func showList(vs []any) string {
	words := make([]string, 0, len(vs))
	for _, v := range vs {
		words = append(words, show(v))
	}
	return strings.Join(words, ", ")
}
