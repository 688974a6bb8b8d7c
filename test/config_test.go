package test

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/caddymcp/caddy-mcp/envelope"
	"github.com/caddymcp/caddy-mcp/test/mcptest"
	"github.com/caddymcp/caddy-mcp/test/wire"
)

// Configuration tests: what a config says is what each site gets, and a
// config that cannot mean what it says is refused when it loads. Several of
// them run Caddy with more than one site, which mcptest's gateway (one site
// block) does not do: they adapt and load the config themselves, with the
// admin API off. Like every gateway test of this package, they must not run
// in parallel with another (Caddy runs one config per process).

// multiSite is a whole Caddyfile: the global options of mcptest's
// Caddyfile, and one http://127.0.0.1:PORT site per body, each on a free
// port. It returns the Caddyfile and each site's URL.
func multiSite(t *testing.T, bodies ...string) (string, []string) {
	t.Helper()
	c := mcptest.Caddyfile{Storage: t.TempDir()}
	urls := make([]string, len(bodies))
	for i, body := range bodies {
		urls[i] = "http://" + mcptest.FreeLoopbackAddr(t)
		c.Sites = append(c.Sites, mcptest.Site{Address: urls[i], Body: body})
	}
	return c.String(), urls
}

// adaptCaddyfile adapts a whole Caddyfile to JSON, as `caddy run` does; the
// file is called "Caddyfile" in errors.
func adaptCaddyfile(cfg string) ([]byte, error) {
	adapted, _, err := mcptest.Adapt(cfg)
	return adapted, err
}

// caddyLoader returns a function that loads a JSON config as `caddy reload`
// does (forced, so that loading the same config again replaces it), and
// stops Caddy when the test ends if a load succeeded.
func caddyLoader(t *testing.T) func(cfg []byte) error {
	t.Helper()
	var loaded bool
	t.Cleanup(func() {
		if loaded {
			if err := caddy.Stop(); err != nil {
				t.Errorf("stopping caddy: %v", err)
			}
		}
	})
	return func(cfg []byte) error {
		err := mcptest.Load(cfg)
		if err == nil {
			loaded = true
		}
		return err
	}
}

// loadCaddyfile adapts and loads a whole Caddyfile; adapting must succeed.
func loadCaddyfile(t *testing.T, load func([]byte) error, cfg string) error {
	t.Helper()
	adapted, err := adaptCaddyfile(cfg)
	require.NoError(t, err, "%s", cfg)
	return load(adapted)
}

// twoServersJSON is a JSON config with two servers on free loopback ports,
// each running one mcp handler (given as its JSON object) in front of a
// static response.
func twoServersJSON(t *testing.T, mcpA, mcpB string) []byte {
	t.Helper()
	server := func(mcp string) string {
		return fmt.Sprintf(`{"listen":[%q],"automatic_https":{"disable":true},"routes":[{"handle":[%s,{"handler":"static_response","body":"ok"}]}]}`,
			mcptest.FreeLoopbackAddr(t), mcp)
	}
	return []byte(fmt.Sprintf(`{
	"admin": {"disabled": true},
	"logging": {"logs": {"default": {"level": "ERROR"}}},
	"storage": {"module": "file_system", "root": %q},
	"apps": {"http": {"grace_period": 1, "servers": {"a": %s, "b": %s}}}
}`, t.TempDir(), server(mcpA), server(mcpB)))
}

// lineOf is the 1-based line of the nth (from 1) line of text holding s.
func lineOf(t *testing.T, text, s string, nth int) int {
	t.Helper()
	for i, line := range strings.Split(text, "\n") {
		if strings.Contains(line, s) {
			if nth--; nth == 0 {
				return i + 1
			}
		}
	}
	t.Fatalf("no line %d holding %q in:\n%s", nth, s, text)
	return 0
}

// busyEnvelope sends one tools/call that the site's guard must refuse at
// once, and returns its SERVER_BUSY envelope.
func busyEnvelope(t *testing.T, siteURL, id string) envelope.Parsed {
	t.Helper()
	_, body := post(t, siteURL+"/mcp", wire.ToolCall(id, "slow"), afterReload(t))
	env, err := wire.ResultEnvelope(body)
	require.NoError(t, err, "the call should be refused with an envelope: %s", body)
	require.Equal(t, envelope.ServerBusy, env.Code, "%s", body)
	return env
}

