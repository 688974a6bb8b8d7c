package caddyfile

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/caddymcp/caddy-mcp/guard"
	"github.com/caddymcp/caddy-mcp/handler"
	"github.com/caddymcp/caddy-mcp/limits"
)

func TestUnmarshalBuildsConfig(t *testing.T) {
	tests := []struct {
		name  string
		input string
		want  handler.Handler
	}{
		{
			name:  "bare directive leaves every default zero",
			input: `mcp`,
			want:  handler.Handler{},
		},
		{
			name:  "empty block leaves every default zero",
			input: "mcp {\n}",
			want:  handler.Handler{},
		},
		{
			name: "concurrency, origins, upstream retry, keepalive and log_key",
			input: `mcp {
				concurrency tools {
					max           4
					queue         8
					queue_timeout 5s
					cancel_grace  2s
					key           {http.mcp.tool}
					methods       tools/call prompts/get
				}
				allowed_origins https://app.example.com http://localhost:3000
				upstream_retry_after 1m
				sse_keepalive 10s
				log_key
				upstream_cancels_on_close
			}`,
			want: handler.Handler{
				UpstreamCancelsOnClose: true,
				FeaturesRaw: features(t, "concurrency", &guard.Config{
					Name: "tools", Max: 4, Queue: 8, QueueTimeout: caddy.Duration(5 * time.Second),
					CancelGrace: caddy.Duration(2 * time.Second),
					Key:         "{http.mcp.tool}", Methods: []string{"tools/call", "prompts/get"},
				}),
				AllowedOrigins:     []string{"https://app.example.com", "http://localhost:3000"},
				UpstreamRetryAfter: caddy.Duration(time.Minute),
				SSEKeepalive:       caddy.Duration(10 * time.Second),
				LogKey:             true,
			},
		},
		{
			name:  "unnamed concurrency with only max; keepalive off",
			input: "mcp {\n\tconcurrency {\n\t\tmax 2\n\t}\n\tsse_keepalive off\n}",
			want:  handler.Handler{FeaturesRaw: features(t, "concurrency", &guard.Config{Max: 2}), SSEKeepalive: -1},
		},
		{
			name: "limit with only a rate leaves the rest for the handler to default",
			input: `mcp {
				rate_limit per_client {
					rate 10/s
				}
			}`,
			want: handler.Handler{FeaturesRaw: features(t, "rate_limits", map[string]*limits.Config{
				"per_client": {Rate: "10/1s"},
			})},
		},
		{
			name: "every subdirective",
			input: `mcp {
				rate_limit per_tool {
					key      {http.mcp.tool}
					rate     600/1m
					burst    20
					methods  tools/call resources/read
					tools    search_* "admin_*"
					max_keys 5000
				}
				max_request_body 4MiB
				stream_above 256KiB
				read_body_timeout 30s
				max_batch 4
			}`,
			want: handler.Handler{
				StreamAbove:     256 << 10,
				ReadBodyTimeout: caddy.Duration(30 * time.Second),
				MaxBatch:        4,
				FeaturesRaw: features(t, "rate_limits", map[string]*limits.Config{
					"per_tool": {
						Key:     "{http.mcp.tool}",
						Rate:    "600/1m",
						Burst:   20,
						Methods: []string{"tools/call", "resources/read"},
						Tools:   []string{"search_*", "admin_*"},
						MaxKeys: 5000,
					},
				}),
				MaxRequestBody: 4 << 20,
			},
		},
		{
			name: "several limits keep their own settings",
			input: `mcp {
				rate_limit per_client {
					key {client_ip}
					rate 10/s
				}
				max_request_body 1MB
				rate_limit slow_tools {
					key "{http.mcp.session_id} {http.mcp.tool}"
					rate 5/30s
					burst 1
					tools deploy_*
				}
			}`,
			want: handler.Handler{
				FeaturesRaw: features(t, "rate_limits", map[string]*limits.Config{
					"per_client": {Key: "{client_ip}", Rate: "10/1s"},
					"slow_tools": {
						Key:   "{http.mcp.session_id} {http.mcp.tool}",
						Rate:  "5/30s",
						Burst: 1,
						Tools: []string{"deploy_*"},
					},
				}),
				MaxRequestBody: 1_000_000,
			},
		},
		{
			name:  "plain byte count",
			input: "mcp {\n max_request_body 65536\n}",
			want:  handler.Handler{MaxRequestBody: 65536},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got handler.Handler
			require.NoError(t, Unmarshal(caddyfile.NewTestDispenser(tt.input), &got))
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestUnmarshalWritesRatesInCanonicalForm(t *testing.T) {
	tests := map[string]string{
		"10/s":    "10/1s",
		"10/1s":   "10/1s",
		"600/1m":  "600/1m",
		"600/60s": "600/1m",
		"5/30s":   "5/30s",
		"2/90s":   "2/1m30s",
		"100/h":   "100/1h",
		"1/500ms": "1/500ms",
		"1000/1d": "1000/24h",
		"10/d":    "10/24h",
	}
	for in, want := range tests {
		t.Run(in, func(t *testing.T) {
			input := fmt.Sprintf("mcp {\n rate_limit r {\n  rate %s\n }\n}", in)
			var got handler.Handler
			require.NoError(t, Unmarshal(caddyfile.NewTestDispenser(input), &got))
			var f limits.Feature
			require.NoError(t, json.Unmarshal(got.FeaturesRaw["rate_limits"], &f))
			require.Contains(t, f.Limits, "r")
			assert.Equal(t, want, f.Limits["r"].Rate)
		})
	}
}

func TestUnmarshalReadsSizes(t *testing.T) {
	tests := map[string]int64{
		"65536":  65536,
		"64KiB":  64 << 10,
		"4MiB":   4 << 20,
		"1MB":    1_000_000,
		"1.5KiB": 1536,
		"1TiB":   1 << 40,
	}
	for in, want := range tests {
		t.Run(in, func(t *testing.T) {
			var got handler.Handler
			input := "mcp {\n max_request_body " + in + "\n}"
			require.NoError(t, Unmarshal(caddyfile.NewTestDispenser(input), &got))
			assert.Equal(t, want, got.MaxRequestBody)
		})
	}
}

func TestUnmarshalRejectsBadInputAtItsLine(t *testing.T) {
	tests := []struct {
		name    string
		input   string
		wantErr string
		line    int
	}{
		{
			name:    "argument after mcp",
			input:   "mcp 127.0.0.1:9000",
			wantErr: "wrong argument count",
			line:    1,
		},
		{
			name:    "concurrency without max, at the block's line",
			input:   "mcp {\n\tconcurrency {\n\t\tqueue 2\n\t}\n}",
			wantErr: "concurrency: max is required",
			line:    2,
		},
		{
			name:    "unknown concurrency subdirective",
			input:   "mcp {\n\tconcurrency {\n\t\tmax 1\n\t\tlimit 2\n\t}\n}",
			wantErr: `unrecognized concurrency subdirective "limit"`,
			line:    4,
		},
		{
			name:    "negative queue",
			input:   "mcp {\n\tconcurrency {\n\t\tmax 1\n\t\tqueue -1\n\t}\n}",
			wantErr: `queue "-1": want a whole number, 0 or more`,
			line:    4,
		},
		{
			name:    "cancel_grace of no time",
			input:   "mcp {\n\tconcurrency {\n\t\tmax 1\n\t\tcancel_grace 0s\n\t}\n}",
			wantErr: `cancel_grace "0s": want a positive duration`,
			line:    4,
		},
		{
			name:    "bad upstream_retry_after",
			input:   "mcp {\n\tupstream_retry_after soon\n}",
			wantErr: `upstream_retry_after "soon": want a positive duration`,
			line:    2,
		},
		{
			name:    "bad sse_keepalive",
			input:   "mcp {\n\tsse_keepalive 0s\n}",
			wantErr: `sse_keepalive "0s": want a positive duration such as 25s, or off`,
			line:    2,
		},
		{
			name:    "allowed_origins without a value",
			input:   "mcp {\n\tallowed_origins\n}",
			wantErr: "allowed_origins needs at least one value",
			line:    2,
		},
		{
			name:    "unknown validate subdirective",
			input:   "mcp {\n\tvalidate {\n\t\tmax_size 1MiB\n\t}\n}",
			wantErr: `unrecognized validate subdirective "max_size"`,
			line:    3,
		},
		{
			name:    "bad max_catalog_size",
			input:   "mcp {\n\tvalidate {\n\t\tmax_catalog_size lots\n\t}\n}",
			wantErr: `max_catalog_size "lots": want a size such as 4MiB or 65536`,
			line:    3,
		},
		{
			name:    "log_key with an argument",
			input:   "mcp {\n\tlog_key yes\n}",
			wantErr: "wrong argument count",
			line:    2,
		},
		{
			name:    "unknown subdirective",
			input:   "mcp {\n\trate_limits x\n}",
			wantErr: `unrecognized subdirective "rate_limits"`,
			line:    2,
		},
		{
			name:    "unknown rate_limit subdirective",
			input:   "mcp {\n\trate_limit a {\n\t\trate 1/s\n\t\tkeys {client_ip}\n\t}\n}",
			wantErr: `unrecognized rate_limit subdirective "keys"`,
			line:    4,
		},
		{
			name:    "rate_limit without name",
			input:   "mcp {\n\trate_limit {\n\t\trate 1/s\n\t}\n}",
			wantErr: "rate_limit needs a name",
			line:    2,
		},
		{
			name:    "rate_limit with two names",
			input:   "mcp {\n\trate_limit a b {\n\t\trate 1/s\n\t}\n}",
			wantErr: "wrong argument count",
			line:    2,
		},
		{
			name:    "rate_limit missing rate, at the block's line",
			input:   "mcp {\n\trate_limit a {\n\t\tburst 5\n\t}\n}",
			wantErr: `rate_limit "a": rate is required`,
			line:    2,
		},
		{
			name:    "rate_limit without a block",
			input:   "mcp {\n\trate_limit a\n}",
			wantErr: `rate_limit "a": rate is required`,
			line:    2,
		},
		{
			name:    "rate without a value",
			input:   "mcp {\n\trate_limit a {\n\t\trate\n\t}\n}",
			wantErr: "rate needs a value",
			line:    3,
		},
		{
			name:    "rate without a window",
			input:   "mcp {\n\trate_limit a {\n\t\trate 10\n\t}\n}",
			wantErr: `rate "10"`,
			line:    3,
		},
		{
			name:    "rate with an unknown window",
			input:   "mcp {\n\trate_limit a {\n\t\trate 10/fortnight\n\t}\n}",
			wantErr: `rate "10/fortnight"`,
			line:    3,
		},
		{
			name:    "rate of zero events",
			input:   "mcp {\n\trate_limit a {\n\t\trate 0/s\n\t}\n}",
			wantErr: `rate "0/s"`,
			line:    3,
		},
		{
			name:    "rate with two values",
			input:   "mcp {\n\trate_limit a {\n\t\trate 10/s 20/m\n\t}\n}",
			wantErr: `rate takes one value, got another: "20/m"`,
			line:    3,
		},
		{
			name:    "duplicate limit name",
			input:   "mcp {\n\trate_limit a {\n\t\trate 1/s\n\t}\n\trate_limit a {\n\t\trate 2/s\n\t}\n}",
			wantErr: `rate_limit "a" is defined twice`,
			line:    5,
		},
		{
			name:    "duplicate rate_limit subdirective",
			input:   "mcp {\n\trate_limit a {\n\t\trate 1/s\n\t\trate 2/s\n\t}\n}",
			wantErr: `rate_limit "a": rate given twice`,
			line:    4,
		},
		{
			name:    "duplicate list subdirective",
			input:   "mcp {\n\trate_limit a {\n\t\trate 1/s\n\t\ttools x\n\t\ttools y\n\t}\n}",
			wantErr: `rate_limit "a": tools given twice`,
			line:    5,
		},
		{
			name:    "burst zero",
			input:   "mcp {\n\trate_limit a {\n\t\trate 1/s\n\t\tburst 0\n\t}\n}",
			wantErr: `burst "0": want a positive whole number`,
			line:    4,
		},
		{
			name:    "burst negative",
			input:   "mcp {\n\trate_limit a {\n\t\trate 1/s\n\t\tburst -1\n\t}\n}",
			wantErr: `burst "-1": want a positive whole number`,
			line:    4,
		},
		{
			name:    "burst not a number",
			input:   "mcp {\n\trate_limit a {\n\t\trate 1/s\n\t\tburst abc\n\t}\n}",
			wantErr: `burst "abc": want a positive whole number`,
			line:    4,
		},
		{
			name:    "burst without a value",
			input:   "mcp {\n\trate_limit a {\n\t\trate 1/s\n\t\tburst\n\t}\n}",
			wantErr: "burst needs a value",
			line:    4,
		},
		{
			name:    "max_keys not a number",
			input:   "mcp {\n\trate_limit a {\n\t\trate 1/s\n\t\tmax_keys 1e6\n\t}\n}",
			wantErr: `max_keys "1e6": want a positive whole number`,
			line:    4,
		},
		{
			name:    "max_keys zero",
			input:   "mcp {\n\trate_limit a {\n\t\trate 1/s\n\t\tmax_keys 0\n\t}\n}",
			wantErr: `max_keys "0": want a positive whole number`,
			line:    4,
		},
		{
			name:    "methods without values",
			input:   "mcp {\n\trate_limit a {\n\t\trate 1/s\n\t\tmethods\n\t}\n}",
			wantErr: "methods needs at least one value",
			line:    4,
		},
		{
			name:    "tools without values",
			input:   "mcp {\n\trate_limit a {\n\t\trate 1/s\n\t\ttools\n\t}\n}",
			wantErr: "tools needs at least one value",
			line:    4,
		},
		{
			name:    "key with two values",
			input:   "mcp {\n\trate_limit a {\n\t\trate 1/s\n\t\tkey {client_ip} {http.mcp.tool}\n\t}\n}",
			wantErr: `key takes one value, got another: "{http.mcp.tool}"`,
			line:    4,
		},
		{
			name:    "key without a value",
			input:   "mcp {\n\trate_limit a {\n\t\trate 1/s\n\t\tkey\n\t}\n}",
			wantErr: "key needs a value",
			line:    4,
		},
		{
			name:    "max_request_body not a size",
			input:   "mcp {\n\tmax_request_body lots\n}",
			wantErr: `max_request_body "lots": want a size`,
			line:    2,
		},
		{
			name:    "stream_above not a size",
			input:   "mcp {\n\tstream_above never\n}",
			wantErr: `stream_above "never": want a size`,
			line:    2,
		},
		{
			name:    "max_request_body zero",
			input:   "mcp {\n\tmax_request_body 0\n}",
			wantErr: `max_request_body "0": want a size`,
			line:    2,
		},
		{
			name:    "max_request_body negative",
			input:   "mcp {\n\tmax_request_body -1\n}",
			wantErr: `max_request_body "-1": want a size`,
			line:    2,
		},
		{
			name:    "max_request_body beyond 1TiB",
			input:   "mcp {\n\tmax_request_body 2TiB\n}",
			wantErr: `max_request_body "2TiB": want a size`,
			line:    2,
		},
		{
			name:    "max_request_body without a value",
			input:   "mcp {\n\tmax_request_body\n}",
			wantErr: "max_request_body needs a value",
			line:    2,
		},
		{
			name:    "key with an unknown shorthand",
			input:   "mcp {\n\trate_limit a {\n\t\trate 1/s\n\t\tkey {clientip}\n\t}\n}",
			wantErr: `rate_limit "a": key "{clientip}": unknown placeholder {clientip}: did you mean {client_ip}?`,
			line:    4,
		},
		{
			name:    "key with an unknown namespace",
			input:   "mcp {\n\trate_limit a {\n\t\trate 1/s\n\t\tkey {request.host}\n\t}\n}",
			wantErr: `unknown placeholder {request.host}: placeholders are {http.*}, {env.*}`,
			line:    4,
		},
		{
			name:    "key with an unknown mcp placeholder",
			input:   "mcp {\n\trate_limit a {\n\t\trate 1/s\n\t\tkey {http.mcp.tools}\n\t}\n}",
			wantErr: `unknown placeholder {http.mcp.tools}: did you mean {http.mcp.tool}?`,
			line:    4,
		},
		{
			name:    "key with a misspelt header placeholder",
			input:   "mcp {\n\trate_limit a {\n\t\trate 1/s\n\t\tkey {http.request.headers.X-Api-Key}\n\t}\n}",
			wantErr: `unknown placeholder {http.request.headers.X-Api-Key}: did you mean {http.request.header.X-Api-Key}?`,
			line:    4,
		},
		{
			name:    "key reading the request body",
			input:   "mcp {\n\trate_limit a {\n\t\trate 1/s\n\t\tkey {http.request.body}\n\t}\n}",
			wantErr: `{http.request.body} copies the whole request body for every message a limit counts`,
			line:    4,
		},
		{
			name:    "concurrency key with an unknown shorthand",
			input:   "mcp {\n\tconcurrency {\n\t\tmax 1\n\t\tkey {tool}\n\t}\n}",
			wantErr: `concurrency: key "{tool}": unknown placeholder {tool}`,
			line:    4,
		},
		{
			name:    "unknown method in a limit",
			input:   "mcp {\n\trate_limit a {\n\t\trate 1/s\n\t\tmethods tools/calls\n\t}\n}",
			wantErr: `rate_limit "a": methods: unknown method "tools/calls": did you mean "tools/call"?`,
			line:    4,
		},
		{
			name:    "unknown method without a namespace",
			input:   "mcp {\n\tconcurrency {\n\t\tmax 1\n\t\tmethods tools\n\t}\n}",
			wantErr: `concurrency: methods: unknown method "tools"`,
			line:    4,
		},
		{
			name:    "origin without a scheme",
			input:   "mcp {\n\tallowed_origins https://ok.example.com app.example.com\n}",
			wantErr: `allowed_origins: "app.example.com" is not an origin such as https://app.example.com`,
			line:    2,
		},
		{
			name:    "max_batch zero",
			input:   "mcp {\n\tmax_batch 0\n}",
			wantErr: `max_batch "0": want a positive whole number`,
			line:    2,
		},
		{
			name:    "read_body_timeout not a duration",
			input:   "mcp {\n\tread_body_timeout soon\n}",
			wantErr: `read_body_timeout "soon": want a positive duration`,
			line:    2,
		},
		{
			name:    "max_request_body twice",
			input:   "mcp {\n\tmax_request_body 1MiB\n\tmax_request_body 2MiB\n}",
			wantErr: "max_request_body given twice",
			line:    3,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Unmarshal(caddyfile.NewTestDispenser(tt.input), &handler.Handler{})
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.wantErr)
			at := fmt.Sprintf("Testfile:%d", tt.line)
			assert.True(t, strings.HasSuffix(err.Error(), at),
				"error %q should end with the position %s", err, at)
		})
	}
}

// blockOf writes line on line 3 of an mcp directive, inside its block
// named block ("" for the mcp block itself).
func blockOf(block, line string) string {
	switch block {
	case "":
		return "mcp {\n\tlog_key\n\t" + line + "\n}"
	case "rate_limit":
		return "mcp {\n\trate_limit a {\n\t\t" + line + "\n\t\trate 1/s\n\t}\n}"
	case "concurrency":
		return "mcp {\n\tconcurrency {\n\t\t" + line + "\n\t\tmax 1\n\t}\n}"
	case "contract":
		return "mcp {\n\tcontract tools.lock.json {\n\t\t" + line + "\n\t}\n}"
	case "issuer":
		return "mcp {\n\tauthorization {\n\t\tissuer https://a.example {\n\t\t\t" + line + "\n\t\t}\n\t}\n}"
	}
	return "mcp {\n\t" + block + " {\n\t\t" + line + "\n\t}\n}"
}

// A misspelt subdirective gets the one of its block it is closest to, at
// its own line; one close to none gets no guess.
func TestUnmarshalSuggestsTheSubdirectiveMeant(t *testing.T) {
	tests := []struct {
		block, typo, want string
	}{
		{"", "rate_limt", `unrecognized subdirective "rate_limt": did you mean "rate_limit"?`},
		{"", "concurency", `unrecognized subdirective "concurency": did you mean "concurrency"?`},
		{"", "max_bach", `unrecognized subdirective "max_bach": did you mean "max_batch"?`},
		{"", "session", `unrecognized subdirective "session": did you mean "sessions"?`},
		{"", "limits", `unrecognized subdirective "limits"`},
		{"rate_limit", "max_key", `unrecognized rate_limit subdirective "max_key": did you mean "max_keys"?`},
		{"rate_limit", "method", `unrecognized rate_limit subdirective "method": did you mean "methods"?`},
		{"concurrency", "queue_timout", `unrecognized concurrency subdirective "queue_timout": did you mean "queue_timeout"?`},
		{"sessions", "secrets", `unrecognized sessions subdirective "secrets": did you mean "secret"?`},
		{"tools", "alow", `unrecognized tools subdirective "alow": did you mean "allow"?`},
		{"validate", "max_catalog_sise", `unrecognized validate subdirective "max_catalog_sise": did you mean "max_catalog_size"?`},
		{"contract", "on_braking", `unrecognized contract subdirective "on_braking": did you mean "on_breaking"?`},
	}
	for _, tt := range tests {
		t.Run(tt.block+" "+tt.typo, func(t *testing.T) {
			err := Unmarshal(caddyfile.NewTestDispenser(blockOf(tt.block, tt.typo+" x")), &handler.Handler{})
			require.Error(t, err)
			assert.Equal(t, tt.want+", at Testfile:3", err.Error())
		})
	}
}

// Every name a suggestion may give is one its block knows.
func TestEverySuggestedSubdirectiveIsRecognized(t *testing.T) {
	for block, names := range subdirectives {
		for _, name := range names {
			err := Unmarshal(caddyfile.NewTestDispenser(blockOf(block, name)), &handler.Handler{})
			if err != nil {
				assert.NotContains(t, err.Error(), "unrecognized", "%q in block %q", name, block)
			}
		}
	}
}

// The values read with their block's rules are refused at their own line.
func TestUnmarshalRejectsABindAtItsLine(t *testing.T) {
	for bind, want := range map[string]string{
		"{http.request.headers.Authorization}": `sessions: bind "{http.request.headers.Authorization}": unknown placeholder {http.request.headers.Authorization}: did you mean {http.request.header.Authorization}?`,
		"alice":                                `sessions: bind "alice" holds no placeholder`,
	} {
		input := "mcp {\n\tsessions {\n\t\tttl 1h\n\t\tbind " + bind + "\n\t}\n}"
		err := Unmarshal(caddyfile.NewTestDispenser(input), &handler.Handler{})
		require.Error(t, err)
		assert.Contains(t, err.Error(), want)
		assert.True(t, strings.HasSuffix(err.Error(), "Testfile:4"), "%v", err)
	}
}
