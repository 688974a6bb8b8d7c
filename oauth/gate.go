package oauth

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync/atomic"
	"time"
	"unicode"

	"github.com/caddyserver/caddy/v2"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
	"go.uber.org/zap"

	"github.com/caddymcp/caddy-mcp/envelope"
	"github.com/caddymcp/caddy-mcp/feature"
)

// Gate is the identity phase: every request the handler serves, but the
// metadata it publishes itself, must carry a valid access token for this
// resource (in its Authorization header only: bearer_methods_supported is
// ["header"]), before its body is read. A request without one is answered
// 401 with the challenge every official client starts its OAuth flow
// from; one whose token lacks a required scope, 403 insufficient_scope.
// The principal of a valid token is written on the exchange for the
// features after it.
type Gate struct {
	cfg      *Config
	verifier *Verifier
	issuers  []string
	logger   *zap.Logger
	// The scopes per tool, prompt and resource (scopes.go); perName: any
	// is configured.
	tools, prompts, uris nameRules
	perName              bool
	// warned is when an unreachable issuer was last logged (UnixNano).
	warned atomic.Int64
}

// MetadataPath is where the Protected Resource Metadata (RFC 9728) is
// served; also followed by the path of the resource it describes.
const MetadataPath = "/.well-known/oauth-protected-resource"

// fetchClient fetches issuers' metadata and keys: bounded, and without
// following redirects to where the configuration did not point.
func fetchClient() *http.Client {
	return &http.Client{
		Timeout: FetchTimeout,
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return errors.New("the issuer redirected: configure the address it redirects to")
		},
	}
}

// New returns the gate of cfg, which must be valid. now is the clock
// (time.Now when nil).
func New(cfg *Config, logger *zap.Logger, now func() time.Time) *Gate {
	if cfg.Resource == "" {
		logger.Info("authorization: no resource configured; a token's audience is held to the URL each request was sent to, Host header included: configure resource where the site answers for several hosts")
	}
	issuers := make([]Issuer, len(cfg.Issuers))
	urls := make([]string, len(cfg.Issuers))
	repl := caddy.NewReplacer()
	for i, is := range cfg.Issuers {
		issuers[i], urls[i] = Issuer{URL: is.URL, JWKS: is.JWKS}, is.URL
		if in := is.Introspection; in != nil {
			issuers[i].Introspection = &Introspection{Endpoint: in.Endpoint, ClientID: repl.ReplaceKnown(in.ClientID, ""), ClientSecret: repl.ReplaceKnown(in.ClientSecret, "")}
		}
	}
	return &Gate{
		cfg: cfg, verifier: NewVerifier(issuers, cfg.leeway(), fetchClient(), now, logger), issuers: urls, logger: logger,
		tools: compileRules(cfg.ToolScopes), prompts: compileRules(cfg.PromptScopes), uris: compileRules(cfg.ResourceScopes),
		perName: len(cfg.ToolScopes)+len(cfg.PromptScopes)+len(cfg.ResourceScopes) > 0,
	}
}

// Admit verifies the token of x's request.
func (g *Gate) Admit(x *feature.Exchange) (feature.Undo, *feature.Refusal) {
	r := x.Request
	resource := g.resource(r, x.Path)
	token, err := bearer(r)
	if err != nil {
		outcomes.WithLabelValues(err.outcome).Inc()
		return nil, g.challenge(r, resource, err, err.words())
	}
	p, verr := g.verifier.Verify(r.Context(), token, resource)
	if verr != nil {
		var e *Error
		errors.As(verr, &e)
		outcomes.WithLabelValues(string(e.Reason)).Inc()
		if e.Reason == IssuerUnavailable || e.Reason == IntrospectionLimited {
			// Once per RefetchAfter, not once per request refused.
			if now := time.Now().UnixNano(); now-g.warned.Load() >= int64(RefetchAfter) {
				g.warned.Store(now)
				g.logger.Warn("access tokens cannot be checked: an issuer cannot be reached, or is asked too often", zap.Error(verr))
			}
			return nil, unavailable(verr)
		}
		return nil, g.challenge(r, resource, &refused{outcome: string(e.Reason), code: "invalid_token", description: describe(e.Reason)}, invalid(e, resource))
	}
	if missing := absent(p.Scopes, g.cfg.Scopes); len(missing) > 0 {
		outcomes.WithLabelValues("insufficient_scope").Inc()
		return nil, g.challenge(r, resource, &refused{outcome: "insufficient_scope", code: "insufficient_scope", status: http.StatusForbidden, description: "the token lacks a required scope"}, insufficientScope(missing, g.cfg.Scopes))
	}
	outcomes.WithLabelValues("valid").Inc()
	x.Principal = p.view
	if g.cfg.StripToken {
		r.Header.Del("Authorization")
	}
	return nil, nil
}

// refused is why a request's credentials were refused, as the challenge
// says it (RFC 6750 §3).
type refused struct {
	outcome     string // the metric's
	code        string // the challenge's error, "" for none given
	description string
	status      int // 401 unless set
	words       func() envelope.Envelope
	// scopes are those the challenge names; the required ones when nil.
	scopes []string
}

func (e *refused) Error() string { return e.outcome }

