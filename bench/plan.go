package main

import (
	"fmt"
	"slices"
	"strings"

	"github.com/caddymcp/caddy-mcp/internal/caddyrun"
)

// config is one way of reaching an upstream: directly, or through a Caddy
// process of its own.
type config struct {
	// Name is what -configs selects and the table shows.
	Name string
	// Upstream is the server behind it: upstreamResponder, upstreamSDK or
	// upstreamSlow.
	Upstream string
	// Direct configurations send straight to the upstream; the others go
	// through a Caddy whose site holds Handler and then reverse_proxy.
	Direct bool
	// Handler is the Caddyfile text before reverse_proxy; "" for a plain
	// reverse_proxy.
	Handler string
	// Keys is how many distinct X-Client values the load generator sends.
	Keys int
	// Denied configurations answer every call with a RATE_LIMITED envelope.
	Denied bool
	// Baseline is the configuration this one's ratios are taken against.
	Baseline string
	// Redis configurations keep their limits' buckets in the benchmark's
	// redis-server; InProcess is the configuration with the same limits
	// and keys in the handler's own memory, their latency's reference.
	Redis     bool
	InProcess string
	// Proxy is Caddyfile text inside the reverse_proxy block, after the
	// settings every configuration shares (sessions' lb_policy); "" for
	// none.
	Proxy string
	// Sessions configurations pin sessions to their upstream: before its
	// first request, the load generator opens a session through the
	// gateway and then names it, by the token the gateway sealed, in every
	// request (session.go). Sealed: the gateway seals it (sessions on);
	// otherwise the id passes as the upstream wrote it.
	Sessions, Sealed bool
	// ListsTools configurations get one tools/list through the gateway
	// before the first round, so that validate knows the echo tool's
	// schema and checks every measured call against it.
	ListsTools bool
	// Policy configurations hide a tool: before the first round, a call
	// to it must be answered UNKNOWN_ACTION by the gateway.
	Policy bool
	// Bearer configurations require a token (authorization): every
	// request carries one the benchmark's issuer signed (issuer.go).
	Bearer bool
	// Traced configurations run Caddy's tracing directive, exporting
	// every span to the benchmark's OTLP sink (otlp.go).
	Traced bool
	// Peer configurations run mholt/caddy-ratelimit, which only the
	// peer's Caddy (bench/peer) has: a run that measures one runs every
	// configuration on that binary. A denied one answers every call with
	// the peer's own refusal, an empty 429.
	Peer bool
	// List configurations send a tools/list (listBody) rather than a
	// tools/call: one row, measured with the first body size's.
	List bool
	// Federated configurations put the three responders behind one mcp
	// block (federatedHandler): the site has no reverse_proxy of its own.
	Federated bool
}

const (
	upstreamResponder = "responder"
	upstreamSDK       = "sdk"
	upstreamSlow      = "slow"
)

// Configuration names.
const (
	cfgDirect      = "direct"
	cfgProxy       = "reverse_proxy"
	cfgControl     = "control"
	cfgMCP         = "mcp"
	cfgMCPStreamed = "mcp-streamed"
	cfgMCPWhole    = "mcp-whole"
	cfgValidate    = "validate"
	cfgTools       = "tools"
	cfgMCPSession  = "mcp-session"
	cfgSessions    = "sessions"
	cfgLimits1     = "limits-1key"
	cfgLimits100k  = "limits-100k"
	cfgRedis1      = "limits-1key-redis"
	cfgRedis100k   = "limits-100k-redis"
	cfgGuard       = "guard"
	cfgDenied      = "denied"
	cfgSDKDirect   = "sdk-direct"
	cfgSDKProxy    = "sdk-reverse_proxy"
	cfgSDKMCP      = "sdk-mcp"
	cfgPeer        = "peer"
	cfgPeerDenied  = "peer-denied"
	cfgAuthz       = "authorization"
	cfgCredential  = "credential"
	cfgTracedHTTP  = "tracing-http"
	cfgTraced      = "tracing"
	cfgFedCall     = "federated-call"
	cfgSlowList    = "mcp-slow-list"
	cfgFedList     = "federated-list"
	sseMeasurement = "sse"
)

// manyKeys is the number of distinct rate-limit keys of limits-100k.
const manyKeys = 100_000

// controlHandler is a middleware that does next to nothing (Caddy's vars,
// setting one variable): measured against reverse_proxy as every other
// configuration is, it shows what such a comparison reads for a handler
// that costs nothing, noise included, the floor any target is read
// against.
const controlHandler = "vars bench_control 1"

