package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The demo says where its gateway serves as the Caddyfile it runs says,
// and that none does when the Caddyfile serves no site (the demo MCP
// server then runs alone).
func TestTheDemoNamesTheGatewaysItsCaddyfileServes(t *testing.T) {
	demo, err := os.ReadFile(filepath.Join("..", "Caddyfile"))
	require.NoError(t, err)
	contract, err := os.ReadFile(filepath.Join("..", "contract", "Caddyfile"))
	require.NoError(t, err)
	for _, tc := range []struct {
		name, caddyfile string
		want            []string
	}{
		{"the demo's Caddyfile", string(demo), []string{"https://localhost:8443/mcp"}},
		{"the contract example's", string(contract), []string{"https://localhost:8443/mcp"}},
		{"global options alone", "{\n\tadmin off\n}\n", nil},
		{"a site name", "mcp.example.com {\n\tmcp\n}\n", []string{"https://mcp.example.com/mcp"}},
		{"HTTP on a port", "http://localhost:9080 {\n\tmcp\n}\n", []string{"http://localhost:9080/mcp"}},
		{"a port alone", ":8080 {\n\tmcp\n}\n", []string{"http://localhost:8080/mcp"}},
		{"several sites, and a snippet", "(common) {\n\tmcp\n}\n\na.example.com, b.example.com:8443 {\n\timport common\n}\n",
			[]string{"https://a.example.com/mcp", "https://b.example.com:8443/mcp"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := gatewayURLs("Caddyfile", []byte(tc.caddyfile))
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}