// bearer is the token of r's Authorization header.
func bearer(r *http.Request) (string, *refused) {
	values := r.Header.Values("Authorization")
	switch {
	case len(values) == 0:
		return "", &refused{outcome: "missing", words: authRequired}
	case len(values) > 1:
		return "", &refused{outcome: string(Malformed), code: "invalid_request", status: http.StatusBadRequest, description: "several Authorization headers", words: malformedHeader}
	}
	scheme, token, _ := strings.Cut(strings.TrimSpace(values[0]), " ")
	token = strings.TrimLeft(token, " ")
	if !strings.EqualFold(scheme, "Bearer") {
		// Another scheme: no credentials this resource server reads.
		return "", &refused{outcome: "missing", words: authRequired}
	}
	if token == "" || strings.ContainsAny(token, " \t") {
		return "", &refused{outcome: string(Malformed), code: "invalid_token", description: describe(Malformed), words: malformedHeader}
	}
	return token, nil
}

// challenge is the refusal of r: status, the WWW-Authenticate challenge
// pointing at the metadata, and env for the model.
func (g *Gate) challenge(r *http.Request, resource string, why *refused, env envelope.Envelope) *feature.Refusal {
	var b strings.Builder
	b.WriteString(`Bearer resource_metadata="`)
	b.WriteString(metadataURL(r, resource))
	b.WriteByte('"')
	scopes := why.scopes
	if scopes == nil {
		scopes = g.cfg.Scopes
	}
	if len(scopes) > 0 {
		b.WriteString(`, scope="` + strings.Join(scopes, " ") + `"`)
	}
	if why.code != "" {
		b.WriteString(`, error="` + why.code + `", error_description="` + why.description + `"`)
	}
	status := why.status
	if status == 0 {
		status = http.StatusUnauthorized
	}
	return &feature.Refusal{
		Envelope: env,
		Status:   status,
		Header:   http.Header{"Www-Authenticate": {b.String()}},
		By:       feature.Rule{Kind: "authorization"},
		Cause:    why,
	}
}

// resource is the resource r is for: the configured one, or the URL r was
// sent to (path as the client sent it), without its query.
func (g *Gate) resource(r *http.Request, path string) string {
	if g.cfg.Resource != "" {
		return g.cfg.Resource
	}
	if path == "" {
		path = r.URL.Path
	}
	// Escaped as a URL writes it: a path is the client's to choose, and
	// nothing in it may end the challenge's quotes.
	return origin(r) + (&url.URL{Path: path}).EscapedPath()
}

func origin(r *http.Request) string {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	// The host goes into a quoted challenge and a JSON document: nothing
	// in it may end the quotes.
	return scheme + "://" + strings.Map(func(c rune) rune {
		if c <= ' ' || c == '"' || c == '\\' || c > '~' {
			return -1
		}
		return unicode.ToLower(c)
	}, r.Host)
}

// metadataURL is where the metadata of resource is served: the well-known
// path followed by the resource's path (RFC 9728 §3.1), on the origin r
// was sent to.
func metadataURL(r *http.Request, resource string) string {
	path := ""
	if i := strings.Index(resource, "://"); i >= 0 {
		if j := strings.IndexByte(resource[i+3:], '/'); j >= 0 {
			path = strings.TrimSuffix(resource[i+3+j:], "/")
		}
	}
	return origin(r) + MetadataPath + path
}

// ServeMetadata serves the Protected Resource Metadata (RFC 9728) when r
// asks for it, at the well-known path or at it followed by the resource's
// path, without a token; served is false for every other request.
func (g *Gate) ServeMetadata(w http.ResponseWriter, r *http.Request) (served bool) {
	rest, ok := strings.CutPrefix(r.URL.Path, MetadataPath)
	if !ok || (rest != "" && rest[0] != '/') || (r.Method != http.MethodGet && r.Method != http.MethodHead) {
		return false
	}
	resource := g.cfg.Resource
	if resource == "" {
		resource = origin(r) + (&url.URL{Path: rest}).EscapedPath()
	}
	meta := oauthex.ProtectedResourceMetadata{
		Resource:               resource,
		AuthorizationServers:   g.issuers,
		ScopesSupported:        g.scopesSupported(),
		BearerMethodsSupported: []string{"header"},
	}
	body, _ := json.Marshal(&meta)
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "public, max-age=3600")
	// Browser-based clients read it from another origin; it is public.
	h.Set("Access-Control-Allow-Origin", "*")
	w.WriteHeader(http.StatusOK)
	if r.Method == http.MethodGet {
		_, _ = w.Write(body)
	}
	return true
}

// absent are the scopes of want that granted lacks.
func absent(granted, want []string) []string {
	var missing []string
	for _, s := range want {
		if !slices.Contains(granted, s) {
			missing = append(missing, s)
		}
	}
	return missing
}

// scopesSupported are every scope a request may need: the endpoint's, then
// those of the rules per tool, prompt and resource, each once.
func (g *Gate) scopesSupported() []string {
	all := slices.Clone(g.cfg.Scopes)
	for _, rules := range [][]ScopeRule{g.cfg.ToolScopes, g.cfg.PromptScopes, g.cfg.ResourceScopes} {
		for _, r := range rules {
			for _, s := range r.Scopes {
				if !slices.Contains(all, s) {
					all = append(all, s)
				}
			}
		}
	}
	return all
}
