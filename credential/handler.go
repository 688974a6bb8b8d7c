// Package credential gives each MCP server behind the gateway a credential
// meant for it: the handler http.handlers.mcp_credential, in the server's
// route before its reverse_proxy (the Caddyfile directive mcp_credential,
// in a site next to mcp, or in a federated server's block).
//
// It takes the caller's Authorization header and cookies off the request,
// and puts on it, by its Use:
//
//   - token_exchange: a token the issuer exchanged the caller's verified
//     token for (RFC 8693), whose audience is the server, remembered per
//     caller until shortly before it expires (exchange.go, cache.go);
//   - client_credentials: the gateway's own token for the server, one for
//     every caller (RFC 6749 §4.4);
//   - header: a header of the configuration's, such as an API key;
//   - passthrough: the caller's token, untouched (the request as it came);
//   - none: nothing.
//
// When it cannot obtain a credential, the request does not go on: the
// handler returns a feature.Refused, and the mcp handler tells the model,
// naming the server, what happened and what to do (words.go).
package credential

import (
	"net/http"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"

	"github.com/caddymcp/caddy-mcp/feature"
	"github.com/caddymcp/caddy-mcp/internal/configs"
	"github.com/caddymcp/caddy-mcp/internal/promreg"
)

func init() {
	caddy.RegisterModule(Handler{})
}

// Handler puts a server's credential on the requests to it.
type Handler struct {
	// Use is how the server gets its credential: token_exchange,
	// client_credentials, header, passthrough or none.
	Use string `json:"use"`

	// Issuer is the authorization server asked for tokens (token_exchange,
	// client_credentials); its token endpoint is read from its metadata
	// (RFC 8414, else OpenID discovery) unless TokenEndpoint is given. A
	// token_exchange sends it only tokens it issued itself.
	Issuer        string `json:"issuer,omitempty"`
	TokenEndpoint string `json:"token_endpoint,omitempty"`
	// Client is the gateway's client at the issuer.
	Client Client `json:"client,omitzero"`
	// Audience and Resource name the server a token is asked for (RFC
	// 8693's audience, RFC 8707's resource); Scopes are the scopes it
	// needs.
	Audience string   `json:"audience,omitempty"`
	Resource string   `json:"resource,omitempty"`
	Scopes   []string `json:"scopes,omitempty"`
	// SubjectTokenType is the type the caller's token is said to be
	// (token_exchange). Default urn:ietf:params:oauth:token-type:access_token;
	// an issuer whose exchange profiles name their own (Auth0's custom
	// token exchange) is given theirs.
	SubjectTokenType string `json:"subject_token_type,omitempty"`
	// OnBehalfOf exchanges the caller's token with Entra ID's on-behalf-of
	// flow (a JWT bearer grant, requested_token_use=on_behalf_of) in place
	// of RFC 8693: the server is named by Scopes (api://<app>/.default);
	// Audience or Resource is what the token's "aud" must hold.
	OnBehalfOf bool `json:"on_behalf_of,omitempty"`
	// Timeout bounds each request to the issuer. Default DefaultTimeout.
	Timeout caddy.Duration `json:"timeout,omitempty"`
	// Cache bounds the exchanged tokens remembered (token_exchange).
	Cache Cache `json:"cache,omitzero"`
	// Rate and Burst bound the exchanges asked of the issuer for this
	// server: Rate a second, Burst at once. Defaults DefaultRate and
	// DefaultBurst.
	Rate  int `json:"rate,omitempty"`
	Burst int `json:"burst,omitempty"`

	// Name and Value are the header (Use header): Value may hold
	// placeholders known at start ({env.*}, {file.*}).
	Name  string `json:"name,omitempty"`
	Value string `json:"value,omitempty"`

	logger *zap.Logger
	grant  *grant
	stat   *status
	unlist func()
}

// CaddyModule returns the Caddy module information.
func (Handler) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "http.handlers.mcp_credential",
		New: func() caddy.Module { return new(Handler) },
	}
}

// Provision readies the handler: the secrets read, the grant set up (no
// request is made to the issuer before a call needs one).
func (h *Handler) Provision(ctx caddy.Context) error {
	h.logger = ctx.Logger()
	h.replace()
	if err := h.validate(); err != nil {
		return err
	}
	h.stat = &status{h: h}
	if h.Use == TokenExchange || h.Use == ClientCredentials {
		g, err := newGrant(h)
		if err != nil {
			return err
		}
		h.grant = g
	}
	h.unlist = configs.Sections.Add("mcp_credential", h.stat.view)
	return promreg.Register(ctx, collectors()...)
}

// Cleanup takes the handler off /mcp/status, and lets go of the tokens it
// remembers unless the config that replaces its own keeps them.
func (h *Handler) Cleanup() error {
	if h.unlist != nil {
		h.unlist()
	}
	if h.grant != nil {
		_, _ = kept.Delete(h.poolKey())
		h.grant.asker.client.CloseIdleConnections()
	}
	return nil
}

// ServeHTTP puts the server's credential on r, or refuses it.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request, next caddyhttp.Handler) error {
	h.stat.named(serverOf(r))
	if h.Use == Passthrough {
		return next.ServeHTTP(w, r)
	}
	// The server's header is its own: the client's request, which the
	// gateway reads on (placeholders, logs, its own requests to other
	// servers), keeps the header it came with.
	r = r.WithContext(r.Context())
	r.Header = r.Header.Clone()
	r.Header.Del("Authorization")
	r.Header.Del("Cookie")
	switch h.Use {
	case Header:
		r.Header.Set(h.Name, h.Value)
	case TokenExchange, ClientCredentials:
		if preflight(r) {
			break // a CORS preflight carries no credentials
		}
		token, ref := h.grant.token(r)
		if ref != nil {
			// The mcp handler answers with the refusal; without one in
			// front, Caddy's error handling has its status.
			return caddyhttp.Error(ref.Status, ref)
		}
		r.Header.Set("Authorization", "Bearer "+token)
	}
	return next.ServeHTTP(w, r)
}

// preflight reports whether r is a browser's CORS preflight.
func preflight(r *http.Request) bool {
	return r.Method == http.MethodOptions && r.Header.Get("Origin") != "" && r.Header.Get("Access-Control-Request-Method") != ""
}

// serverOf is the name of the federated server r goes to, "" for a
// site's one server (the words then say "the MCP server").
func serverOf(r *http.Request) string {
	name, _ := caddyhttp.GetVar(r.Context(), feature.ServerVar).(string)
	return name
}

// Credential reports how the handler gives its server a credential and
// the resource that credential is for ("" when it does not say): the
// federation reads it to refuse a server that would get the caller's
// token for the gateway (feature.Credential).
func (h *Handler) Credential() (use, resource string) {
	return h.Use, h.Resource
}

// Interface guards.
var (
	_ caddy.Provisioner           = (*Handler)(nil)
	_ caddy.CleanerUpper          = (*Handler)(nil)
	_ caddyhttp.MiddlewareHandler = (*Handler)(nil)
	_ feature.Credential          = (*Handler)(nil)
)
