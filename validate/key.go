package validate

import (
	"crypto/sha256"
	"net"
	"net/http"
	"net/netip"
	"strings"

	"github.com/caddymcp/caddy-mcp/feature"
	"github.com/caddymcp/caddy-mcp/toolschema"
)

// KeyOf is the list a request's tools come from: the endpoint it was sent
// to, as Caddy routed it (the listener, the scheme, the host in lower case
// without its port, the path before any handle_path stripped it, and the
// replica a session is pinned to), and its authorization scope: the
// credentials' digest, or "anonymous" (never the public scope, which only
// a server's cacheScope public opens).
func (f *Feature) KeyOf(x *feature.Exchange) toolschema.ListKey {
	return toolschema.ListKey{Endpoint: f.endpointOf(x), Scope: credentialsScope(x)}
}

// endpointOf is the endpoint part of a request's list key.
func (f *Feature) endpointOf(x *feature.Exchange) string {
	r := x.Request
	var arr [128]byte
	b := arr[:0]
	if addr, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); ok {
		// As addr.String() writes it, without allocating.
		if ta, ok := addr.(*net.TCPAddr); ok && len(ta.IP) > 0 {
			ap := ta.AddrPort()
			b = netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port()).AppendTo(b)
		} else {
			b = append(b, addr.String()...)
		}
	}
	if r.TLS != nil {
		b = append(b, " https "...)
	} else {
		b = append(b, " http "...)
	}
	host := r.Host
	if strings.IndexByte(host, ':') >= 0 {
		if h, _, err := net.SplitHostPort(host); err == nil {
			host = h
		}
	}
	b = append(b, strings.ToLower(host)...)
	b = append(b, x.Path...)
	if x.Replica != "" {
		b = append(b, ' ')
		b = append(b, x.Replica...)
	}
	if last := f.lastEndpoint.Load(); last != nil && *last == string(b) {
		return *last
	}
	e := string(b)
	f.lastEndpoint.Store(&e)
	return e
}

// credentialsScope is the scope part of a request's list key: 16 bytes of
// digest, as bytes (the catalog keeps one per caller). With authorization
// it is the verified principal's (its issuer, subject, client and scopes):
// a client that renews its token keeps its list, and one whose token the
// gateway strips is still nobody else.
func credentialsScope(x *feature.Exchange) string {
	if p := x.Principal; p != nil {
		h := sha256.New()
		for _, s := range []string{"principal", p.Issuer, p.Subject, p.ClientID} {
			h.Write([]byte(s))
			h.Write([]byte{0})
		}
		h.Write([]byte(strings.Join(p.Scopes, " ")))
		return string(h.Sum(nil)[:16])
	}
	auth := x.Request.Header.Get("Authorization")
	if auth == "" {
		return "anonymous"
	}
	sum := sha256.Sum256([]byte(feature.NormalizedAuthorization(auth)))
	return string(sum[:16])
}
