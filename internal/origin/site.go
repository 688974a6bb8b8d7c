package origin

import (
	"cmp"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
)

// The address of the site a handler serves, read from the configuration
// as Caddy provisions the handler, never from a request: what a feature
// may take for the handler's own URL where the Host header, which the
// client chooses (Caddy's host matcher ignores its port), must not count.
//
// Caddy provisions a server's routes in order, and a route's handlers in
// order, and drops a route's raw handlers once it has loaded them all
// (caddy.Context.LoadModule): the route being provisioned is the first
// that still holds them. Its matchers were provisioned before its
// handlers (the http app provisions every route's first; a subroute, its
// own routes'), the server being provisioned is in the context, and the
// handler's ancestors are the modules of ctx.Modules().

// OfSite is the origin (scheme://host[:port]) of the site the handler
// provisioned with ctx serves: the one host the matchers of the routes
// that lead to it allow, the one port its server listens on, and https
// where the server serves TLS on that port. The error says why the
// configuration names no single origin.
func OfSite(ctx caddy.Context) (string, error) {
	mods := ctx.Modules()
	srv, _ := ctx.Value(caddyhttp.ServerCtxKey).(*caddyhttp.Server)
	// The http app is the first module of the lineage, or comes after
	// the app that loaded it.
	i := slices.IndexFunc(mods, func(m caddy.Module) bool { _, ok := m.(*caddyhttp.App); return ok })
	if srv == nil || i < 0 || i == len(mods)-1 {
		return "", errors.New("the handler is not provisioned in an HTTP server")
	}
	app := mods[i].(*caddyhttp.App)
	routes, err := routesTo(srv.Routes, mods[i+1:len(mods)-1])
	if err != nil {
		return "", err
	}
	host, err := onlyHost(routes)
	if err != nil {
		return "", err
	}
	port, err := onlyPort(srv.Listen)
	if err != nil {
		return "", err
	}
	tls := len(srv.TLSConnPolicies) > 0 && port != cmp.Or(app.HTTPPort, caddyhttp.DefaultHTTPPort)
	return of(host, port, tls), nil
}

// of is the origin of host on port, over TLS or not: the port written only
// when it is not the scheme's own, as a URL writes it.
func of(host string, port int, tls bool) string {
	scheme, standard := "http", caddyhttp.DefaultHTTPPort
	if tls {
		scheme, standard = "https", caddyhttp.DefaultHTTPSPort
	}
	if port == standard {
		if strings.Contains(host, ":") {
			host = "[" + host + "]"
		}
		return scheme + "://" + host
	}
	return scheme + "://" + net.JoinHostPort(host, strconv.Itoa(port))
}

// routesTo are the routes that lead to the handler being provisioned: the
// one of routes being provisioned, then, within each subroute of via (the
// handler's ancestors, outermost first), the one of its own.
func routesTo(routes caddyhttp.RouteList, via []caddy.Module) ([]caddyhttp.Route, error) {
	var path []caddyhttp.Route
	for {
		i := slices.IndexFunc(routes, func(r caddyhttp.Route) bool { return len(r.HandlersRaw) > 0 })
		if i < 0 {
			return nil, errors.New("the handler is not in the server's routes (it is in a named route, or handles errors)")
		}
		path = append(path, routes[i])
		if len(via) == 0 {
			return path, nil
		}
		sub, ok := via[0].(*caddyhttp.Subroute)
		if !ok {
			return nil, fmt.Errorf("the handler is inside %s, whose routes are not read", caddy.GetModuleName(via[0]))
		}
		routes, via = sub.Routes, via[1:]
	}
}

// onlyHost is the one host a request must name to pass the matchers of
// every route of path.
func onlyHost(path []caddyhttp.Route) (string, error) {
	var hosts []string // nil: any
	for _, r := range path {
		allowed := hostsOf(r)
		switch {
		case allowed == nil:
		case hosts == nil:
			hosts = allowed
		default:
			hosts = slices.DeleteFunc(hosts, func(h string) bool { return !slices.Contains(allowed, h) })
		}
	}
	switch {
	case hosts == nil:
		return "", errors.New("the site answers for any host")
	case len(hosts) == 0:
		return "", errors.New("no host passes the site's matchers")
	case len(hosts) > 1:
		return "", fmt.Errorf("the site answers for %d hosts (%s)", len(hosts), strings.Join(hosts, ", "))
	case strings.ContainsAny(hosts[0], "*{"):
		return "", fmt.Errorf("the site answers for the hosts %s", hosts[0])
	}
	return hosts[0], nil
}

// hostsOf are the hosts r's matchers allow, nil for any: a request that
// passes one of its matcher sets passes it, and a set without a host
// matcher takes any host.
func hostsOf(r caddyhttp.Route) []string {
	if len(r.MatcherSets) == 0 {
		return nil
	}
	hosts := []string{}
	for _, set := range r.MatcherSets {
		i := slices.IndexFunc(set, func(m any) bool { _, ok := m.(*caddyhttp.MatchHost); return ok })
		if i < 0 {
			return nil
		}
		// Caddy has written each host in lower case (but a wildcard or a
		// placeholder) when it provisioned the matcher.
		for _, h := range *set[i].(*caddyhttp.MatchHost) {
			if !slices.Contains(hosts, h) {
				hosts = append(hosts, h)
			}
		}
	}
	return hosts
}

// onlyPort is the one port the listener addresses listen on.
func onlyPort(listen []string) (int, error) {
	port := 0
	for _, l := range listen {
		addr, err := caddy.ParseNetworkAddress(l)
		switch {
		case err != nil:
			return 0, err
		case addr.IsUnixNetwork() || addr.IsFdNetwork():
			return 0, fmt.Errorf("the server listens on %s, which has no port", l)
		case addr.PortRangeSize() != 1 || (port != 0 && int(addr.StartPort) != port):
			return 0, fmt.Errorf("the server listens on several ports (%s)", strings.Join(listen, ", "))
		}
		port = int(addr.StartPort)
	}
	if port == 0 {
		return 0, errors.New("the server listens on no port")
	}
	return port, nil
}
