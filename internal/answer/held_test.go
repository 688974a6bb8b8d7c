package answer

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/assert"
)

// An answer is held as it arrives, however it is cut, in chunks whose
// room never passes the bound: one that outgrows the bound, or declares
// it will, is refused having cost at most the bound.
func TestHeldBytesKeepWhatArrivesWithinTheBound(t *testing.T) {
	body := bytes.Repeat([]byte("0123456789abcdef"), 40_000) // 640,000 bytes
	room := func(h *heldBytes) (n int) {
		for _, c := range h.chunks {
			n += cap(c)
		}
		return n
	}
	for _, write := range []int{1, 1000, 32 << 10, len(body)} {
		for _, c := range []struct {
			name  string
			limit int
			want  int64
			fits  bool
		}{
			{"no length declared", len(body), -1, true},
			{"its length declared", len(body), int64(len(body)), true},
			{"no length declared, over the bound", len(body) - 1, -1, false},
			{"declared over the bound", len(body) - 1, int64(len(body)), false},
		} {
			var h heldBytes
			fits := true
			for p := body; len(p) > 0 && fits; p = p[min(write, len(p)):] {
				fits = h.add(p[:min(write, len(p))], c.limit, c.want)
			}
			assert.Equal(t, c.fits, fits, "%s, written %d at a time", c.name, write)
			assert.LessOrEqual(t, room(&h), c.limit, "%s, written %d at a time", c.name, write)
			if c.fits {
				assert.Equal(t, body, h.bytes(), "%s, written %d at a time", c.name, write)
			}
			if c.want >= 0 && c.fits {
				assert.Len(t, h.chunks, 1, "a declared length is held in one chunk")
			}
			if c.want > int64(c.limit) {
				assert.Zero(t, room(&h), "an answer declared too long costs nothing")
			}
		}
	}
}
