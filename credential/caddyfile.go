package credential

import (
	"strconv"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/dustin/go-humanize"

	"github.com/caddymcp/caddy-mcp/feature/featurefile"
)

// ParseCaddyfile reads the mcp_credential directive:
//
//	mcp_credential token_exchange|client_credentials {
//		issuer <url>
//		token_endpoint <url>
//		client <id> [<secret>]
//		auth client_secret_basic|client_secret_post|private_key_jwt
//		key <pem file> [<kid>]
//		audience <uri>
//		resource <uri>
//		scopes <scope...>
//		subject_token_type <uri>
//		on_behalf_of
//		timeout <duration>
//		cache <tokens> [<bytes>]
//		rate <per second> [<burst>]
//	}
//	mcp_credential header <name> <value>
//	mcp_credential passthrough
//	mcp_credential none
func ParseCaddyfile(h httpcaddyfile.Helper) (caddyhttp.MiddlewareHandler, error) {
	c := new(Handler)
	return c, c.UnmarshalCaddyfile(h.Dispenser)
}

// UnmarshalCaddyfile reads the directive into c.
func (c *Handler) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next() // the directive's name
	if !d.NextArg() {
		return d.ArgErr()
	}
	c.Use = d.Val()
	switch c.Use {
	case Header:
		if !d.Args(&c.Name, &c.Value) || d.NextArg() {
			return d.Errf("mcp_credential header: a header name and a value, such as X-Api-Key {env.CRM_API_KEY}")
		}
		return noBlock(d)
	case Passthrough, None:
		if d.NextArg() {
			return d.ArgErr()
		}
		return noBlock(d)
	case TokenExchange, ClientCredentials:
		if d.NextArg() {
			return d.ArgErr()
		}
		seen := map[string]bool{}
		for d.NextBlock(0) {
			if err := featurefile.Once(d, "mcp_credential", seen); err != nil {
				return err
			}
			if err := c.grantOption(d); err != nil {
				return err
			}
		}
		return nil
	}
	return d.Errf("mcp_credential %q: not token_exchange, client_credentials, header, passthrough or none", c.Use)
}

func noBlock(d *caddyfile.Dispenser) error {
	if d.NextBlock(0) {
		return d.Errf("mcp_credential %s takes no block", d.Val())
	}
	return nil
}

// grantOption reads one line of a token_exchange or client_credentials
// block.
func (c *Handler) grantOption(d *caddyfile.Dispenser) error {
	var err error
	switch name := d.Val(); name {
	case "issuer":
		c.Issuer, err = featurefile.OneArg(d)
	case "token_endpoint":
		c.TokenEndpoint, err = featurefile.OneArg(d)
	case "client":
		if !d.Args(&c.Client.ID) {
			return d.ArgErr()
		}
		d.Args(&c.Client.Secret)
		if d.NextArg() {
			return d.ArgErr()
		}
	case "auth":
		c.Client.Method, err = featurefile.OneArg(d)
	case "key":
		if !d.Args(&c.Client.Key) {
			return d.ArgErr()
		}
		d.Args(&c.Client.KeyID)
	case "audience":
		c.Audience, err = featurefile.OneArg(d)
	case "resource":
		c.Resource, err = featurefile.OneArg(d)
	case "scopes":
		c.Scopes, err = featurefile.ManyArgs(d)
	case "subject_token_type":
		c.SubjectTokenType, err = featurefile.OneArg(d)
	case "on_behalf_of":
		c.OnBehalfOf, err = true, featurefile.NoArgs(d)
	case "timeout":
		c.Timeout, err = featurefile.PositiveDuration(d)
	case "cache":
		return c.cacheOption(d)
	case "rate":
		return c.rateOption(d)
	default:
		return featurefile.Unrecognized(d, "mcp_credential", name, "issuer", "token_endpoint", "client", "auth", "key", "audience", "resource", "scopes", "subject_token_type", "on_behalf_of", "timeout", "cache", "rate")
	}
	return err
}

func (c *Handler) cacheOption(d *caddyfile.Dispenser) error {
	args := d.RemainingArgs()
	if len(args) < 1 || len(args) > 2 {
		return d.ArgErr()
	}
	n, err := strconv.Atoi(args[0])
	if err != nil || n <= 0 {
		return d.Errf("cache: %q is not a positive number of tokens", args[0])
	}
	c.Cache.Tokens = n
	if len(args) == 2 {
		size, err := humanize.ParseBytes(args[1])
		if err != nil || size == 0 || size > 1<<40 {
			return d.Errf("cache: %q: want a size such as 32MiB", args[1])
		}
		c.Cache.Bytes = int64(size)
	}
	return nil
}

func (c *Handler) rateOption(d *caddyfile.Dispenser) error {
	args := d.RemainingArgs()
	if len(args) < 1 || len(args) > 2 {
		return d.ArgErr()
	}
	for i, a := range args {
		n, err := strconv.Atoi(a)
		if err != nil || n <= 0 {
			return d.Errf("rate: %q is not a positive number", a)
		}
		if i == 0 {
			c.Rate = n
		} else {
			c.Burst = n
		}
	}
	return nil
}

// Interface guards.
var _ caddyfile.Unmarshaler = (*Handler)(nil)
