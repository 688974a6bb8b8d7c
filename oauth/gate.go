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

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
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
	// resource is the canonical URL tokens must be issued for, and
	// metadata where its Protected Resource Metadata is served: both
	// from the configuration, never from a request.
	resource, metadata string
	// The scopes per tool, prompt and resource (scopes.go); perName: any
	// is configured.
	tools, prompts, uris nameRules
	perName              bool
	// warned is when an unreachable issuer was last logged (UnixNano).
	warned atomic.Int64
	// stepUps are the challenges given for a name's scope (stepup.go);
	// now is the clock they are remembered by.
	stepUps stepUps
	now     func() time.Time
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

// New returns the gate of cfg, which must be valid, holding tokens to
// resource, the canonical URL (cfg.CanonicalURL). now is the clock
// (time.Now when nil).
func New(cfg *Config, resource string, logger *zap.Logger, now func() time.Time) *Gate {
	if now == nil {
		now = time.Now
	}
	logger.Info("authorization: access tokens must be issued for this resource", zap.String("resource", resource))
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
		resource: resource, metadata: metadataURL(resource),
		tools: compileRules(cfg.ToolScopes), prompts: compileRules(cfg.PromptScopes), uris: compileRules(cfg.ResourceScopes),
		perName: len(cfg.ToolScopes)+len(cfg.PromptScopes)+len(cfg.ResourceScopes) > 0,
		now:     now,
	}
}

// Admit verifies the token of x's request.
func (g *Gate) Admit(x *feature.Exchange) (feature.Undo, *feature.Refusal) {
	r := x.Request
	token, err := bearer(r)
	if err != nil {
		outcomes.WithLabelValues(err.outcome).Inc()
		return nil, g.challenge(err, err.words())
	}
	p, verr := g.verifier.Verify(r.Context(), token, g.resource)
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
		return nil, g.challenge(&refused{outcome: string(e.Reason), code: "invalid_token", description: describe(e.Reason)}, invalid(e, g.resource))
	}
	if missing := absent(p.Scopes, g.cfg.Scopes); len(missing) > 0 {
		outcomes.WithLabelValues("insufficient_scope").Inc()
		return nil, g.challenge(&refused{outcome: "insufficient_scope", code: "insufficient_scope", status: http.StatusForbidden, description: "the token lacks a required scope"}, insufficientScope(missing, g.cfg.Scopes))
	}
	outcomes.WithLabelValues("valid").Inc()
	x.Principal = p.view
	caddyhttp.SetVar(r.Context(), feature.VerifiedVar, p.verified(token, g.resource))
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

// challenge is a refusal: status, the WWW-Authenticate challenge pointing
// at the metadata, and env for the model.
func (g *Gate) challenge(why *refused, env envelope.Envelope) *feature.Refusal {
	var b strings.Builder
	b.WriteString(`Bearer resource_metadata="`)
	b.WriteString(g.metadata)
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

// metadataURL is where the metadata of resource is served: the well-known
// path followed by the resource's path (RFC 9728 §3.1), on its origin.
func metadataURL(resource string) string {
	u, err := url.Parse(resource)
	if err != nil {
		return MetadataPath // a valid resource always parses
	}
	return u.Scheme + "://" + u.Host + MetadataPath + strings.TrimSuffix(u.EscapedPath(), "/")
}

// ServeMetadata serves the Protected Resource Metadata (RFC 9728) when r
// asks for it, at the well-known path or under it, without a token;
// served is false for every other request. Wherever it is asked for, it
// names the one resource tokens must be issued for: a client that asked
// for another (at a path of its choosing) sees that it is not this one.
func (g *Gate) ServeMetadata(w http.ResponseWriter, r *http.Request) (served bool) {
	rest, ok := strings.CutPrefix(r.URL.Path, MetadataPath)
	if !ok || (rest != "" && rest[0] != '/') || (r.Method != http.MethodGet && r.Method != http.MethodHead) {
		return false
	}
	meta := oauthex.ProtectedResourceMetadata{
		Resource:               g.resource,
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