// guardSite is a site with an unnamed concurrency block in front of its own
// gated upstream.
type guardSite struct {
	max, queue int
	gate       *upstreamDouble
	url        string
}

// threeGuardedSites is the Caddyfile of finding 14: three sites whose
// unnamed concurrency blocks differ (max 2 queue 1, max 1, max 5), each in
// front of its own counting gate.
func threeGuardedSites(t *testing.T) (string, []*guardSite) {
	t.Helper()
	sites := []*guardSite{{max: 2, queue: 1}, {max: 1}, {max: 5}}
	bodies := make([]string, len(sites))
	for i, s := range sites {
		s.gate = startUpstream(t, holdAll)
		block := fmt.Sprintf("max %d", s.max)
		if s.queue > 0 {
			block += fmt.Sprintf("\n\t\tqueue %d", s.queue)
		}
		bodies[i] = fmt.Sprintf("mcp {\n\tconcurrency {\n\t\t%s\n\t}\n}\nreverse_proxy %s", block, s.gate.addr)
	}
	cfg, urls := multiSite(t, bodies...)
	for i, s := range sites {
		s.url = urls[i]
	}
	return cfg, sites
}

// busyMessage is the SERVER_BUSY message of a site whose guard is full: max
// in progress, queue waiting.
func busyMessage(max, queue int) string {
	unit := "calls"
	if max == 1 {
		unit = "call"
	}
	return fmt.Sprintf("Server busy: %d %s in progress and %d waiting, the most it takes (%d in progress, %d waiting)", max, unit, queue, max, queue)
}

// sendCalls makes n concurrent tools/call to the site, sent as opts say,
// and waits until its upstream holds max of them. The returned channel yields each
// call's outcome ("done" or an envelope code) once it is answered.
func (s *guardSite) sendCalls(t *testing.T, n int, idPrefix string, opts ...sendOption) chan string {
	t.Helper()
	outcomes := make(chan string, n)
	opts = append(slices.Clip(opts), into(outcomes))
	for c := range n {
		postAsync(t, s.url+"/mcp", wire.ToolCall(fmt.Sprintf("%s-%d", idPrefix, c), "slow"), opts...)
	}
	if !assert.Eventually(t, func() bool { return s.gate.calls.now.Load() == int64(s.max) }, 10*time.Second, time.Millisecond) {
		var answered []string
		for len(outcomes) > 0 {
			answered = append(answered, <-outcomes)
		}
		t.Fatalf("site with max %d, queue %d: its upstream holds %d of %d calls; answered meanwhile: %v",
			s.max, s.queue, s.gate.calls.now.Load(), n, answered)
	}
	return outcomes
}

// Finding 14: unnamed concurrency blocks of different sites used to share
// one guard, whichever site was provisioned last setting the limits for
// all. An unnamed guard is its handler's own: in one config with three sites
// (max 2 queue 1, max 1, max 5), loaded and then reloaded unchanged 8 times,
// each site lets exactly its own max calls reach its upstream at once, queues
// its own queue, sheds the rest, and its SERVER_BUSY envelope gives its own
// numbers.
func TestUnnamedGuardsOfThreeSitesKeepTheirOwnLimitsThroughReloads(t *testing.T) {
	cfg, sites := threeGuardedSites(t)
	adapted, err := adaptCaddyfile(cfg)
	require.NoError(t, err, "%s", cfg)
	load := caddyLoader(t)
	require.NoError(t, load(adapted))
	for range 8 {
		require.NoError(t, load(adapted), "reloading the same config")
	}

	for i, s := range sites {
		calls := s.max + s.queue + 2
		// Sent after reloads: a call the old server, still stopping, took
		// and closed unanswered is sent again (mcptest.ResendingClient).
		outcomes := s.sendCalls(t, calls, fmt.Sprintf("site%d", i), afterReload(t))

		// max in flight, queue waiting: the two calls beyond are shed at
		// once, and so is one more, whose envelope gives this site's numbers.
		for range 2 {
			assert.Equal(t, "SERVER_BUSY", receive(t, outcomes), "site %d", i)
		}
		env := busyEnvelope(t, s.url, fmt.Sprintf("site%d-busy", i))
		assert.Equal(t, busyMessage(s.max, s.queue), env.Message, "site %d", i)
		assert.Equal(t, int64(s.max), s.gate.calls.now.Load(), "site %d: exactly max calls reach the upstream at once", i)
		assert.Empty(t, outcomes, "site %d: the calls in flight and queued are not answered yet", i)

		s.gate.releaseAll()
		for range calls - 2 {
			assert.Equal(t, "done", receive(t, outcomes), "site %d: the calls in flight and queued are served", i)
		}
		assert.Equal(t, int64(s.max), s.gate.calls.peak.Load(), "site %d: never more than max calls at once, and max were reached", i)
	}
}

