package toolschema

import (
	"slices"
	"strings"
)

// Suggestions (a field's "Did you mean", an unknown tool's available
// actions) compare the name sent with the names known by edit distance,
// which costs the product of two names' lengths: 5,000 listed names of 250
// characters against one of 128 took 450 ms. A search is bounded here:
// names over maxNameCompared bytes are as far from any other as they are
// long (as before), a name is compared only within the distance that
// could still make it a suggestion (a band of the table, left as soon as
// a row is past it), names are tried nearest first by a distance they
// cannot be nearer than (their bytes counted, not ordered), and a search
// fills at most maxSearchCells cells of the tables in all: past that, the
// names not yet compared are not suggested. Within a check, the cells are
// also paid from its budget.
const (
	maxNameCompared = 256
	maxSearchCells  = 4 << 20
)

// nameSearch compares one name with many.
type nameSearch struct {
	name   string // in lower case
	budget *budget
	cells  int // filled so far
	rows   [3][]int
}

// cellsPerStep are the cells of a table filled in a step.
const cellsPerStep = 16

func newNameSearch(b *budget, name string) *nameSearch {
	return &nameSearch{name: strings.ToLower(name), budget: b}
}

// spent reports whether the search filled all the cells it may.
func (s *nameSearch) spent() bool { return s.cells >= maxSearchCells }

// distance is the Damerau-Levenshtein distance (with adjacent
// transpositions) between the search's name and b (in lower case), in
// bytes, when it is at most limit; limit+1 when it is more.
func (s *nameSearch) distance(b string, limit int) int {
	a := s.name
	over := limit + 1
	if limit < 0 || abs(len(a)-len(b)) > limit {
		return max(over, 0)
	}
	if len(a) > maxNameCompared || len(b) > maxNameCompared {
		return min(max(len(a), len(b)), over)
	}
	for i := range s.rows {
		if cap(s.rows[i]) < len(b)+2 {
			s.rows[i] = make([]int, len(b)+2)
		}
		s.rows[i] = s.rows[i][:len(b)+2]
	}
	before := s.cells
	defer func() { s.budget.spend((s.cells - before) / cellsPerStep) }()
	prev2, prev, cur := s.rows[0], s.rows[1], s.rows[2]
	for j := range prev {
		prev[j] = min(j, over)
	}
	for i := 1; i <= len(a); i++ {
		lo, hi := max(1, i-limit), min(len(b), i+limit)
		s.cells += hi - lo + 1
		cur[0] = min(i, over)
		if lo > 1 {
			cur[lo-1] = over
		}
		rowMin := cur[lo-1]
		for j := lo; j <= hi; j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			d := min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				d = min(d, prev2[j-2]+1)
			}
			cur[j] = min(d, over)
			rowMin = min(rowMin, cur[j])
		}
		cur[hi+1] = over // outside the band, for the next row
		if rowMin > limit {
			return over
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(b)]
}

// bagDistance is a distance no nearer than the edit distance between a and
// b: the bytes one has more of than the other, counted, not ordered.
func bagDistance(a, b string) int {
	var counts [256]int
	for i := range len(a) {
		counts[a[i]]++
	}
	for i := range len(b) {
		counts[b[i]]--
	}
	more, fewer := 0, 0
	for _, c := range counts {
		if c > 0 {
			more += c
		} else {
			fewer -= c
		}
	}
	return max(more, fewer)
}

// nearest is the known name closest to name, when it is close enough to be
// a typo of it: within max(2, a third of its length).
func nearest(b *budget, name string, known []string) string {
	s := newNameSearch(b, name)
	limit := 0
	for _, k := range known {
		limit = max(limit, 2, len(k)/3)
	}
	best, bestDist := "", limit+1
	for _, k := range known {
		if bestDist == 0 || s.spent() {
			break
		}
		// Only a nearer name replaces the best: the first of equals stays.
		if d := s.distance(strings.ToLower(k), bestDist-1); d < bestDist {
			best, bestDist = k, d
		}
	}
	if best == "" || bestDist > max(2, len(best)/3) {
		return ""
	}
	return best
}

// Nearest returns up to n of the names closest to name, nearest first,
// then by name: the tools a model most likely meant. A name holding the
// other, or held in it, is at most 1 away.
func Nearest(name string, names []string, n int) []string {
	if n <= 0 {
		return nil
	}
	s := newNameSearch(nil, name)
	top := nearestNames{best: make([]scored, 0, n+1), n: n}
	var rest []scored // by the distance they cannot be nearer than
	for _, k := range names {
		lk := strings.ToLower(k)
		switch {
		case lk == s.name:
			top.keep(scored{name: k})
		case strings.Contains(lk, s.name) || strings.Contains(s.name, lk):
			top.keep(scored{name: k, d: 1})
		default:
			rest = append(rest, scored{name: k, lower: lk, d: bagDistance(s.name, lk)})
		}
	}
	slices.SortFunc(rest, byDistance)
	top.measure(s, rest)
	out := make([]string, len(top.best))
	for i, c := range top.best {
		out[i] = c.name
	}
	return out
}

// scored is a name, lowercase, and its distance to the name searched (or
// the distance it cannot be nearer than).
type scored struct {
	name, lower string
	d           int
}

// byDistance orders names nearest first, then by name.
func byDistance(a, b scored) int {
	if a.d != b.d {
		return a.d - b.d
	}
	return strings.Compare(a.name, b.name)
}

// nearestNames are the n nearest names found so far, in order.
type nearestNames struct {
	best []scored
	n    int
}

func (t *nearestNames) keep(c scored) {
	i, _ := slices.BinarySearchFunc(t.best, c, byDistance)
	if i < t.n {
		t.best = slices.Insert(t.best, i, c)
		t.best = t.best[:min(len(t.best), t.n)]
	}
}

// measure keeps those of rest, sorted by the distance they cannot be
// nearer than, that are nearer than the n best, measuring each as far as
// it could still be kept and the search's budget lasts.
func (t *nearestNames) measure(s *nameSearch, rest []scored) {
	for _, c := range rest {
		limit := len(s.name) + len(c.lower)
		if len(t.best) == t.n {
			worst := t.best[t.n-1]
			if c.d > worst.d || (c.d == worst.d && c.name > worst.name) {
				break // nor can any after it be nearer
			}
			limit = worst.d
		}
		if s.spent() {
			break
		}
		if d := s.distance(c.lower, limit); d <= limit {
			t.keep(scored{name: c.name, d: d})
		}
	}
}
