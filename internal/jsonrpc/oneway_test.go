package jsonrpc

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Keys refuses a key given before, in whatever spelling the official
// readers take for it.
func TestKeysOneWay(t *testing.T) {
	for _, tt := range []struct {
		name  string
		keys  []string // decoded
		fresh bool     // the last key is new
	}{
		{"distinct", []string{"a", "b", "ab"}, true},
		{"given twice", []string{"a", "b", "a"}, false},
		{"another letter case", []string{"email", "Email"}, false},
		{"the long s", []string{"params", "paramſ"}, false},
		{"the Kelvin sign", []string{"key", "\u212aey"}, false},
		{"an escaped spelling, decoded", []string{"id", decodeKey(t, `"\u0069d"`)}, false},
		{"invalid UTF-8, decoded as U+FFFD", []string{decodeKey(t, "\"a\xff\""), decodeKey(t, "\"a\xfe\"")}, false},
		{"a lone surrogate, decoded as U+FFFD", []string{decodeKey(t, `"\ud800"`), "\ufffd"}, false},
		{"a dotless i is not i", []string{"id", "ıd"}, true},
		{"empty", []string{"", "x"}, true},
		{"empty twice", []string{"", ""}, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var k Keys
			o := k.Open()
			for _, key := range tt.keys[:len(tt.keys)-1] {
				require.True(t, k.Add(&o, []byte(key)), key)
			}
			assert.Equal(t, tt.fresh, k.Add(&o, []byte(tt.keys[len(tt.keys)-1])))
		})
	}
}

// decodeKey is a JSON string decoded as the readers decode keys.
func decodeKey(t *testing.T, quoted string) string {
	t.Helper()
	return string(AppendUnquoted(nil, []byte(quoted[1:len(quoted)-1])))
}

// Past the keys compared one by one, a set tells them apart alike. Each
// object has keys of its own: a key of an object nested in another, or of
// an object closed, is no key of the other.
func TestKeysMany(t *testing.T) {
	for _, n := range []int{3, keysInline, 100} {
		var k Keys
		outer := k.Open()
		for round := range 2 {
			o := k.Open()
			for i := range n {
				require.True(t, k.Add(&o, []byte(fmt.Sprintf("key%d", i))), "%d keys, round %d key %d", n, round, i)
				inner := k.Open()
				require.True(t, k.Add(&inner, []byte(fmt.Sprintf("key%d", i))), "nested")
				k.Close(inner)
			}
			for i := range n {
				require.False(t, k.Add(&o, []byte(fmt.Sprintf("KEY%d", i))), "%d keys, round %d key %d", n, round, i)
			}
			k.Close(o)
			require.True(t, k.Add(&outer, []byte(fmt.Sprintf("key%d", round))), "the outer object's own keys")
		}
		require.False(t, k.Add(&outer, []byte("Key1")))
	}
}

// Two keys fold alike exactly when encoding/json decodes the one into a
// field tagged with the other.
func TestFoldedAsEncodingJSONMatches(t *testing.T) {
	names := []string{"method", "Method", "mEtHoD", "méthod", "MÉTHOD", "id", "ID", "ıd", "İd", "paramſ", "PARAMS",
		"\u212aey", "key", "ǅ", "ǆ", "Ǆ", "ß", "ẞ", "σ", "ς", "Σ"}
	for _, a := range names {
		typ := reflect.StructOf([]reflect.StructField{{
			Name: "F", Type: reflect.TypeFor[*json.RawMessage](), Tag: reflect.StructTag(`json:` + strconv.Quote(a)),
		}})
		for _, b := range names {
			v := reflect.New(typ)
			require.NoError(t, json.Unmarshal([]byte(`{`+strconv.Quote(b)+`:1}`), v.Interface()))
			matches := !v.Elem().Field(0).IsNil()
			same := string(AppendFolded(nil, []byte(a))) == string(AppendFolded(nil, []byte(b)))
			assert.Equal(t, matches, same, "%q and %q", a, b)
		}
	}
}

// Fields reads the members named once and only as written.
func TestFieldsOneWay(t *testing.T) {
	for _, tt := range []struct {
		keys []string
		want []int // the last key's index; -2: ErrUncertain
	}{
		{[]string{"tools", "other", "nextCursor"}, []int{0, -1, 1}},
		{[]string{"tools", "tools"}, []int{0, -2}},
		{[]string{"Tools"}, []int{-2}},
		{[]string{"nextcursor"}, []int{-2}},
		{[]string{"toolſ"}, []int{-2}},
		{[]string{"other", "OTHER"}, []int{-1, -1}},
	} {
		t.Run(strings.Join(tt.keys, ","), func(t *testing.T) {
			f := Fields{Names: []string{"tools", "nextCursor"}}
			for i, key := range tt.keys {
				got, err := f.Which([]byte(key))
				if tt.want[i] == -2 {
					assert.ErrorIs(t, err, ErrUncertain, key)
					continue
				}
				assert.NoError(t, err, key)
				assert.Equal(t, tt.want[i], got, key)
			}
		})
	}
}
