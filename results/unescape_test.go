package results

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// unescapeInPieces decodes raw given in pieces of n bytes.
func unescapeInPieces(raw []byte, n int) ([]byte, error) {
	var u unescaper
	for i := 0; i < len(raw); i += n {
		u.Write(raw[i:min(i+n, len(raw))])
	}
	err := u.End()
	return u.out, err
}

func TestAStringIsUnescapedAsEncodingJSONDecodesItInPiecesOfAnySize(t *testing.T) {
	for _, raw := range []string{
		`plain`, `a\"b\\c\/d\b\f\n\r\t`, `\u00e9t\u00C9`, `\ud83d\ude00 smile`, `caf\u00e9 ` + "é😀",
		`\ud83d`, `\ud83dx`, `\ud83d\n`, `\ude00\ud83d`, `\ud83d\ud83d\ude00`, "\xff\xfe", "\xe2\x82", "\xe2\x82x", "\xf0\x9f\x98",
	} {
		var want string
		require.NoError(t, json.Unmarshal([]byte(`"`+raw+`"`), &want), raw)
		for _, n := range []int{1, 2, 3, 5, 7, 64} {
			got, err := unescapeInPieces([]byte(raw), n)
			require.NoError(t, err, raw)
			assert.Equal(t, want, string(got), "%q in pieces of %d", raw, n)
		}
	}
	for _, bad := range []string{`\x`, `\u12`, `\u12g4`, `a"b`, "a\nb", `\`, `\ud83d\`, `\ud83d\u`} {
		_, err := unescapeInPieces([]byte(bad), 1)
		assert.Error(t, err, bad)
	}
}

func FuzzUnescaper(f *testing.F) {
	for _, s := range []string{`a\u00e9\ud83d\ude00`, `\ud83d\ud83d`, "\xe2\x82\xac", `\"\\\/`, `\ud83d\n`} {
		f.Add([]byte(s), uint8(3))
	}
	f.Fuzz(func(t *testing.T, raw []byte, n uint8) {
		var want string
		werr := json.Unmarshal(append(append([]byte{'"'}, raw...), '"'), &want)
		got, err := unescapeInPieces(raw, int(n%16)+1)
		if werr != nil {
			if err == nil {
				t.Fatalf("%q: encoding/json refuses it (%v), the unescaper took it", raw, werr)
			}
			return
		}
		if err != nil || string(got) != want {
			t.Fatalf("%q: got %q, %v; want %q", raw, got, err, want)
		}
	})
}
