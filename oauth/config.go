package oauth

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"
)

// Config is the handler's authorization: the gateway as the OAuth 2.1
// resource server of the MCP servers behind it.
type Config struct {
	// Issuers are the authorization servers whose access tokens are
	// accepted. Required.
	Issuers []IssuerConfig `json:"issuers"`

	// Resource is this server's canonical URL, its resource identifier
	// (RFC 8707): the audience a token must be issued for, and the
	// "resource" of the Protected Resource Metadata, an http or https
	// URL without query or fragment ("https://mcp.example.com/mcp").
	// Default: the origin of the site the handler serves, from its
	// address ("https://mcp.example.com"), when the site answers for one
	// host on one port; required otherwise (a site for any host, several
	// hosts or a wildcard, several ports), and the configuration is
	// refused without it. It never follows what a request says (its Host
	// header, its path).
	Resource string `json:"resource,omitempty"`

	// Scopes are the scopes every request's token must grant. A token
	// without one of them is answered 403 insufficient_scope, naming
	// them, so that a client can ask for them (step-up authorization).
	Scopes []string `json:"scopes,omitempty"`

	// ToolScopes, PromptScopes and ResourceScopes give the scopes a
	// tools/call, a prompts/get, and a resources/read or
	// resources/subscribe needs, by the tool's or prompt's name or the
	// resource's URI: the first rule whose glob matches is its own. A
	// request whose token lacks one is refused before it runs (scopes.go
	// says how each client is told).
	ToolScopes     []ScopeRule `json:"tool_scopes,omitempty"`
	PromptScopes   []ScopeRule `json:"prompt_scopes,omitempty"`
	ResourceScopes []ScopeRule `json:"resource_scopes,omitempty"`

	// Leeway is the clock skew allowed on a token's exp, nbf and iat.
	// Default: DefaultLeeway; at most MaxLeeway.
	Leeway caddy.Duration `json:"leeway,omitempty"`

	// StripToken removes the Authorization header from requests before
	// they go upstream. By default the token goes on: the servers behind
	// the gateway are the resource the token is for, and one that checks
	// tokens itself needs it. Strip it when they do not, so that no token
	// reaches a part of the system that has no use for it.
	StripToken bool `json:"strip_token,omitempty"`
}

// IssuerConfig is one trusted authorization server.
type IssuerConfig struct {
	// URL is the issuer identifier, as its tokens' "iss" carries it and
	// as its metadata (RFC 8414, or OpenID discovery) is found from.
	URL string `json:"url"`
	// JWKS is the address of its key set, when its metadata does not say
	// or is not published.
	JWKS string `json:"jwks,omitempty"`
	// Introspection, when set, checks the issuer's opaque access tokens
	// (those that are not JWTs) at its introspection endpoint (RFC 7662).
	// One issuer at most: an opaque token does not say whose it is.
	Introspection *IntrospectionConfig `json:"introspection,omitempty"`
}

// IntrospectionConfig is how the gateway asks an issuer about its opaque
// tokens.
type IntrospectionConfig struct {
	// Endpoint is the introspection endpoint. Default: the
	// introspection_endpoint of the issuer's metadata.
	Endpoint string `json:"endpoint,omitempty"`
	// ClientID and ClientSecret are the gateway's credentials at the
	// issuer (a client registered for it, allowed to introspect), sent
	// with HTTP Basic. Placeholders known at start ({env.*}, {file.*})
	// are replaced: keep the secret out of the config.
	ClientID     string `json:"client_id"`
	ClientSecret string `json:"client_secret"`
}

const (
	// DefaultLeeway is the clock skew allowed by default.
	DefaultLeeway = 30 * time.Second
	// MaxLeeway bounds the leeway: past it, an expired token would live on.
	MaxLeeway = 5 * time.Minute
)

