package session

import (
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/caddymcp/caddy-mcp/feature"
	"github.com/caddymcp/caddy-mcp/keys"
	"github.com/caddyserver/caddy/v2"
)

// Config is the handler's sessions: it pins the sessions of MCP's 2025 revisions to the upstream that
// holds them, so that several stateful replicas can sit behind one
// reverse_proxy (with lb_policy mcp_session) and several gateway nodes in
// front of them, sharing nothing but keys. The session id a client sees is
// a token the gateway sealed; it restores the upstream's own id on the way
// in. A token that does not open (tampered, expired, sealed with a key no
// longer held, or, with Bind, presented by other credentials) gets HTTP
// 404, the revisions' "session not found": the client must initialize a
// new session. A token also carries, sealed, the params of the client's
// initialize (up to 2 KiB): when the upstream answers 404 to a session it
// lost (it restarted), the gateway opens a new one there with them, and
// the client goes on with the token it holds. Requests of the stateless
// 2026-07-28 revision have no sessions and are left alone.
type Config struct {
	// Secrets derive the keys that seal session tokens: the first seals,
	// every one opens, so a secret is rotated by putting a new one first
	// and keeping the old one for TTL. Placeholders ({env.*}) are expanded
	// when the config loads; each must be at least 16 bytes (32 random
	// bytes, e.g. from openssl rand -base64 32, are best), but an old one
	// (any but the first) that expands to nothing is left out, so that
	// {env.MCP_SESSION_SECRET_OLD} may stay unset between rotations. Default: keys
	// generated and kept in Caddy's storage and rotated every 12 hours, so
	// that every node sharing the storage shares them.
	Secrets []string `json:"secrets,omitempty"`

	// TTL is how long a session's token opens after the upstream issued
	// the session (at most 30 days). Default: 24h.
	TTL caddy.Duration `json:"ttl,omitempty"`

	// Bind is a placeholder template naming the principal that opens a
	// session, such as {http.request.header.Authorization}: the session
	// then works only for requests whose template gives the same value (a
	// digest of it is sealed in the token). It is read as rate-limit keys
	// are: the Authorization header as servers read it. Default: the
	// verified principal ({http.mcp.auth.issuer} {http.mcp.auth.subject})
	// when the handler has authorization; otherwise any holder of the
	// token.
	Bind string `json:"bind,omitempty"`
}

// DefaultTTL is the default of Config.TTL.
const DefaultTTL = 24 * time.Hour

// Validate checks the settings.
func (s *Config) Validate() error {
	if d := time.Duration(s.TTL); d < 0 || d > MaxTTL {
		return fmt.Errorf("ttl %s: want a positive duration of 30 days at most", d)
	}
	if s.Bind == "" {
		return nil
	}
	if !strings.Contains(s.Bind, "{") {
		return fmt.Errorf("bind %q holds no placeholder: every request would be the same principal", feature.Clip(s.Bind))
	}
	// A typo would leave every request without a principal.
	if err := keys.Check(s.Bind); err != nil {
		return fmt.Errorf("bind %q: %w", feature.Clip(s.Bind), err)
	}
	return nil
}

// expandSecrets replaces the placeholders of the secrets. An old secret
// (any but the first) that expands to nothing is left out: between
// rotations its variable is unset, and there is no older key to open
// with. The first seals, and must be there.
func expandSecrets(templates []string) ([]string, error) {
	repl := caddy.NewReplacer()
	secrets := make([]string, 0, len(templates))
	for i, t := range templates {
		s := repl.ReplaceAll(t, "")
		switch {
		case s == "" && i == 0:
			return nil, emptySealingSecret(t)
		case s == "":
			continue
		}
		secrets = append(secrets, s)
	}
	return secrets, nil
}

// CheckSealingSecret reports that the first secret, which seals, expands
// to nothing in this process's environment, naming its placeholder and the
// variables that are unset or empty: Provision would fail. The Caddyfile
// adapter warns with it, since a config may be adapted where it does not
// run.
func (s *Config) CheckSealingSecret() error {
	if len(s.Secrets) == 0 || caddy.NewReplacer().ReplaceAll(s.Secrets[0], "") != "" {
		return nil
	}
	return emptySealingSecret(s.Secrets[0])
}

// emptySealingSecret is the error for a first secret, template, that
// expands to nothing.
func emptySealingSecret(template string) error {
	var why []string
	for _, p := range keys.Placeholders(template) {
		name, ok := strings.CutPrefix(p, "env.")
		if !ok {
			continue
		}
		if _, set := os.LookupEnv(name); set {
			why = append(why, "environment variable "+feature.Clip(name)+" is empty")
		} else {
			why = append(why, "environment variable "+feature.Clip(name)+" is not set")
		}
	}
	if len(why) == 0 {
		why = append(why, "it expands to nothing")
	}
	return fmt.Errorf("secret %s is empty: %s; it is the first secret, which seals session tokens: set it to at least %d bytes (32 random bytes: openssl rand -base64 32)",
		feature.Clip(template), strings.Join(why, ", "), MinSecret)
}
