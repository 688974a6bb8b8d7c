package limits

import (
	"cmp"
	"errors"
	"fmt"

	"github.com/caddymcp/caddy-mcp/feature"
	"github.com/caddymcp/caddy-mcp/keys"
	"github.com/caddymcp/caddy-mcp/ratelimit"
)

// Config is one named token-bucket limit, as the handler's rate_limits
// configure it.
type Config struct {
	// Key is a placeholder template evaluated per message; each distinct
	// value gets its own bucket. Default: {http.vars.client_ip} (written
	// {client_ip} in a Caddyfile), the client's address, which honours the
	// server's trusted_proxies. Any placeholder works, including
	// {http.mcp.tool}, {http.mcp.session_id} and header values; note that a
	// session id alone is chosen by the client and so is spoofable, unless
	// sessions are on (then it is the id in a token the gateway sealed). An
	// unknown placeholder is a configuration error; a request giving twice a
	// header the key reads is refused.
	Key string `json:"key,omitempty"`

	// Rate is how fast tokens refill, as "<events>/<window>": "10/s",
	// "600/1m", "5/30s", "1000/1d". Required.
	Rate string `json:"rate"`

	// Burst is the size of the bucket: how many messages may pass at once
	// after a quiet period. Default: the events of Rate.
	Burst int `json:"burst,omitempty"`

	// Methods are the JSON-RPC methods the limit counts. Default: tools/call.
	Methods []string `json:"methods,omitempty"`

	// Tools narrows which tools/call messages the limit counts: those whose
	// tool name matches one of these globs, where * matches any run of
	// characters. Messages of the other methods are counted whatever their
	// params. Default: every tool.
	Tools []string `json:"tools,omitempty"`

	// MaxKeys caps the number of live buckets. At the cap, a key without a
	// bucket shares one overflow bucket with every other such key, so memory
	// stays bounded and a client spraying keys gets the limit's rate in
	// total, not per key. Buckets that have refilled are dropped, so only
	// keys active within one refill period count. A key value keeps at most
	// 128 bytes (a longer one is kept as its SHA-256 digest), so a bucket
	// takes about 120 bytes with an address as key and at most about 200
	// (ratelimit's BenchmarkMemoryPerBucket*). A reload applies a changed
	// MaxKeys to the live buckets. Default: 1000000.
	MaxKeys int `json:"max_keys,omitempty"`
}

// DefaultKey is the default of Config.Key: the client's address.
const DefaultKey = "{http.vars.client_ip}"

// Validate checks the settings as New reads them, with the rules the
// Caddyfile applies.
func (cfg *Config) Validate() error {
	var errs []error
	if _, err := ratelimit.ParseRate(cfg.Rate); err != nil {
		errs = append(errs, err)
	}
	if cfg.Burst < 0 {
		errs = append(errs, fmt.Errorf("burst %d: must not be negative (0 means the events of rate)", cfg.Burst))
	}
	if cfg.MaxKeys < 0 {
		errs = append(errs, fmt.Errorf("max_keys %d: must not be negative (0 means %d)", cfg.MaxKeys, ratelimit.DefaultMaxKeys))
	}
	if err := keys.Check(cmp.Or(cfg.Key, DefaultKey)); err != nil {
		errs = append(errs, fmt.Errorf("key %q: %w", cfg.Key, err))
	}
	if err := feature.CheckMethods(cfg.Methods); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}
