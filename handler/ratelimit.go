package handler

import (
	"slices"

	"github.com/caddymcp/caddy-mcp/limits"
)

// RateLimit is one named token-bucket limit (package limits).
type RateLimit = limits.Config

// DefaultKey is the default of RateLimit.Key: the client's address.
const DefaultKey = limits.DefaultKey

func sortedNames[V any](m map[string]V) []string {
	names := make([]string, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}