// Finding 14: capacity never doubles across a reload that keeps an unnamed
// concurrency block. In the three-site config, with the max 1 site's place
// and the max 5 site's five places held, a reload of the same config keeps
// those places taken: one more call to each site is refused SERVER_BUSY,
// with the site's own numbers, before the held calls are released, and the
// held calls are then answered.
func TestReloadKeepsTheHeldPlacesOfUnnamedGuards(t *testing.T) {
	cfg, sites := threeGuardedSites(t)
	load := caddyLoader(t)
	adapted, err := adaptCaddyfile(cfg)
	require.NoError(t, err, "%s", cfg)
	require.NoError(t, load(adapted))

	one, five := sites[1], sites[2]
	// Sent before the reload, by a client that never sends a call twice: a
	// held call the reload cut would show.
	heldOne := one.sendCalls(t, one.max, "held-one")
	heldFive := five.sendCalls(t, five.max, "held-five")

	require.NoError(t, load(adapted), "reloading the same config")
	for _, s := range []*guardSite{one, five} {
		env := busyEnvelope(t, s.url, fmt.Sprintf("after-reload-%d", s.max))
		assert.Equal(t, busyMessage(s.max, 0), env.Message, "the places held before the reload are still held")
		assert.Equal(t, int64(s.max), s.gate.calls.peak.Load(), "no call beyond max reached the upstream")
	}

	one.gate.releaseAll()
	five.gate.releaseAll()
	for range one.max {
		assert.Equal(t, "done", receive(t, heldOne), "a call held through the reload is answered")
	}
	for range five.max {
		assert.Equal(t, "done", receive(t, heldFive), "a call held through the reload is answered")
	}
}

// Finding 14: a rate limit's name shares its buckets, and a named
// concurrency block its places, so two sites that give one name different
// settings cannot both have theirs. As a Caddyfile, the config fails to adapt
// with an error naming both lines; as JSON, caddy.Load fails with an error
// naming the limit or the guard.
func TestOneNameWithTwoSettingsIsRefused(t *testing.T) {
	for _, tc := range []struct {
		name, line, named string
		sites, json       [2]string
	}{{
		name:  "rate limit",
		line:  "rate_limit per_client",
		named: `rate_limit "per_client"`,
		sites: [2]string{"rate_limit per_client {\n\t\trate 10/1m\n\t}", "rate_limit per_client {\n\t\trate 20/1m\n\t}"},
		json:  [2]string{`"features":{"rate_limits":{"limits":{"per_client":{"rate":"10/1m"}}}}`, `"features":{"rate_limits":{"limits":{"per_client":{"rate":"20/1m"}}}}`},
	}, {
		name:  "guard",
		line:  "concurrency shared",
		named: `concurrency "shared"`,
		sites: [2]string{"concurrency shared {\n\t\tmax 2\n\t}", "concurrency shared {\n\t\tmax 3\n\t}"},
		json:  [2]string{`"features":{"concurrency":{"name":"shared","max":2}}`, `"features":{"concurrency":{"name":"shared","max":3}}`},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, _ := multiSite(t, "mcp {\n\t"+tc.sites[0]+"\n}\nrespond ok", "mcp {\n\t"+tc.sites[1]+"\n}\nrespond ok")
			_, err := adaptCaddyfile(cfg)
			require.Error(t, err, "%s", cfg)
			t.Logf("adapting: %v", err)
			first, second := lineOf(t, cfg, tc.line, 1), lineOf(t, cfg, tc.line, 2)
			assert.Contains(t, err.Error(), fmt.Sprintf(`%s is configured at Caddyfile:%d and, differently, at Caddyfile:%d`, tc.named, first, second))

			load := caddyLoader(t)
			err = load(twoServersJSON(t, `{"handler":"mcp",`+tc.json[0]+`}`, `{"handler":"mcp",`+tc.json[1]+`}`))
			require.Error(t, err, "a JSON config giving one name two settings must not load")
			t.Logf("loading: %v", err)
			assert.Contains(t, err.Error(), tc.named)
			assert.Contains(t, err.Error(), "configured differently")
		})
	}
}

