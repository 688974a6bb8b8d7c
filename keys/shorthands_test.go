package keys

import (
	"testing"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/stretchr/testify/assert"
)

// TestShorthandsAreTheCaddyfileAdapters holds the handler's table of
// shorthands to the Caddyfile adapter's, which the handler does not import:
// a key template means the same in a JSON config as in a Caddyfile.
func TestShorthandsAreTheCaddyfileAdapters(t *testing.T) {
	templates := []string{"plain", "{unknown}", "{http.vars.client_ip}", `\{client_ip\}`, "a{client_ip}b{header.X-Key}c"}
	for short := range shorthands {
		templates = append(templates, "{"+short+"}", "x:{"+short+"}:y")
	}
	for _, p := range shorthandPrefixes {
		templates = append(templates, "{"+p.short+"Name-1}", "{"+p.short+"a.b}", "{"+p.short+"}")
	}
	for _, tmpl := range templates {
		seg := caddyfile.Segment{{Text: tmpl}}
		httpcaddyfile.NewShorthandReplacer().ApplyToSegment(&seg)
		assert.Equal(t, seg[0].Text, expandShorthands(tmpl), "%s", tmpl)
	}
}
