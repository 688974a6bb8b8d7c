package caddymcp_test

import (
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// linkRE finds Markdown links and their targets: [text](target).
var linkRE = regexp.MustCompile(`\]\(([^)\s]+)\)`)

// Every relative link in the README and docs/ names a file of the
// repository, and every anchor a heading of the file it points into.
func TestEveryLinkInTheDocsResolves(t *testing.T) {
	anchors := map[string]map[string]bool{}
	anchorsOf := func(file string) map[string]bool {
		if a, ok := anchors[file]; ok {
			return a
		}
		a := headingAnchors(t, file)
		anchors[file] = a
		return a
	}
	for _, file := range docFiles(t) {
		text, err := os.ReadFile(file)
		require.NoError(t, err)
		text = withoutCode(t, file, text)
		for _, m := range linkRE.FindAllSubmatch(text, -1) {
			target := string(m[1])
			u, err := url.Parse(target)
			if !assert.NoError(t, err, "%s: link %q", file, target) || u.Scheme != "" {
				continue
			}
			dest := file
			if u.Path != "" {
				dest = filepath.Join(filepath.Dir(file), u.Path)
				_, err := os.Stat(dest)
				if !assert.NoError(t, err, "%s: link %q names no file", file, target) {
					continue
				}
			}
			if u.Fragment == "" {
				continue
			}
			if assert.Equal(t, ".md", filepath.Ext(dest), "%s: link %q: an anchor into a file that is not Markdown", file, target) {
				assert.True(t, anchorsOf(dest)[u.Fragment], "%s: link %q: %s has no heading #%s", file, target, dest, u.Fragment)
			}
		}
	}
}

// withoutCode is a Markdown file's text with its fenced blocks and code
// spans blanked, so that a link-like text inside them is not taken for a
// link.
func withoutCode(t *testing.T, file string, text []byte) []byte {
	t.Helper()
	return codeSpanRE.ReplaceAll(withoutFences(t, file, text), nil)
}

var codeSpanRE = regexp.MustCompile("`[^`]*`")

// headingAnchors are the anchors GitHub gives a Markdown file's headings:
// lower case, punctuation dropped, spaces made hyphens, a repeated one
// numbered.
func headingAnchors(t *testing.T, file string) map[string]bool {
	t.Helper()
	text, err := os.ReadFile(file)
	require.NoError(t, err)
	text = withoutFences(t, file, text)
	out := map[string]bool{}
	seen := map[string]int{}
	for line := range strings.SplitSeq(string(text), "\n") {
		trimmed := strings.TrimLeft(line, "#")
		if len(trimmed) == len(line) || !strings.HasPrefix(trimmed, " ") {
			continue
		}
		var b strings.Builder
		for _, r := range strings.ToLower(strings.TrimSpace(trimmed)) {
			switch {
			case unicode.IsLetter(r), unicode.IsDigit(r), r == '-', r == '_':
				b.WriteRune(r)
			case r == ' ':
				b.WriteByte('-')
			}
		}
		a := b.String()
		if n := seen[a]; n > 0 {
			out[fmt.Sprintf("%s-%d", a, n)] = true
		} else {
			out[a] = true
		}
		seen[a]++
	}
	return out
}

// withoutFences is a Markdown file's text with its fenced blocks blanked
// (a comment line in a shell block is no heading).
func withoutFences(t *testing.T, file string, text []byte) []byte {
	t.Helper()
	lines := strings.Split(string(text), "\n")
	for _, f := range fences(t, file) {
		for i := f.line - 1; i < f.line+strings.Count(f.body, "\n")+1 && i < len(lines); i++ {
			lines[i] = ""
		}
	}
	return []byte(strings.Join(lines, "\n"))
}
