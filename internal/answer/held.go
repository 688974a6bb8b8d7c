package answer

// heldBytes gathers an answer's bytes up to a bound, in chunks never
// copied as they fill: what it allocates is what it holds, plus at most a
// chunk, so that an answer found too long on the way costs the bound and
// no more (a slice grown by append allocates about five times what it
// ends up holding, at Go's growth of large slices).
type heldBytes struct {
	chunks [][]byte
	n      int
}

// Chunks grow from firstHeld to maxHeld bytes, each twice the last.
const (
	firstHeld = 4 << 10
	maxHeld   = 256 << 10
)

// add holds p too, unless that makes more than limit bytes (then it holds
// nothing more, and reports false); the chunks never take more than limit.
// want is the length the answer declared, -1 when it declared none: an
// answer declared longer than limit is refused at once, and what one
// declares is held in one chunk.
func (h *heldBytes) add(p []byte, limit int, want int64) bool {
	if h.n+len(p) > limit || want > int64(limit) {
		return false
	}
	for len(p) > 0 {
		last := len(h.chunks) - 1
		if last < 0 || len(h.chunks[last]) == cap(h.chunks[last]) {
			size := firstHeld
			if last >= 0 {
				size = min(2*cap(h.chunks[last]), maxHeld)
			}
			if want > int64(h.n) {
				size = int(want) - h.n
			}
			size = max(min(size, limit-h.n), len(p))
			h.chunks = append(h.chunks, make([]byte, 0, size))
			last++
		}
		k := min(len(p), cap(h.chunks[last])-len(h.chunks[last]))
		h.chunks[last] = append(h.chunks[last], p[:k]...)
		h.n += k
		p = p[k:]
	}
	return true
}

// bytes is what is held, in one slice.
func (h *heldBytes) bytes() []byte {
	if len(h.chunks) == 1 {
		return h.chunks[0]
	}
	out := make([]byte, 0, h.n)
	for _, c := range h.chunks {
		out = append(out, c...)
	}
	return out
}