// twoLimits are two rate limits that never trigger, keyed by the X-Client
// header the load generator varies, one of them with a key that also needs
// the handler's own placeholder. A burst of a billion never runs dry, and a
// refill of one token an hour means a bucket touched once is not full again
// for an hour, so it is not dropped: with 100,000 keys (all touched once
// before the first round), each limit holds 100,000 live buckets for the
// whole run, the steady worst case rather than a map the sweep keeps
// emptying. Redis keeps such a bucket for the same hour, until it would be
// full again.
var twoLimits = limitsWith("")

// redisAddrMark stands for the benchmark's redis-server, host:port, in a
// configuration's Handler; caddyfile puts the address in its place.
const redisAddrMark = "REDIS_HOST_PORT"

// twoLimitsRedis are the same two limits, with their buckets in Redis.
var twoLimitsRedis = limitsWith("store redis {\n\taddress redis://" + redisAddrMark + "/0\n}")

// limitsWith is the mcp block of twoLimits, with store (a store block, or
// nothing) first.
func limitsWith(store string) string {
	var b strings.Builder
	b.WriteString("mcp {\n")
	if store != "" {
		b.WriteString("\t" + strings.ReplaceAll(store, "\n", "\n\t") + "\n")
	}
	b.WriteString(`	rate_limit per_client {
		key {http.request.header.X-Client}
		rate 1/1h
		burst 1000000000
	}
	rate_limit per_client_tool {
		key {http.request.header.X-Client}/{http.mcp.tool}
		rate 1/1h
		burst 1000000000
	}
}`)
	return b.String()
}

// toolsHandler is a tool policy as an operator writes one: tools hidden,
// one deprecated, and a deadline for every call, so that each measured call
// (to echo, neither hidden nor deprecated) is checked against the policy,
// runs under a deadline, and has its answer read to count its outcome.
const toolsHandler = `mcp {
	tools {
		deny admin_* *delete*
		deprecate old_echo "Use echo instead" echo
		timeout * 1m
	}
}`

// peerZone is mholt/caddy-ratelimit with one zone, keyed as its users key
// it (the client's address, or one key for all), inside a route: the
// directive has no place of its own in the Caddyfile's order. The peer
// keeps a ring of every event of a window per key (24 bytes an event, all
// allocated when the key is first seen), so a zone that never triggers
// allows 10,000 events in 100 ms (100,000 a second, far above any rate
// here) rather than a billion an hour as limits-1key does: a ring of a
// billion events is 24 GB, and even a million (24 MB) grows the process's
// live heap enough that its garbage collector runs less often than the
// other configurations', which makes it look cheaper than a bare
// reverse_proxy.
func peerZone(key string, events int, window string) string {
	return fmt.Sprintf("route {\n\trate_limit {\n\t\tzone bench {\n\t\t\tkey %s\n\t\t\tevents %d\n\t\t\twindow %s\n\t\t}\n\t}\n}", key, events, window)
}

// sessionsHandler turns sessions on with a fixed secret (sessionSecret), and
// sessionsProxy sends each request of a session to the upstream that holds
// it, the others round robin.
var (
	sessionsHandler = "mcp {\n\tsessions {\n\t\tsecret " + sessionSecret + "\n\t}\n}"
	sessionsProxy   = "lb_policy mcp_session {\n\tfallback round_robin\n}"
)