// Finding 15: a key template is checked when the config loads: {clientip}
// is no placeholder and would put every client under one key. In a
// Caddyfile it fails to adapt, at the key's own line, suggesting
// {client_ip}; in JSON, caddy.Load fails.
func TestUnknownPlaceholderInAKeyIsRefusedAtLoad(t *testing.T) {
	cfg, _ := multiSite(t, "mcp {\n\trate_limit typo {\n\t\tkey {clientip}\n\t\trate 10/1m\n\t}\n}\nrespond ok")
	_, err := adaptCaddyfile(cfg)
	require.Error(t, err, "%s", cfg)
	t.Logf("adapting: %v", err)
	assert.Contains(t, err.Error(), "{clientip}")
	assert.Contains(t, err.Error(), "did you mean {client_ip}?")
	assert.Contains(t, err.Error(), fmt.Sprintf("did you mean {client_ip}?, at Caddyfile:%d", lineOf(t, cfg, "key {clientip}", 1)))

	load := caddyLoader(t)
	err = load(twoServersJSON(t,
		`{"handler":"mcp","features":{"rate_limits":{"limits":{"typo":{"key":"{clientip}","rate":"10/1m"}}}}}`,
		`{"handler":"mcp"}`,
	))
	require.Error(t, err, `a JSON key "{clientip}" must not load`)
	t.Logf("loading: %v", err)
	assert.Contains(t, err.Error(), "{clientip}")
	assert.Contains(t, err.Error(), "client_ip")
}

// A bind template is checked as a key is: a typo would leave every
// request without a principal, and so without a session.
func TestUnknownPlaceholderInBindIsRefusedAtLoad(t *testing.T) {
	cfg, _ := multiSite(t, "mcp {\n\tsessions {\n\t\tsecret "+poolSecret+"\n\t\tbind {http.request.headers.Authorization}\n\t}\n}\nrespond ok")
	_, err := adaptCaddyfile(cfg)
	require.Error(t, err, "%s", cfg)
	t.Logf("adapting: %v", err)
	assert.Contains(t, err.Error(), "did you mean {http.request.header.Authorization}?")
	assert.Contains(t, err.Error(), fmt.Sprintf("?, at Caddyfile:%d", lineOf(t, cfg, "bind {", 1)))

	load := caddyLoader(t)
	err = load(twoServersJSON(t,
		`{"handler":"mcp","features":{"sessions":{"secrets":["`+poolSecret+`"],"bind":"{http.request.headers.Authorization}"}}}`,
		`{"handler":"mcp"}`,
	))
	require.Error(t, err, "a JSON bind with an unknown placeholder must not load")
	t.Logf("loading: %v", err)
	assert.Contains(t, err.Error(), "did you mean {http.request.header.Authorization}?")
}

// A sealing secret whose variable is unset where the Caddyfile is adapted
// is a warning at its line; where Caddy runs without it, the config does
// not load, and the handler's own error starts with the option and the
// placeholder, and says why it is empty.
func TestAnUnsetSealingSecretIsWarnedOfAndRefusedAtLoad(t *testing.T) {
	cfg, _ := multiSite(t, "mcp {\n\tsessions {\n\t\tsecret {env.CADDY_MCP_UNSET_SESSION_KEY}\n\t}\n}\nrespond ok")
	adapted, warnings, err := mcptest.Adapt(cfg)
	require.NoError(t, err, "%s", cfg)
	require.Len(t, warnings, 1)
	w := warnings[0]
	t.Logf("adapting: %s", w)
	assert.Equal(t, "Caddyfile", w.File)
	assert.Equal(t, lineOf(t, cfg, "secret {env.", 1), w.Line)
	assert.Equal(t, "mcp", w.Directive)
	assert.True(t, strings.HasPrefix(w.Message, "sessions: secret {env.CADDY_MCP_UNSET_SESSION_KEY} is empty: environment variable CADDY_MCP_UNSET_SESSION_KEY is not set;"), w.Message)

	err = caddyLoader(t)(adapted)
	require.Error(t, err, "a config whose sealing secret is empty must not load")
	t.Logf("loading: %v", err)
	assert.Contains(t, err.Error(), "provision http.handlers.mcp: sessions: secret {env.CADDY_MCP_UNSET_SESSION_KEY} is empty: environment variable CADDY_MCP_UNSET_SESSION_KEY is not set;")
}