// Validate checks the configuration.
func (c *Config) Validate() error {
	if len(c.Issuers) == 0 {
		return errors.New("at least one issuer is required")
	}
	seen := make(map[string]bool)
	introspected := ""
	for _, is := range c.Issuers {
		if err := checkFetchable(is.URL); err != nil {
			return fmt.Errorf("issuer %q: %w", is.URL, err)
		}
		if in := is.Introspection; in != nil {
			if introspected != "" {
				return fmt.Errorf("issuer %q: introspection is configured for issuer %q already: one issuer at most introspects opaque tokens", is.URL, introspected)
			}
			introspected = is.URL
			if err := in.validate(); err != nil {
				return fmt.Errorf("issuer %q: introspection: %w", is.URL, err)
			}
		}
		if seen[is.URL] {
			return fmt.Errorf("issuer %q given twice", is.URL)
		}
		seen[is.URL] = true
		if is.JWKS != "" {
			if err := checkFetchable(is.JWKS); err != nil {
				return fmt.Errorf("issuer %q: jwks %q: %w", is.URL, is.JWKS, err)
			}
		}
	}
	if c.Resource != "" {
		if err := checkResource(c.Resource); err != nil {
			return fmt.Errorf("resource %q: %w", c.Resource, err)
		}
	}
	for _, s := range c.Scopes {
		if !isScopeToken(s) {
			return fmt.Errorf("scope %q: a scope is printable ASCII without spaces, quotes or backslashes", s)
		}
	}
	for _, kind := range []struct {
		name  string
		rules []ScopeRule
	}{{"tool_scopes", c.ToolScopes}, {"prompt_scopes", c.PromptScopes}, {"resource_scopes", c.ResourceScopes}} {
		for _, r := range kind.rules {
			if r.Match == "" || len(r.Scopes) == 0 {
				return fmt.Errorf("%s: a rule needs a glob and at least one scope", kind.name)
			}
			for _, s := range r.Scopes {
				if !isScopeToken(s) {
					return fmt.Errorf("%s %q: scope %q: a scope is printable ASCII without spaces, quotes or backslashes", kind.name, r.Match, s)
				}
			}
		}
	}
	if c.Leeway < 0 || time.Duration(c.Leeway) > MaxLeeway {
		return fmt.Errorf("leeway %s: between 0 and %s", time.Duration(c.Leeway), MaxLeeway)
	}
	return nil
}

// Resolve checks what only start can: the introspection credentials'
// placeholders ({env.*}) come out non-empty.
func (c *Config) Resolve() error {
	repl := caddy.NewReplacer()
	for _, is := range c.Issuers {
		if in := is.Introspection; in != nil && (repl.ReplaceKnown(in.ClientID, "") == "" || repl.ReplaceKnown(in.ClientSecret, "") == "") {
			return fmt.Errorf("issuer %q: introspection: the client_id or client_secret comes out empty (an environment variable not set?)", is.URL)
		}
	}
	return nil
}

// CanonicalURL is the resource tokens must be issued for: Resource, or
// else site, the origin of the site the handler serves, which the caller
// reads from Caddy's configuration; unknown is why it could not.
func (c *Config) CanonicalURL(site string, unknown error) (string, error) {
	switch {
	case c.Resource != "":
		return c.Resource, nil
	case unknown != nil:
		return "", fmt.Errorf("resource is required: tokens are issued for one URL, and the site's address names none (%w); give the URL clients reach this MCP server at, e.g. resource https://mcp.example.com/mcp", unknown)
	}
	if err := checkResource(site); err != nil {
		return "", fmt.Errorf("the site's address %q: %w; give resource", site, err)
	}
	return site, nil
}

// checkResource refuses what cannot be a canonical URL: one that is not
// an http or https URL, has a query or a fragment, or holds what would
// end the quotes of the challenge that names its metadata.
func checkResource(resource string) error {
	u, err := url.Parse(resource)
	switch {
	case err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.User != nil || u.Fragment != "" || u.RawQuery != "" || u.ForceQuery:
		return errors.New("an absolute http or https URL without query or fragment is required")
	case strings.ContainsFunc(resource, func(r rune) bool { return r <= ' ' || r == '"' || r == '\\' || r > '~' }):
		return errors.New("a URL of printable ASCII without spaces, quotes or backslashes is required")
	}
	return nil
}

func (in *IntrospectionConfig) validate() error {
	if in.ClientID == "" || in.ClientSecret == "" {
		return errors.New("the gateway's client_id and client_secret at the issuer are required")
	}
	if in.Endpoint != "" {
		if err := checkFetchable(in.Endpoint); err != nil {
			return fmt.Errorf("endpoint %q: %w", in.Endpoint, err)
		}
	}
	return nil
}

func (c *Config) leeway() time.Duration {
	if c.Leeway == 0 {
		return DefaultLeeway
	}
	return time.Duration(c.Leeway)
}

// checkFetchable refuses an address keys or metadata could be fetched
// from in the clear, or spoofed: https, or http to a loopback address.
func checkFetchable(raw string) error {
	u, err := url.Parse(raw)
	if err != nil || !u.IsAbs() || u.Host == "" {
		return errors.New("an absolute URL is required")
	}
	switch {
	case u.Scheme == "https":
		return nil
	case u.Scheme == "http" && isLoopback(u.Hostname()):
		return nil
	}
	return errors.New("https is required (http only to a loopback address)")
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// isScopeToken reports whether s is a scope as RFC 6749 writes it, and so
// may stand in a challenge's quoted scope without escaping.
func isScopeToken(s string) bool {
	return s != "" && !strings.ContainsFunc(s, func(r rune) bool {
		return r < 0x21 || r > 0x7e || r == '"' || r == '\\'
	})
}