// allConfigs returns every configuration, in the order a round measures
// them. guardMax is the concurrency guard's max, far above the client count.
// Each configuration with its limits' buckets in Redis comes right after
// the one with the same limits in process, and sessions right after
// mcp-session (the same session, not sealed), so that the two measurements
// compared are seconds apart.
func allConfigs(guardMax int) []config {
	return []config{
		{Name: cfgDirect, Upstream: upstreamResponder, Direct: true, Keys: 1, Baseline: cfgProxy},
		{Name: cfgProxy, Upstream: upstreamResponder, Keys: 1, Baseline: cfgProxy},
		{Name: cfgControl, Upstream: upstreamResponder, Handler: controlHandler, Keys: 1, Baseline: cfgProxy},
		{Name: cfgMCP, Upstream: upstreamResponder, Handler: "mcp", Keys: 1, Baseline: cfgProxy},
		// Every call over 16 KiB streamed, and every body read whole:
		// what streaming costs, and (paced) what it buys.
		{Name: cfgMCPStreamed, Upstream: upstreamResponder, Handler: "mcp {\n\tstream_above 16KiB\n}", Keys: 1, Baseline: cfgProxy},
		{Name: cfgMCPWhole, Upstream: upstreamResponder, Handler: "mcp {\n\tstream_above 64MiB\n}", Keys: 1, Baseline: cfgProxy},
		{Name: cfgTools, Upstream: upstreamResponder, Handler: toolsHandler, Keys: 1, Baseline: cfgMCP, Policy: true},
		// Three servers behind one gateway: a call routed by its tool's
		// name (over mcp), and tools/list asked of all three, one of them
		// slow (over that server alone).
		{Name: cfgFedCall, Upstream: upstreamResponder, Handler: federatedHandler, Keys: 1, Baseline: cfgMCP, Federated: true},
		{Name: cfgSlowList, Upstream: upstreamSlow, Handler: "mcp", Keys: 1, Baseline: cfgSlowList, List: true},
		{Name: cfgFedList, Upstream: upstreamResponder, Handler: federatedHandler, Keys: 1, Baseline: cfgSlowList, List: true, Federated: true},
		{Name: cfgMCPSession, Upstream: upstreamResponder, Handler: "mcp", Keys: 1, Baseline: cfgProxy, Sessions: true},
		{Name: cfgSessions, Upstream: upstreamResponder, Handler: sessionsHandler, Proxy: sessionsProxy, Keys: 1, Baseline: cfgMCPSession, Sessions: true, Sealed: true},
		{Name: cfgValidate, Upstream: upstreamResponder, Handler: "mcp {\n\tvalidate\n}", Keys: 1, Baseline: cfgProxy, ListsTools: true},
		{Name: cfgLimits1, Upstream: upstreamResponder, Handler: twoLimits, Keys: 1, Baseline: cfgProxy},
		{Name: cfgRedis1, Upstream: upstreamResponder, Handler: twoLimitsRedis, Keys: 1, Baseline: cfgProxy, Redis: true, InProcess: cfgLimits1},
		{Name: cfgLimits100k, Upstream: upstreamResponder, Handler: twoLimits, Keys: manyKeys, Baseline: cfgProxy},
		{Name: cfgRedis100k, Upstream: upstreamResponder, Handler: twoLimitsRedis, Keys: manyKeys, Baseline: cfgProxy, Redis: true, InProcess: cfgLimits100k},
		// A valid token on every request, remembered after its first
		// check: what authorization adds to mcp.
		{Name: cfgAuthz, Upstream: upstreamResponder, Handler: authorizationHandler, Keys: 1, Baseline: cfgMCP, Bearer: true},
		// The same, the upstream given a token exchanged for the caller's,
		// remembered after the first exchange: what that adds.
		{Name: cfgCredential, Upstream: upstreamResponder, Handler: credentialHandler, Keys: 1, Baseline: cfgAuthz, Bearer: true},
		// Caddy's tracing: its HTTP span alone (over control), then with
		// a span per message and the context in params._meta (over mcp).
		{Name: cfgTracedHTTP, Upstream: upstreamResponder, Handler: "tracing\n" + controlHandler, Keys: 1, Baseline: cfgControl, Traced: true},
		{Name: cfgTraced, Upstream: upstreamResponder, Handler: "tracing\nmcp", Keys: 1, Baseline: cfgMCP, Traced: true},
		{Name: cfgGuard, Upstream: upstreamResponder, Handler: fmt.Sprintf("mcp {\n\tconcurrency {\n\t\tmax %d\n\t}\n}", guardMax), Keys: 1, Baseline: cfgProxy},
		{Name: cfgDenied, Upstream: upstreamResponder, Handler: "mcp {\n\trate_limit deny {\n\t\trate 1/1h\n\t\tburst 1\n\t}\n}", Keys: 1, Denied: true, Baseline: cfgProxy},
		// The peer: a zone that never runs dry (as limits-1key's), and one
		// that refuses every call after the first (as denied's).
		{Name: cfgPeer, Upstream: upstreamResponder, Handler: peerZone("{remote_host}", 10_000, "100ms"), Keys: 1, Baseline: cfgProxy, Peer: true},
		{Name: cfgPeerDenied, Upstream: upstreamResponder, Handler: peerZone("static", 1, "1h"), Keys: 1, Denied: true, Baseline: cfgProxy, Peer: true},
		{Name: cfgSDKDirect, Upstream: upstreamSDK, Direct: true, Keys: 1, Baseline: cfgSDKProxy},
		{Name: cfgSDKProxy, Upstream: upstreamSDK, Keys: 1, Baseline: cfgSDKProxy},
		{Name: cfgSDKMCP, Upstream: upstreamSDK, Handler: "mcp", Keys: 1, Baseline: cfgSDKProxy},
	}
}

// sseConfigs are the configurations the time to first event is measured
// through.
var sseConfigs = []string{cfgDirect, cfgProxy, cfgMCP}

// selection is what a run measures.
type selection struct {
	// Throughput are the configurations measured for throughput, in order.
	Throughput []config
	// SSE says whether the time to first event is measured, Paced the
	// paced client.
	SSE, Paced bool
	// Running are the configurations that need a server: the ones measured,
	// their baselines, and those the SSE measurement goes through.
	Running []config
	// Named says whether -configs named configurations rather than all.
	Named bool
}

