package federation

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"net/http"
	"sync"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/caddymcp/caddy-mcp/feature"
)

// Each server's credential. The caller's token is for the gateway (its
// audience is the gateway's resource), not for any server behind it: a
// server given it could replay it against the others, which the MCP
// authorization specification forbids (token passthrough). With
// authorization, each server's block says what it gets instead, with
// mcp_credential (package credential): a token exchanged for one meant
// for it, the gateway's own, a secret header, or nothing.

// serverRoute runs a server's route with the request variable that names it
// set, so that its handlers (its credential) name it in their words. When
// the gateway verifies the caller's token (bound), the route gets the
// request without it, nor the caller's cookies, whatever its handlers do
// (a credential under a matcher that does not match): the credential it
// names puts the server's own in their place.
func serverRoute(name string, route caddyhttp.Handler, bound bool) caddyhttp.Handler {
	return caddyhttp.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
		caddyhttp.SetVar(r.Context(), feature.ServerVar, name)
		if bound {
			r = r.WithContext(r.Context())
			r.Header = r.Header.Clone() // the client's request keeps its own
			r.Header.Del("Authorization")
			r.Header.Del("Cookie")
		}
		return route.ServeHTTP(w, r)
	})
}

// checkCredentials refuses a server that would get the caller's token
// (bound: the gateway verifies it): one whose routes name no credential,
// or pass the token through; and, bound or not, one whose credential
// exchanges a token the gateway does not verify.
func checkCredentials(c *Server, bound bool) error {
	use := credentialOf(c.Routes)
	if !bound {
		if use == "token_exchange" {
			return fmt.Errorf("federation: server %q: mcp_credential token_exchange exchanges the caller's verified token, and the gateway verifies none: configure authorization", c.Name)
		}
		return nil
	}
	switch use {
	case "":
		return fmt.Errorf("federation: server %q: the caller's token is for the gateway, not for this server, and is not passed on: "+
			"say in its block what it gets instead, with mcp_credential token_exchange, client_credentials, header or none", c.Name)
	case "passthrough":
		return fmt.Errorf("federation: server %q: mcp_credential passthrough would give it the caller's token, issued for the gateway: "+
			"a server must be given a token meant for it (MCP authorization forbids token passthrough): use token_exchange, client_credentials, header or none", c.Name)
	}
	return nil
}

// credentialOf is how the first credential handler of routes gives its
// server a credential, "" when there is none.
func credentialOf(routes caddyhttp.RouteList) string {
	for _, rt := range routes {
		for _, h := range rt.Handlers {
			switch h := h.(type) {
			case feature.Credential:
				use, _ := h.Credential()
				return use
			case *caddyhttp.Subroute:
				if use := credentialOf(h.Routes); use != "" {
					return use
				}
			}
		}
	}
	return ""
}

// refusedConnects are the refusals that ended a server's last connection
// for a session (a credential the issuer would not give): the session's
// next call to the server is answered with it rather than told to come
// back, while a new connection is tried. At most maxRefusedConnects; past
// it, one at random is forgotten.
type refusedConnects struct {
	mu sync.Mutex
	m  map[string]*feature.Refusal
}

const maxRefusedConnects = 4096

// record keeps why the connection key ended, or forgets it (err nil, or
// no refusal).
func (rc *refusedConnects) record(key string, err error) {
	var ref *feature.Refused
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if !errors.As(err, &ref) {
		delete(rc.m, key)
		return
	}
	if rc.m == nil {
		rc.m = make(map[string]*feature.Refusal)
	}
	if len(rc.m) >= maxRefusedConnects {
		for k := range rc.m {
			delete(rc.m, k)
			break
		}
	}
	rc.m[key] = &ref.Refusal
}

// refusedAtOpen keeps, for the session token opens, why each server its
// initialize could not connect was refused (its credential), so that the
// session's first call to it is answered so rather than told to come back.
func (f *federation) refusedAtOpen(token string, answers []initialized) {
	ref := sha256.Sum256([]byte(token))
	for i := range answers {
		if answers[i].err != nil {
			f.refused.record(string(ref[:])+f.servers[i].name, answers[i].err)
		}
	}
}

// last is why the connection key last ended, nil when it was no refusal.
func (rc *refusedConnects) last(key string) *feature.Refusal {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return rc.m[key]
}
