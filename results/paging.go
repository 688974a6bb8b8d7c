package results

import (
	"slices"
	"strings"

	"github.com/caddymcp/caddy-mcp/feature"
)

// The arguments that look like paging or limiting, which the words name
// so that the model asks for less the way the tool is asked: a name is
// read in lower case without its '_' and '-', and matches when it holds
// one of pagingWords or is one of pagingNames.
var (
	pagingWords = []string{"limit", "page", "cursor", "offset", "max", "skip"}
	pagingNames = []string{"top", "first", "last", "count", "size", "take", "after", "before", "since", "until", "fields", "filter"}
)

// maxPaging bounds the arguments named.
const maxPaging = 5

// pagingArguments are those of args that look like paging or limiting, in
// their order, at most maxPaging of them, each clipped.
func pagingArguments(args []string) []string {
	var out []string
	for _, a := range args {
		if len(out) == maxPaging {
			break
		}
		if pages(a) {
			out = append(out, feature.Clip(a))
		}
	}
	return out
}

func pages(arg string) bool {
	name := strings.NewReplacer("_", "", "-", "").Replace(strings.ToLower(arg))
	if slices.Contains(pagingNames, name) {
		return true
	}
	for _, w := range pagingWords {
		if strings.Contains(name, w) {
			return true
		}
	}
	return false
}