// Finding 16: the admin API's /mcp/status shows each limit's max_keys and
// whether keys overflow into the shared bucket: with max_keys 1, a second
// client is on the overflow bucket and the status says "overflowing": true.
// A reload that raises max_keys shows, and applies, the new cap: a third
// client gets a bucket of its own.
func TestAdminStatusShowsMaxKeysAndOverflow(t *testing.T) {
	upstream := startUpstream(t).addr
	site := func(maxKeys int) string {
		return fmt.Sprintf("mcp {\n\trate_limit status_keys {\n\t\tkey {header.X-Client}\n\t\trate 10/1h\n\t\tmax_keys %d\n\t}\n}\nreverse_proxy %s", maxKeys, upstream)
	}
	g := mcptest.StartGatewayWith(t, mcptest.GatewayConfig{Admin: true, Site: site(1)})
	call := func(client string) {
		t.Helper()
		_, body := post(t, g.URL+"/mcp", wire.ToolCall(client, "echo"), afterReload(t), withHeader("X-Client", client))
		require.Equal(t, "done", wire.Outcome(body))
	}
	limitStatus := func() map[string]any {
		t.Helper()
		raw, _, err := getStatus(g.AdminURL)
		require.NoError(t, err, "%s", raw)
		var s struct {
			Handlers []struct {
				Features struct {
					RateLimits struct {
						Limits []map[string]any `json:"limits"`
					} `json:"rate_limits"`
				} `json:"features"`
			} `json:"handlers"`
		}
		require.NoError(t, json.Unmarshal(raw, &s), "%s", raw)
		require.Len(t, s.Handlers, 1, "%s", raw)
		require.Len(t, s.Handlers[0].Features.RateLimits.Limits, 1, "%s", raw)
		return s.Handlers[0].Features.RateLimits.Limits[0]
	}

	call("client-a")
	st := limitStatus()
	assert.Equal(t, 1.0, st["max_keys"], "%v", st)
	assert.Equal(t, false, st["overflowing"], "%v", st)

	call("client-b")
	st = limitStatus()
	assert.Equal(t, 1.0, st["max_keys"], "%v", st)
	assert.Equal(t, true, st["overflowing"], "the second client is on the overflow bucket: %v", st)
	assert.Equal(t, 2.0, st["buckets"], "client-a's bucket and the overflow bucket: %v", st)

	g.Reload(t, site(3))
	call("client-c")
	st = limitStatus()
	assert.Equal(t, 3.0, st["max_keys"], "the reload applies the new max_keys: %v", st)
	assert.Equal(t, 3.0, st["buckets"], "client-c has a bucket of its own, next to client-a's and the overflow: %v", st)
}

// Finding 17: allowed_origins entries are checked when the Caddyfile is
// adapted, not when it loads: "app.example.com" (no scheme) is reported
// with the file and line it is on.
func TestOriginWithoutSchemeFailsToAdaptAtItsLine(t *testing.T) {
	cfg, _ := multiSite(t, "mcp {\n\tallowed_origins app.example.com\n}\nrespond ok")
	_, err := adaptCaddyfile(cfg)
	require.Error(t, err, "%s", cfg)
	t.Logf("adapting: %v", err)
	assert.Contains(t, err.Error(), `allowed_origins: "app.example.com" is not an origin`)
	assert.Contains(t, err.Error(), fmt.Sprintf(", at Caddyfile:%d", lineOf(t, cfg, "allowed_origins", 1)))
}

// Finding 17: a limit's methods are checked when the Caddyfile is adapted:
// the typo tools/calls (which would count nothing) fails with a suggestion
// and its place, while an extension's method in a namespace of its own,
// vendor/run, is accepted, loads, and is counted.
func TestUnknownMethodFailsToAdaptButAnExtensionMethodIsCounted(t *testing.T) {
	cfg, _ := multiSite(t, "mcp {\n\trate_limit calls {\n\t\trate 10/1m\n\t\tmethods tools/calls\n\t}\n}\nrespond ok")
	_, err := adaptCaddyfile(cfg)
	require.Error(t, err, "%s", cfg)
	t.Logf("adapting: %v", err)
	assert.Contains(t, err.Error(), `unknown method "tools/calls": did you mean "tools/call"?`)
	assert.Contains(t, err.Error(), fmt.Sprintf("?, at Caddyfile:%d", lineOf(t, cfg, "methods tools/calls", 1)))

	upstream := startUpstream(t).addr
	g := mcptest.StartGateway(t, "mcp {\n\trate_limit vendor {\n\t\trate 1/1h\n\t\tmethods vendor/run\n\t}\n}\nreverse_proxy "+upstream)
	run := `{"jsonrpc":"2.0","id":1,"method":"vendor/run","params":{"name":"x"}}`
	_, body := post(t, g.URL+"/mcp", run)
	assert.Equal(t, "done", wire.Outcome(body))
	_, body = post(t, g.URL+"/mcp", run)
	assert.Equal(t, "RATE_LIMITED", wire.Outcome(body), "the limit counts vendor/run")
}

