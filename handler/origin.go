package handler

import (
	"net"
	"net/http"
	"net/url"
	"strings"
)

// originPolicy decides which browser origins may reach the MCP server.
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
type originPolicy struct {
	any     bool
	allowed map[string]bool
}

func newOriginPolicy(origins []string) (originPolicy, error) {
	p := originPolicy{allowed: make(map[string]bool)}
	for _, o := range origins {
		if o == "*" {
			p.any = true
			continue
		}
		norm, ok := normalizeOrigin(o)
		if !ok {
			return p, &originError{o}
		}
		p.allowed[norm] = true
	}
	return p, nil
}

// CheckAllowedOrigins reports the first entry of allowed_origins that is not
// an origin (scheme://host[:port]) or "*".
func CheckAllowedOrigins(origins []string) error {
	_, err := newOriginPolicy(origins)
	return err
}

type originError struct{ origin string }

func (e *originError) Error() string {
	return "allowed_origins: " + quote(e.origin) + " is not an origin such as https://app.example.com"
}

func (p originPolicy) allows(r *http.Request) bool {
	values := r.Header.Values("Origin")
	if len(values) == 0 {
		return true
	}
	if len(values) > 1 {
		return false
	}
	norm, ok := normalizeOrigin(values[0])
	switch {
	case !ok:
		return false
	case p.any:
		return true
	case len(p.allowed) > 0:
		return p.allowed[norm]
	}
	return isLoopbackOrigin(norm)
}

// normalizeOrigin writes an origin as scheme://host[:port], in lower case,
// without a default port.
func normalizeOrigin(o string) (string, bool) {
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

func isLoopbackOrigin(norm string) bool {
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
