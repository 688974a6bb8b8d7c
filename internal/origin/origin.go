// Package origin holds the two origins the gateway knows: the web origins
// allowed to reach it (Policy, read from allowed_origins), and the origin
// of the site a handler serves, read from Caddy's configuration (OfSite).
package origin

import (
	"net"
	"net/http"
	"net/url"
	"strings"
)

// Policy decides which browser origins may reach the MCP server.
//
// A request without an Origin header does not come from a web page (MCP
// clients send none) and is allowed. A request with one is allowed when its
// origin is listed in allowed_origins ("*" allows every origin) or, with
// nothing listed, when it is a loopback origin (http://localhost:6274, say,
// a local inspector). Everything else gets 403 before the body is read.
//
// This stops DNS rebinding: a page on evil.example that resolves its name to
// 127.0.0.1 sends "Origin: http://evil.example", which is neither listed nor
// loopback. Comparing the Origin with the Host header would not stop it,
// since the browser sends the rebound name in both.
type Policy struct {
	any     bool
	allowed map[string]bool
}

// NewPolicy is the policy that allows origins, or an error naming the first
// entry that is not an origin (scheme://host[:port]) or "*".
func NewPolicy(origins []string) (Policy, error) {
	p := Policy{allowed: make(map[string]bool)}
	for _, o := range origins {
		if o == "*" {
			p.any = true
			continue
		}
		norm, ok := normalize(o)
		if !ok {
			return p, &notAnOrigin{o}
		}
		p.allowed[norm] = true
	}
	return p, nil
}

// Check reports the first entry of allowed_origins that is not an origin
// (scheme://host[:port]) or "*".
func Check(origins []string) error {
	_, err := NewPolicy(origins)
	return err
}

type notAnOrigin struct{ origin string }

func (e *notAnOrigin) Error() string {
	return `allowed_origins: "` + e.origin + `" is not an origin such as https://app.example.com`
}

// Allows tells whether r may reach the MCP server: it has no Origin
// header, or one the policy allows.
func (p Policy) Allows(r *http.Request) bool {
	values := r.Header.Values("Origin")
	if len(values) == 0 {
		return true
	}
	if len(values) > 1 {
		return false
	}
	norm, ok := normalize(values[0])
	switch {
	case !ok:
		return false
	case p.any:
		return true
	case len(p.allowed) > 0:
		return p.allowed[norm]
	}
	return isLoopback(norm)
}

// normalize writes an origin as scheme://host[:port], in lower case,
// without a default port.
func normalize(o string) (string, bool) {
	u, err := url.Parse(strings.TrimSpace(o))
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") ||
		(u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return "", false
	}
	host := strings.ToLower(u.Hostname())
	port := u.Port()
	if (u.Scheme == "http" && port == "80") || (u.Scheme == "https" && port == "443") {
		port = ""
	}
	if port != "" {
		host = net.JoinHostPort(host, port)
	} else if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	return u.Scheme + "://" + host, true
}

func isLoopback(norm string) bool {
	u, err := url.Parse(norm)
	if err != nil {
		return false
	}
	host := u.Hostname()
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
