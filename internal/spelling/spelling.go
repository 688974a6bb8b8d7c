// Package spelling finds what a misspelt name was meant to be, for errors
// that say "did you mean ...?": a placeholder, a method, a subdirective.
// Its cost is bounded by the known names, however long the name given.
package spelling

// Nearest returns the candidate closest to s, if it is close enough to be
// what was meant: at most a third of s's length in edits, and at most 3.
func Nearest(s string, candidates []string) string {
	best, bestDist := "", min(3, len(s)/3)+1
	for _, c := range candidates {
		if d := editDistance(s, c, bestDist); d < bestDist {
			best, bestDist = c, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance between a and b, or bound when
// it is bound or more. Strings whose lengths differ by bound or more cost
// nothing to compare.
func editDistance(a, b string, bound int) int {
	if d := len(a) - len(b); d >= bound || -d >= bound {
		return bound
	}
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		rowMin := cur[0]
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			rowMin = min(rowMin, cur[j])
		}
		if rowMin >= bound {
			return bound
		}
		prev, cur = cur, prev
	}
	return min(prev[len(b)], bound)
}
