package credential

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"
)

// The ways a server gets its credential (Handler.Use).
const (
	// TokenExchange: a token the issuer exchanges the caller's for (RFC
	// 8693), one per caller and server.
	TokenExchange = "token_exchange"
	// ClientCredentials: the gateway's own token for the server, one for
	// every caller (RFC 6749 §4.4).
	ClientCredentials = "client_credentials"
	// Header: a header of the configuration's, a secret (an API key).
	Header = "header"
	// Passthrough: the caller's token, as it came.
	Passthrough = "passthrough"
	// None: no credential at all.
	None = "none"
)

// The ways the gateway authenticates at the issuer (Client.Method).
const (
	SecretBasic = "client_secret_basic"
	SecretPost  = "client_secret_post"
	PrivateKey  = "private_key_jwt"
)

// Client is the gateway's client at the issuer: a confidential client
// registered for it, allowed the grant its server's credential uses.
type Client struct {
	// ID is its client_id.
	ID string `json:"id"`
	// Secret is its secret, for client_secret_basic and client_secret_post.
	// Placeholders known at start ({env.*}, {file.*}) are replaced: keep
	// it out of the config.
	Secret string `json:"secret,omitempty"`
	// Method is how it authenticates: client_secret_basic (the default
	// with a secret), client_secret_post, or private_key_jwt (the default
	// with a key).
	Method string `json:"method,omitempty"`
	// Key is the file of its private key (PEM: PKCS #8, EC or RSA), for
	// private_key_jwt; KeyID the "kid" its assertions name.
	Key   string `json:"key,omitempty"`
	KeyID string `json:"key_id,omitempty"`
}

// Cache bounds the exchanged tokens the gateway remembers.
type Cache struct {
	// Tokens is how many at most. Default DefaultCacheTokens.
	Tokens int `json:"tokens,omitempty"`
	// Bytes is how many bytes at most, counted for each its token, key
	// and bookkeeping. Default DefaultCacheBytes.
	Bytes int64 `json:"bytes,omitempty"`
}

// The defaults.
const (
	DefaultTimeout     = 5 * time.Second
	DefaultCacheTokens = 10_000
	DefaultCacheBytes  = 32 << 20
	// DefaultRate is how many exchanges a second the gateway asks of the
	// issuer at most, for one server, whoever calls; DefaultBurst how many
	// at once after a quiet time.
	DefaultRate  = 50
	DefaultBurst = 100
	// MaxTokenBytes is the longest token the gateway takes from an
	// issuer.
	MaxTokenBytes = 64 << 10
)

// validate checks h's configuration, once its placeholders are replaced.
func (h *Handler) validate() error {
	switch h.Use {
	case TokenExchange, ClientCredentials:
		return h.validateGrant()
	case Header:
		if h.Name == "" || h.Value == "" {
			return errors.New("header: a header name and a value are required")
		}
		if !validHeaderName(h.Name) {
			return fmt.Errorf("header %q: not a header name", h.Name)
		}
		if strings.ContainsAny(h.Value, "\r\n\x00") {
			return fmt.Errorf("header %s: its value holds a line break or NUL", h.Name)
		}
		return nil
	case Passthrough, None:
		return nil
	case "":
		return errors.New("use is required: token_exchange, client_credentials, header, passthrough or none")
	}
	return fmt.Errorf("use %q: not token_exchange, client_credentials, header, passthrough or none", h.Use)
}

func (h *Handler) validateGrant() error {
	if h.Issuer == "" && h.TokenEndpoint == "" {
		return fmt.Errorf("%s: an issuer (or a token_endpoint) is required", h.Use)
	}
	if h.Use == TokenExchange && h.Issuer == "" {
		return errors.New("token_exchange: the issuer is required: only tokens it issued are sent to it")
	}
	for _, u := range []string{h.Issuer, h.TokenEndpoint} {
		if err := checkURL(u); err != nil {
			return fmt.Errorf("%s: %q: %w", h.Use, u, err)
		}
	}
	if h.OnBehalfOf && (h.Use != TokenExchange || len(h.Scopes) == 0) {
		return errors.New("on_behalf_of: a token_exchange whose scopes name the server (api://<its app>/.default)")
	}
	if h.Use == TokenExchange && h.Audience == "" && h.Resource == "" {
		return errors.New("token_exchange: the server's audience or resource is required: the token is exchanged for one meant for it")
	}
	if err := h.Client.validate(); err != nil {
		return fmt.Errorf("%s: client: %w", h.Use, err)
	}
	if h.Timeout < 0 || h.Cache.Tokens < 0 || h.Cache.Bytes < 0 || h.Rate < 0 || h.Burst < 0 {
		return fmt.Errorf("%s: timeout, cache, rate and burst are positive", h.Use)
	}
	return nil
}

func (c *Client) validate() error {
	if c.ID == "" {
		return errors.New("the gateway's client_id is required")
	}
	switch c.method() {
	case SecretBasic, SecretPost:
		if c.Secret == "" {
			return fmt.Errorf("%s needs a secret", c.method())
		}
	case PrivateKey:
		if c.Key == "" {
			return errors.New("private_key_jwt needs a key file")
		}
	default:
		return fmt.Errorf("method %q: not client_secret_basic, client_secret_post or private_key_jwt", c.Method)
	}
	return nil
}

// method is how c authenticates.
func (c *Client) method() string {
	switch {
	case c.Method != "":
		return c.Method
	case c.Key != "":
		return PrivateKey
	}
	return SecretBasic
}

// checkURL accepts an https URL, or http on a loopback address.
func checkURL(s string) error {
	if s == "" {
		return nil
	}
	u, err := url.Parse(s)
	if err != nil || u.Host == "" || u.Fragment != "" {
		return errors.New("not an absolute URL")
	}
	if u.Scheme == "https" || (u.Scheme == "http" && isLoopback(u.Hostname())) {
		return nil
	}
	return errors.New("https is required (http only on a loopback address)")
}

func isLoopback(host string) bool {
	ip := net.ParseIP(host)
	return host == "localhost" || (ip != nil && ip.IsLoopback())
}

func validHeaderName(name string) bool {
	if name == "" || http.CanonicalHeaderKey(name) == "Host" {
		return false
	}
	for _, c := range name {
		if c <= ' ' || c >= 0x7f || strings.ContainsRune("\"(),/:;<=>?@[\\]{}", c) {
			return false
		}
	}
	return true
}

// replace replaces the placeholders known at start in the secrets.
func (h *Handler) replace() {
	repl := caddy.NewReplacer()
	h.Client.Secret = repl.ReplaceKnown(h.Client.Secret, "")
	h.Value = repl.ReplaceKnown(h.Value, "")
}
