package handler

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/caddymcp/caddy-mcp/contract"
	"github.com/caddymcp/caddy-mcp/credential"
	"github.com/caddymcp/caddy-mcp/feature"
	"github.com/caddymcp/caddy-mcp/federation"
	"github.com/caddymcp/caddy-mcp/guard"
	"github.com/caddymcp/caddy-mcp/internal/failures"
	"github.com/caddymcp/caddy-mcp/limits"
	"github.com/caddymcp/caddy-mcp/oauth"
	"github.com/caddymcp/caddy-mcp/results"
	"github.com/caddymcp/caddy-mcp/session"
	"github.com/caddymcp/caddy-mcp/toolpolicy"
	"github.com/caddymcp/caddy-mcp/validate"
)

// updateWords rewrites testdata/words.golden from the words as they are:
//
//	go test ./handler -run TestEveryWordOfTheGatewayInOnePlace -update-words
//
// Review its diff: it is what the model reads.
var updateWords = flag.Bool("update-words", false, "rewrite testdata/words.golden")

const wordsGolden = "testdata/words.golden"

// Every envelope the gateway can write, the core's and each feature's, as
// the model reads it, is in one file: a change to any of them shows there,
// in review, as the words the model will read.
func TestEveryWordOfTheGatewayInOnePlace(t *testing.T) {
	var b strings.Builder
	b.WriteString("# Every envelope the gateway writes, with an example's values: what the model reads.\n")
	b.WriteString("# Written by: go test ./handler -run TestEveryWordOfTheGatewayInOnePlace -update-words\n")
	section := func(name string, words []feature.Word) {
		b.WriteString("\n## " + name + "\n")
		for _, w := range words {
			require.NotEmpty(t, w.Envelope.Message, w.Name)
			require.NotEmpty(t, w.Envelope.Recovery, "%s: every envelope says what to do", w.Name)
			b.WriteString("\n### " + w.Name + "\n\n" + w.Envelope.Text() + "\n")
		}
	}
	var core []feature.Word
	for _, c := range coreWords(t) {
		core = append(core, feature.Word{Name: c.Name, Envelope: c.Env})
	}
	core = append(core, []feature.Word{
		{Name: "an origin not allowed", Envelope: originRefused("https://evil.example")},
		{Name: "an HTTP method MCP does not use", Envelope: methodRefused("PUT")},
		{Name: "a request routed to an upstream route the handler lacks", Envelope: noUpstreamRoute("github")},
		{Name: "an id too long", Envelope: messageRefused(idTooLong(300))},
		{Name: "an id that is no string or number", Envelope: messageRefused(idNotScalar([]byte("{}")))},
		{Name: "a method name too long", Envelope: messageRefused(methodTooLong(200))},
		{Name: "a tool name too long", Envelope: messageRefused(toolNameTooLong(200))},
		{Name: "a name too long", Envelope: messageRefused(nameTooLong(200))},
	}...)
	section("The core", core)
	section("Authorization (oauth)", oauth.Words())
	section("Result budgets (results)", results.Words())
	section("The upstream's failures (failures)", failures.Words())
	section("Sessions (session)", session.Words())
	section("Rate limits (limits)", limits.Words())
	section("The concurrency guard (guard)", guard.Words())
	section("The tool policy (toolpolicy)", toolpolicy.Words())
	section("validate", validate.Words())
	section("contract", contract.Words())
	section("Federation (federation)", federation.Words())
	section("Each server's credential (credential)", credential.Words())

	got := b.String()
	if *updateWords {
		require.NoError(t, os.MkdirAll(filepath.Dir(wordsGolden), 0o755))
		require.NoError(t, os.WriteFile(wordsGolden, []byte(got), 0o644))
	}
	want, err := os.ReadFile(wordsGolden)
	require.NoError(t, err, "run: go test ./handler -run TestEveryWordOfTheGatewayInOnePlace -update-words")
	assert.Equal(t, string(want), got, "the words changed: review them, then rewrite %s with -update-words", wordsGolden)
}
