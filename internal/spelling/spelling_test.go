package spelling

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestNearestSuggestsOnlyCloseNames(t *testing.T) {
	candidates := []string{"tools/call", "tools/list", "prompts/get"}
	assert.Equal(t, "tools/call", Nearest("tools/calls", candidates))
	assert.Equal(t, "tools/list", Nearest("tool/list", candidates))
	assert.Equal(t, "", Nearest("resources/read", candidates))
	assert.Equal(t, "", Nearest("ab", []string{"ac"}), "a short name needs a closer match")
	assert.Equal(t, "rate_limit", Nearest("rate_limt", []string{"rate_limit", "concurrency"}))
	assert.Equal(t, "", Nearest(strings.Repeat("rate_limit", 100_000), []string{"rate_limit"}), "a long name is no typo")
	assert.Equal(t, 3, editDistance("kitten", "sitting", 10))
	assert.Equal(t, 2, editDistance("kitten", "sitting", 2), "capped at the bound")
	assert.Equal(t, 0, editDistance("same", "same", 3))
}
