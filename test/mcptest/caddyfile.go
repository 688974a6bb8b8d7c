package mcptest

import (
	"cmp"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"
)

// Caddyfile is a whole Caddyfile as the harness writes it: the global
// options every test config shares (no trust store installed, certificates
// in Storage, a short grace period, errors only in the log, unless said
// otherwise), then the site blocks.
type Caddyfile struct {
	// Admin is the admin API's address; "" turns the admin API off.
	Admin string
	// AutoHTTPS is the auto_https option. Default: "off";
	// "disable_redirects" lets an https:// site have a certificate from
	// Caddy's internal CA.
	AutoHTTPS string
	// DefaultBind is the default_bind option, e.g. "127.0.0.1"; "" leaves
	// it out.
	DefaultBind string
	// GracePeriod is the grace_period option. Default: 1ns, so that tests
	// stop at once.
	GracePeriod time.Duration
	// Storage is the folder of Caddy's certificates and CA.
	Storage string
	// Log is the body of the global log block. Default: "level ERROR".
	Log string
	// Global is added to the global options block, e.g. a servers block.
	Global string
	// Sites are the site blocks, in order.
	Sites []Site
}

// Site is one site block of a Caddyfile.
type Site struct {
	// Address is the site address, e.g. "http://127.0.0.1:PORT".
	Address string
	// Body is the body of the block, one directive a line.
	Body string
}

// String is the Caddyfile's text.
func (c Caddyfile) String() string {
	var b strings.Builder
	b.WriteString("{\n")
	if c.Admin == "" {
		b.WriteString("\tadmin off\n")
	} else {
		fmt.Fprintf(&b, "\tadmin %s\n", c.Admin)
	}
	b.WriteString("\tskip_install_trust\n")
	fmt.Fprintf(&b, "\tauto_https %s\n", cmp.Or(c.AutoHTTPS, "off"))
	if c.DefaultBind != "" {
		fmt.Fprintf(&b, "\tdefault_bind %s\n", c.DefaultBind)
	}
	fmt.Fprintf(&b, "\tgrace_period %s\n", cmp.Or(c.GracePeriod, time.Nanosecond))
	fmt.Fprintf(&b, "\tstorage file_system %q\n", c.Storage)
	fmt.Fprintf(&b, "\tlog {\n\t\t%s\n\t}\n", indent(cmp.Or(c.Log, "level ERROR"), 2))
	if c.Global != "" {
		fmt.Fprintf(&b, "\t%s\n", indent(c.Global, 1))
	}
	b.WriteString("}\n")
	for _, s := range c.Sites {
		fmt.Fprintf(&b, "\n%s {\n\t%s\n}\n", s.Address, indent(s.Body, 1))
	}
	return b.String()
}

// indent indents every line of s but the first by depth tabs.
func indent(s string, depth int) string {
	return strings.ReplaceAll(s, "\n", "\n"+strings.Repeat("\t", depth))
}

// Adapt adapts a whole Caddyfile to JSON, as `caddy run` does; the file is
// called "Caddyfile" in errors.
func Adapt(caddyfile string) ([]byte, []caddyconfig.Warning, error) {
	return caddyconfig.GetAdapter("caddyfile").Adapt([]byte(caddyfile), nil)
}

// Load loads a JSON config as `caddy reload` does: forced, so that loading
// the same config again replaces it. Then it closes the idle connections of
// http.DefaultTransport: the old config's server closed its idle keep-alive
// connections, and a client that picks one of those for a POST gets EOF,
// since a POST is not retried. Real clients reconnect; tests using the
// default transport should not depend on that race.
func Load(cfg []byte) error {
	err := caddy.Load(cfg, true)
	if tr, ok := http.DefaultTransport.(*http.Transport); ok {
		tr.CloseIdleConnections()
	}
	return err
}

// loadCaddyfile adapts and loads c, failing the test if either fails;
// handler, when not nil, is given each mcp handler's JSON to change.
func loadCaddyfile(t testing.TB, c Caddyfile, handler func(map[string]any)) {
	t.Helper()
	cfg := c.String()
	adapted, warnings, err := Adapt(cfg)
	if err != nil {
		t.Fatalf("mcptest: adapting Caddyfile: %v\n%s", err, cfg)
	}
	if handler != nil {
		adapted = rewriteHandlers(t, adapted, handler)
	}
	for _, w := range warnings {
		if !strings.Contains(w.Message, "not formatted") {
			t.Logf("mcptest: Caddyfile warning: %s", w)
		}
	}
	if err := Load(adapted); err != nil {
		t.Fatalf("mcptest: loading config: %v\n%s", err, cfg)
	}
}

// ProxyTo is the reverse_proxy directive for an upstream URL such as
// StartDemoServer's ("http://127.0.0.1:PORT/mcp") or "http://localhost:PORT",
// keeping a loopback Host, as the Go SDK server requires on a loopback
// address.
func ProxyTo(upstream string) string {
	u, err := url.Parse(upstream)
	if err != nil {
		panic(err)
	}
	return fmt.Sprintf("reverse_proxy %s {\n\theader_up Host {upstream_hostport}\n}", u.Host)
}

// rewriteHandlers gives each mcp handler of the JSON config cfg to
// rewrite, wherever it is in the routes' tree.
func rewriteHandlers(t testing.TB, cfg []byte, rewrite func(map[string]any)) []byte {
	t.Helper()
	var tree any
	if err := json.Unmarshal(cfg, &tree); err != nil {
		t.Fatalf("mcptest: reading the adapted config: %v", err)
	}
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			if v["handler"] == "mcp" {
				rewrite(v)
				return
			}
			for _, e := range v {
				walk(e)
			}
		case []any:
			for _, e := range v {
				walk(e)
			}
		}
	}
	walk(tree)
	out, err := json.Marshal(tree)
	if err != nil {
		t.Fatalf("mcptest: writing the config: %v", err)
	}
	return out
}
