package keys

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/caddymcp/caddy-mcp/feature"
)

func TestKeyTemplatesAreCheckedAtLoad(t *testing.T) {
	tests := []struct {
		template string
		// err is the error's text; "" when the template is fine.
		err string
	}{
		{"{http.vars.client_ip}", ""},
		{"{client_ip}", ""},
		{"{client_ip}:{header.Authorization}", ""},
		{"global", ""},
		{"", ""},
		{"{http.mcp.tool}", ""},
		{"{http.mcp.authorization}", ""},
		{"{http.request.header.X-Api-Key}", ""},
		{"{http.request.cookie.session}", ""},
		{"{http.request.uri.query.token}", ""},
		{"{http.request.tls.client.fingerprint}", ""},
		{"{http.request.remote.host/24}", ""},
		{"{http.auth.user.id}", ""},
		{"{http.regexp.name.1}", ""},
		{"{env.TENANT}", ""},
		{"{system.hostname}", ""},
		{"{time.now.year}", ""},
		{"{file./etc/tenant}", ""},
		{`\{clientip\}`, ""},
		{"{unclosed", ""},
		{"{clientip}", "unknown placeholder {clientip}: did you mean {client_ip}?"},
		{"{remote_hots}", "unknown placeholder {remote_hots}: did you mean {remote_host}?"},
		{"{zzzzzzzzzz}", "unknown placeholder {zzzzzzzzzz}"},
		{"{tenant.id}", "unknown placeholder {tenant.id}: placeholders are {http.*}, {env.*}, {system.*}, {time.*} or a shorthand such as {client_ip}"},
		{"{http.mcp.tools}", "unknown placeholder {http.mcp.tools}: did you mean {http.mcp.tool}?"},
		{"{http.mcp.sessionid}", "unknown placeholder {http.mcp.sessionid}: did you mean {http.mcp.session_id}?"},
		{"{http.request.body}", "{http.request.body} copies the whole request body for every message a limit counts, and differs with every id: key on who calls or on what, such as {client_ip}, a header or {http.mcp.tool}"},
		{"{http.request.body_base64}", "{http.request.body_base64} copies the whole request body"},
		{"{http.request.headers.X-Key}", "unknown placeholder {http.request.headers.X-Key}: did you mean {http.request.header.X-Key}?"},
		{"{http.request.metod}", "unknown placeholder {http.request.metod}: did you mean {http.request.method}?"},
		{"{http.request.header.}", "unknown placeholder {http.request.header.}"},
		{"{http.request.something_else_entirely}", "unknown placeholder {http.request.something_else_entirely}"},
	}
	for _, tt := range tests {
		t.Run(tt.template, func(t *testing.T) {
			err := Check(tt.template)
			if tt.err == "" {
				assert.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.True(t, strings.HasPrefix(err.Error(), tt.err), "%s", err)
		})
	}
}

func TestExpandShorthandsAsTheCaddyfileDoes(t *testing.T) {
	tests := map[string]string{
		"{client_ip}":             "{http.vars.client_ip}",
		"{header.X-Api-Key}":      "{http.request.header.X-Api-Key}",
		"{cookie.session}":        "{http.request.cookie.session}",
		"{query.token}":           "{http.request.uri.query.token}",
		"{re.name.1}":             "{http.regexp.name.1}",
		"{header.a.b}":            "{header.a.b}",
		"{http.mcp.tool}":         "{http.mcp.tool}",
		"a-{host}-{remote_host}-": "a-{http.request.host}-{http.request.remote.host}-",
		`\{client_ip}`:            `\{client_ip}`,
		"plain":                   "plain",
		"{unclosed":               "{unclosed",
	}
	for in, want := range tests {
		assert.Equal(t, want, expandShorthands(in), in)
	}
}

func TestPiecesOfSplitsATemplateAsCaddysReplacerReadsIt(t *testing.T) {
	type piece struct{ text, name string }
	tests := []struct {
		template string
		want     []piece
	}{
		{"", nil},
		{"plain", []piece{{"plain", ""}}},
		{"{a}", []piece{{"{a}", "a"}}},
		{"x{a}y{b.c}z", []piece{{"x", ""}, {"{a}", "a"}, {"y", ""}, {"{b.c}", "b.c"}, {"z", ""}}},
		{"{a}{b}", []piece{{"{a}", "a"}, {"{b}", "b"}}},
		{`\{a}`, []piece{{`\{a}`, ""}}},
		{`x\\{a}`, []piece{{`x\\`, ""}, {"{a}", "a"}}},
		{"{}", []piece{{"{}", ""}}},
		{"{a", []piece{{"{a", ""}}},
		{"a}{b", []piece{{"a}{b", ""}}},
	}
	for _, tt := range tests {
		t.Run(tt.template, func(t *testing.T) {
			var got []piece
			for text, name := range piecesOf(tt.template) {
				got = append(got, piece{text, name})
			}
			assert.Equal(t, tt.want, got)
		})
	}
	for range piecesOf("x{a}y") {
		break // a caller may stop early
	}
}

func TestKeyValuesAreBoundedAndShownAsDigests(t *testing.T) {
	long := strings.Repeat("k", MaxBytes+1)
	assert.Equal(t, "203.0.113.7", Bound("203.0.113.7"))
	assert.Equal(t, strings.Repeat("k", MaxBytes), Bound(strings.Repeat("k", MaxBytes)))
	assert.Equal(t, feature.BoundKey(long, 0), Bound(long))
	assert.Len(t, Bound(long), 71)
	assert.Equal(t, feature.BoundKey("sha256:forged", 0), Bound("sha256:forged"), "a value cannot pass for a digest")

	// printf %s "secret" | sha256sum | cut -c1-16
	assert.Equal(t, "sha256:2bb80d537b1da3e3", Shown("secret"))
	assert.Equal(t, Shown(long), Shown(Bound(long)), "a kept digest shows as the value it stands for")
	for _, raw := range []string{"sha256:", "sha256:0123", "sha256:" + strings.Repeat("g", 64), "sha256:" + strings.Repeat("a", 65)} {
		assert.Equal(t, Shown(Bound(raw)), Shown(raw), "a raw value that only begins like a digest is digested, never sliced: %q", raw)
	}
}