// Finding 17: two mcp directives in one site would each read and count
// every request; the config fails to load with an error saying two mcp
// handlers handle the same requests. Two mcp directives in handle blocks
// with path matchers see different requests: that config loads, and each
// counts its own requests.
func TestTwoMCPHandlersOnTheSameRequestsAreRefused(t *testing.T) {
	cfg, _ := multiSite(t, "mcp {\n\trate_limit first {\n\t\trate 10/1m\n\t}\n}\nmcp {\n\tconcurrency {\n\t\tmax 2\n\t}\n}\nrespond ok")
	load := caddyLoader(t)
	err := loadCaddyfile(t, load, cfg)
	require.Error(t, err, "two mcp directives in one site must not load")
	t.Logf("loading: %v", err)
	assert.Contains(t, err.Error(), "two mcp handlers")

	upstream := startUpstream(t).addr
	g := mcptest.StartGateway(t, fmt.Sprintf(`handle /a/* {
	mcp {
		rate_limit path_a {
			rate 1/1h
		}
	}
	reverse_proxy %s
}
handle /b/* {
	mcp {
		rate_limit path_b {
			rate 1/1h
		}
	}
	reverse_proxy %s
}`, upstream, upstream))
	_, body := post(t, g.URL+"/a/mcp", wire.ToolCall("a1", "echo"))
	assert.Equal(t, "done", wire.Outcome(body))
	_, body = post(t, g.URL+"/a/mcp", wire.ToolCall("a2", "echo"))
	assert.Equal(t, "RATE_LIMITED", wire.Outcome(body))
	_, body = post(t, g.URL+"/b/mcp", wire.ToolCall("b1", "echo"))
	assert.Equal(t, "done", wire.Outcome(body), "the other handle block's limit has its own bucket")
}

// Finding 17: rates take days. rate 1000/1d (burst 1) works end to end: the
// second call is refused RATE_LIMITED, worded "1000 calls per 24h", retry
// after 86.4 s rounded up. (ratelimit.ParseRate learned days in 69268b6, so
// this holds from that commit on; before it, the Caddyfile failed to adapt.)
func TestRateInDaysWorksEndToEnd(t *testing.T) {
	upstream := startUpstream(t).addr
	g := mcptest.StartGateway(t, "mcp {\n\trate_limit daily {\n\t\trate 1000/1d\n\t\tburst 1\n\t}\n}\nreverse_proxy "+upstream)
	_, body := post(t, g.URL+"/mcp", wire.ToolCall("1", "echo"))
	require.Equal(t, "done", wire.Outcome(body))

	resp, body := post(t, g.URL+"/mcp", wire.ToolCall("2", "echo"))
	env, err := wire.ResultEnvelope(body)
	require.NoError(t, err, "%s", body)
	assert.Equal(t, envelope.RateLimited, env.Code)
	assert.Equal(t, "Rate limit exceeded: 1000 calls per 24h for this client", env.Message)
	assert.Contains(t, env.Details, envelope.Detail{Key: "rate", Value: "1000 calls per 24h"})
	assert.Equal(t, "87", resp.Header.Get("Retry-After"))
}

// Finding 17: a rate_limit block without rate is reported at the line of
// the block (rate_limit <name>), not at its closing brace.
func TestMissingRateIsReportedAtTheRateLimitLine(t *testing.T) {
	cfg, _ := multiSite(t, "mcp {\n\trate_limit no_rate {\n\t\tburst 5\n\t}\n}\nrespond ok")
	_, err := adaptCaddyfile(cfg)
	require.Error(t, err, "%s", cfg)
	t.Logf("adapting: %v", err)
	assert.Contains(t, err.Error(), `rate_limit "no_rate": rate is required`)
	assert.True(t, strings.HasSuffix(err.Error(), fmt.Sprintf(", at Caddyfile:%d", lineOf(t, cfg, "rate_limit no_rate", 1))), "%v", err)
}