// needsPeer says whether any configuration of the selection runs the
// peer, which only the peer's Caddy has.
func (s selection) needsPeer() bool {
	return slices.ContainsFunc(s.Running, func(c config) bool { return c.Peer })
}

// needsIssuer says whether any configuration of the selection requires
// tokens.
func (s selection) needsIssuer() bool {
	return slices.ContainsFunc(s.Running, func(c config) bool { return c.Bearer })
}

// needsTraceSink says whether any configuration of the selection exports
// spans.
func (s selection) needsTraceSink() bool {
	return slices.ContainsFunc(s.Running, func(c config) bool { return c.Traced })
}

// needsRedis says whether any configuration of the selection keeps its
// buckets in Redis.
func (s selection) needsRedis() bool {
	return slices.ContainsFunc(s.Running, func(c config) bool { return c.Redis })
}

// withoutRedis is the selection without the configurations that need
// Redis, and their names.
func (s selection) withoutRedis() (selection, []string) {
	var dropped []string
	keep := func(cs []config) []config {
		var out []config
		for _, c := range cs {
			if !c.Redis {
				out = append(out, c)
			} else if !slices.Contains(dropped, c.Name) {
				dropped = append(dropped, c.Name)
			}
		}
		return out
	}
	s.Throughput, s.Running = keep(s.Throughput), keep(s.Running)
	return s, dropped
}

// selectConfigs parses -configs: "all", or names separated by commas
// ("sse" for the time to first event).
func selectConfigs(list string, all []config) (selection, error) {
	var sel selection
	names := strings.Split(list, ",")
	sel.Named = strings.TrimSpace(list) != "all"
	if !sel.Named {
		names = []string{sseMeasurement, pacedMeasurement}
		for _, c := range all {
			names = append(names, c.Name)
		}
	}
	want := map[string]bool{}
	for _, n := range names {
		n = strings.TrimSpace(n)
		if n == sseMeasurement {
			sel.SSE = true
			continue
		}
		if n == pacedMeasurement {
			sel.Paced = true
			continue
		}
		if !slices.ContainsFunc(all, func(c config) bool { return c.Name == n }) {
			return selection{}, fmt.Errorf("-configs: unknown configuration %q (known: %s, %s, %s)", n, configNames(all), sseMeasurement, pacedMeasurement)
		}
		want[n] = true
	}
	running := map[string]bool{}
	for _, c := range all {
		if want[c.Name] {
			sel.Throughput = append(sel.Throughput, c)
			running[c.Name], running[c.Baseline] = true, true
		}
	}
	if sel.SSE {
		for _, n := range sseConfigs {
			running[n] = true
		}
	}
	if sel.Paced {
		for _, n := range pacedConfigs {
			running[n] = true
		}
	}
	for _, c := range all {
		if running[c.Name] {
			sel.Running = append(sel.Running, c)
		}
	}
	return sel, nil
}

func configNames(all []config) string {
	var names []string
	for _, c := range all {
		names = append(names, c.Name)
	}
	return strings.Join(names, ", ")
}

// caddyfile is the whole Caddyfile of a configuration's Caddy: admin on its
// own loopback port (for /debug/pprof/), no HTTPS, nothing logged below
// ERROR, and one plain-HTTP site listening on loopback only. Every
// configuration, with or without mcp, proxies with the same reverse_proxy
// settings, followed by its own Proxy lines if it has any; a federated
// one has its mcp block alone. marks are what takes the place of each mark
// in its Handler: the benchmark's redis-server, host:port, for the
// configurations that keep their buckets there (redisAddrMark), the issuer
// of those that require tokens (issuerMark), the federated servers.
func caddyfile(c config, port, adminPort int, storage, upstream string, marks map[string]string) string {
	var site strings.Builder
	if c.Handler != "" {
		var pairs []string
		for mark, v := range marks {
			pairs = append(pairs, mark, v)
		}
		site.WriteString(strings.NewReplacer(pairs...).Replace(c.Handler))
		if c.Federated {
			return caddyrun.Site(port, adminPort, storage, "ERROR", site.String())
		}
		site.WriteString("\n")
	}
	fmt.Fprintf(&site, "reverse_proxy %s {\n\theader_up Host {upstream_hostport}\n", upstream)
	if c.Proxy != "" {
		site.WriteString("\t" + strings.ReplaceAll(c.Proxy, "\n", "\n\t") + "\n")
	}
	site.WriteString("}")
	return caddyrun.Site(port, adminPort, storage, "ERROR", site.String())
}
