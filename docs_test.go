package caddymcp_test

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2/caddyconfig"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	_ "github.com/caddyserver/caddy/v2/modules/standard"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	_ "github.com/caddymcp/caddy-mcp"
)

// docFiles are the Markdown files a user reads: the README and docs/.
func docFiles(t *testing.T) []string {
	t.Helper()
	docs, err := filepath.Glob(filepath.Join("docs", "*.md"))
	require.NoError(t, err)
	return append([]string{"README.md"}, docs...)
}

// fence is one fenced code block of a Markdown file.
type fence struct {
	file string
	line int // of the opening fence
	info string
	body string
}

func (f fence) String() string { return fmt.Sprintf("%s:%d", f.file, f.line) }

// fences are the fenced code blocks of a Markdown file, their bodies
// without the indentation of their fence (a block inside a list item is
// indented as the item is).
func fences(t *testing.T, file string) []fence {
	t.Helper()
	text, err := os.ReadFile(file)
	require.NoError(t, err)
	var out []fence
	var open *fence
	var indent string
	var body strings.Builder
	sc := bufio.NewScanner(bytes.NewReader(text))
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		trimmed := strings.TrimLeft(line, " \t")
		switch {
		case open == nil && strings.HasPrefix(trimmed, "```"):
			indent = line[:len(line)-len(trimmed)]
			open = &fence{file: file, line: n, info: strings.TrimSpace(strings.TrimPrefix(trimmed, "```"))}
			body.Reset()
		case open != nil && trimmed == "```":
			open.body = body.String()
			out = append(out, *open)
			open = nil
		case open != nil:
			body.WriteString(strings.TrimPrefix(line, indent))
			body.WriteByte('\n')
		}
	}
	require.NoError(t, sc.Err())
	require.Nil(t, open, "%s: a code block opened and never closed", file)
	return out
}

// Every block fenced as caddyfile in the README and docs/ is a complete
// config that a user can paste: Caddy's own adapter takes it, with the
// plugin's modules, without an error or a warning (an unformatted input is
// one), and caddy fmt leaves it as it is. Syntax summaries are fenced as
// text.
func TestEveryCaddyfileInTheDocsAdaptsCleanly(t *testing.T) {
	// What the examples read from the environment, as a deployment sets it:
	// an upstream at parse time ({$MCP_UPSTREAM}), and the secret that seals
	// sessions, which the adapter warns of when it is unset.
	t.Setenv("MCP_UPSTREAM", "127.0.0.1:9000")
	t.Setenv("MCP_SESSION_SECRET", "a secret of 32 bytes, for tests.")
	adapter := caddyconfig.GetAdapter("caddyfile")
	require.NotNil(t, adapter, "the caddyfile adapter is registered")
	blocks := 0
	for _, file := range docFiles(t) {
		for _, f := range fences(t, file) {
			if !strings.EqualFold(strings.Fields(f.info + " x")[0], "caddyfile") {
				continue
			}
			blocks++
			t.Run(f.String(), func(t *testing.T) {
				body := []byte(f.body)
				_, warnings, err := adapter.Adapt(body, map[string]any{"filename": f.String()})
				require.NoError(t, err, "adapting:\n%s", f.body)
				assert.Empty(t, warnings, "warnings adapting:\n%s", f.body)
				assert.Equal(t, f.body, string(caddyfile.Format(body)), "caddy fmt changes it")
			})
		}
	}
	assert.Positive(t, blocks, "the docs hold Caddyfiles")
}
