// Command bench measures what the mcp handler costs: the same upstream
// reached directly, through Caddy with a plain reverse_proxy, and through
// Caddy with mcp in front of the same reverse_proxy, all side by side in one
// run, on loopback; and what rate limits cost with their buckets in Redis
// rather than in the handler's memory.
//
//	go run ./bench            # the full run: about 5 minutes
//	go run ./bench -quick     # a smoke run: about 30 seconds
//	make bench                # the same as the full run
//
// # What it measures
//
// Each configuration runs in a Caddy process of its own (the dev binary,
// cmd/caddy, built once at the start), and all of them run for the whole
// benchmark. A round measures every configuration in turn (A B C … A B C …
// over the rounds), so that drift on a shared machine (another process, a
// thermal limit) touches every configuration alike instead of whichever ran
// last. The default is five rounds of 1.5 s per measurement rather than
// fewer, longer ones: the noise of a shared machine comes in bursts of
// seconds, so more rounds give the medians more to work with and keep the
// two measurements of each comparison close in time. The configurations:
//
//	direct             the upstream itself: the floor the machine allows
//	reverse_proxy      Caddy with a plain reverse_proxy: the baseline
//	control            Caddy's vars (setting one variable) before the same
//	                   reverse_proxy: a middleware that costs next to
//	                   nothing, so that its row shows what a comparison with
//	                   the baseline reads for no cost at all, noise included
//	mcp                mcp {} before the reverse_proxy: inspection only
//	mcp-streamed       mcp { stream_above 16KiB }: every call over 16 KiB
//	                   streams to the upstream as it arrives (by default,
//	                   only those over 256 KiB do)
//	mcp-whole          mcp { stream_above 64MiB }: every body read whole
//	                   before it goes on (the paced client's)
//	validate           mcp { validate }: before the first round the
//	                   benchmark lists the responder's tools through it (one
//	                   tool, echo, whose schema asks for a string), and then
//	                   every measured call is checked against that schema
//	tools              mcp { tools { deny …; deprecate …; timeout * 1m } }:
//	                   every measured call (echo) is checked against the
//	                   policy, runs under a deadline, and has its answer
//	                   read to count its outcome; its baseline is mcp
//	federated-call     three servers behind one mcp block (server blocks,
//	                   federation): every measured call (echo) is routed by
//	                   its tool's name to the first; its baseline is mcp,
//	                   mcp {} in front of that server alone
//	mcp-slow-list      mcp {} in front of the slow responder, which waits
//	                   50 ms before each answer: a tools/list, not a call
//	federated-list     a tools/list through the same three servers, one of
//	                   them the slow responder: asked of the three in
//	                   parallel and merged; its baseline is mcp-slow-list
//	mcp-session        mcp {} with every request in a session of the
//	                   upstream's, named by the upstream's own id
//	sessions           the same session with mcp { sessions { secret … } }
//	                   and lb_policy mcp_session { fallback round_robin }:
//	                   every request names it by the gateway's sealed token,
//	                   which the gateway opens, restores the upstream's id
//	                   from, routes by, and writes back on the answer; its
//	                   baseline is mcp-session, measured just before it
//	limits-1key        two rate limits that never trigger, all calls on 1 key
//	limits-1key-redis  the same, with store redis { address … }: the buckets
//	                   in the benchmark's redis-server
//	limits-100k        the same limits, calls spread over 100,000 keys
//	limits-100k-redis  the same, with the buckets in Redis
//	authorization      mcp { authorization { … } }: every request carries a
//	                   valid JWT (EdDSA) from an issuer the benchmark serves;
//	                   checked once, then remembered; its baseline is mcp
//	credential         authorization, then mcp_credential token_exchange:
//	                   the upstream gets a token the benchmark's issuer
//	                   exchanged the caller's for (RFC 8693, audience
//	                   https://upstream.bench), asked once, then remembered;
//	                   its baseline is authorization, and the report gives
//	                   its CPU minus authorization's and the exchanges the
//	                   issuer served
//	tracing-http       Caddy's tracing directive in front of control: its HTTP
//	                   span, exported over OTLP/HTTP to a sink the benchmark
//	                   serves; its baseline is control
//	tracing            tracing and mcp {}: the HTTP span, a span per message,
//	                   and each span's context in params._meta; its baseline
//	                   is mcp
//	guard              a concurrency guard whose max is far above the clients
//	denied             a limit of 1 call an hour: every call is answered by the
//	                   gateway with a RATE_LIMITED envelope, never proxied
//	peer               mholt/caddy-ratelimit, the Caddy plugin a user would pick
//	                   instead, with a zone on the client's address that never
//	                   triggers (10,000 events in 100 ms: the peer keeps a
//	                   ring of a window's events per key)
//	peer-denied        the peer with a zone of 1 event an hour on one key: every
//	                   call is answered with its empty 429, never proxied
//	sdk-*              direct, reverse_proxy and mcp in front of the official
//	                   Go SDK server (the demo server, stateless, calling echo)
//
// each with a 1 KiB and a 64 KiB tools/call body (the two lists with their
// one tools/list), and then
//
//	sse                the time from a request to the end of the first
//	                   server-sent event of its answer, direct, through
//	                   reverse_proxy and through mcp
//	paced              one client sending each call's body at a set rate
//	                   (-paced-rate, 100 Mbit/s; -paced-sizes 64k,2m), one
//	                   call after another, through reverse_proxy, mcp-whole
//	                   and mcp-streamed: the time from the client's first
//	                   byte to the upstream's first byte of body read (the
//	                   request asks the responder for it, in a header of its
//	                   answer), and to the answer's last byte. It shows what
//	                   streaming a large call buys, and what reading it
//	                   whole costs in time
//
// A run that measures the peer builds bench/peer, a module of its own
// holding a Caddy with the mcp plugin and the peer (v0.1.0, the version the
// Go module proxy serves), and runs every configuration on it, so that the
// gateway and the peer are measured in one binary.
//
// Each *-redis configuration has exactly the limits and keys of the one
// before it, plus a store block naming redis://127.0.0.1:PORT/0 and nothing
// else (the store's defaults: a 50 ms timeout per decision, and the node's
// own buckets when Redis does not answer in time). It is measured right
// after that in-process configuration in every round, so that the two
// latencies compared are seconds apart. Before the first round, both
// 100,000-key configurations get one call with each key, so that the
// in-process limits hold 100,000 buckets each and Redis 200,000 keys (a
// bucket touched once expires when it would be full again: an hour later).
// The benchmark starts its own redis-server for them (Redis 7, -redis-server
// to name another binary): on a free loopback port, nothing saved to disk
// (no snapshots, no append-only file), shared by both configurations
// (their limits never run dry, so sharing the bucket of key 0 changes
// nothing), stopped at the end. Where redis-server is missing, -configs all leaves the two
// out, and says so under the machine; naming one in -configs fails with
// what to install (apt-get install redis-server). Redis competes with
// Caddy, the upstream and the load generator for the same cores, as it
// would on a gateway's own machine.
//
// The sessions configuration has mcp {}'s handler plus a sessions block
// with a fixed secret, and the same reverse_proxy (one upstream, the
// responder) plus lb_policy mcp_session. Before the first round, the
// benchmark opens a session through it, as a client of the 2025 revisions
// does: an initialize without Mcp-Session-Id, whose answer must name the
// session by a token that is not the responder's own id (the run fails
// otherwise), then a call naming the token, which must be answered with it
// again. From then on every request of that configuration carries
// Mcp-Session-Id: <token> and MCP-Protocol-Version: 2025-11-25, written
// into each client's request once, so the load generator's work per
// request is the same as for every other configuration. Its baseline,
// mcp-session, is mcp {} with a session opened the same way, whose id
// passes through as the responder wrote it (the run fails if it does
// not): both carry a session on every request, so the comparison
// measures what sealing it costs, not what a session's headers cost. On every request,
// the gateway opens the token, gives the upstream its own id, the policy
// routes to the upstream the token names, and the answer's id, the same,
// is replaced by the client's token: the whole feature, on every request,
// for one session shared by all the clients.
//
// The federated configurations put three responders behind one gateway,
// each a server block of its own, in this order: the responder every other
// configuration proxies to, listing echo; a second one, listing add; and a
// slow one, listing wait, which answers everything 50 ms after it has read
// the request. No name is given twice, so none is prefixed. Before the
// first round, the benchmark lists the tools through each federated
// gateway (the three must be there) and makes one call to echo, which must
// be answered by the first server; that call also has the gateway learn
// the names it routes by, as a client's first call would. Every measured
// answer of federated-list, and of mcp-slow-list, must hold the slow
// server's tool, so that a list answered without waiting for the slow
// server counts as an error: the claim measured is that a merged list
// takes as long as the slowest server alone, not the sum of the three,
// because the servers are asked in parallel. In a closed loop of 8
// clients that wait 50 ms for each answer, the throughput of both is about
// 8 / 50 ms, 160 requests a second; the latencies are what to compare. A
// routed call never waits for the slow server: the names it routes by were
// learned before the first round.
//
// The upstream is a minimal JSON-RPC responder written for the benchmark: it
// answers application/json with the request's id or, on /sse, an event at
// once, flushed, then the response as a second event. Its sessions are the
// Go SDK server's in stateful mode, reduced to one: every answer to a POST
// without Mcp-Session-Id carries Mcp-Session-Id: bench-responder-session-01
// (in every configuration, so all of them proxy that header), a POST with
// that id is answered with it again, and a POST with any other id gets 404,
// so a gateway that did not restore the id fails every request. It runs in a process
// of its own (-upstream-process, the default): measured side by side on
// this 2-core machine, both placements gave Caddy configurations equally
// steady throughput (20 rounds, 3 runs: coefficient of variation 0.20 and
// 0.20), but the upstream measured directly had twice the p99 latency in
// the load generator's process (2.7–3.2 ms against 1.3–1.6 ms): its
// goroutines waited behind the clients' in one Go scheduler.
//
// The load generator costs a few microseconds of CPU per request: keep-alive
// HTTP/1.1 connections, each sending its next request as soon as it has the
// answer to the last, for a fixed time after a warm-up; latencies go into a
// histogram (1.6 % precision). A body is an echo call whose one argument is
// a string of prose with escapes, as a file's contents would be. Every
// answer is checked: status 200 and, in its first bytes, the upstream's
// text (or the RATE_LIMITED envelope for denied); anything else counts as
// an error.
//
// # How to read it
//
// The output starts with the machine (cores, load average) and the Go,
// Caddy and Redis versions, then a Markdown table: per configuration and body size,
// the throughput, its ratio to reverse_proxy, the p50 and p99 latencies, and
// the latency added over reverse_proxy (over mcp {} for sessions, whose row
// says so), each the median over the rounds with
// the smallest and largest in brackets. Ratios and added latencies are taken
// round by round, each against the reverse_proxy measured a few seconds
// before or after it, and only then summarised: on a shared, noisy machine
// only such side-by-side comparisons mean anything, while absolute req/s
// depend on the machine and its neighbours. The latencies are those of a
// closed loop at full load, so they are mostly queueing: p50 is roughly
// clients / throughput. The Caddy CPU column is the CPU time (user and
// system, from /proc/PID/stat, so on Linux only) that configuration's Caddy
// process used per good answer over the warm-up and the window: what the
// gateway costs the machine, whether or not the closed loop kept the cores
// busy. Its resolution is a clock tick (10 ms) per measurement, about 1 %
// of one.
//
// The first figure of each row, CPU over control, is the headline: that
// CPU per answer minus control's in the same round, summarised as the
// median with a confidence interval that assumes nothing of the figures'
// distribution (order statistics of a binomial, as benchstat computes the
// interval of a median; 10 rounds give a 98 % interval between the 2nd
// smallest and the 2nd largest). It is the figure a noisy machine moves
// least: a neighbour that slows every process slows the throughput of a
// closed loop far more than it changes the CPU a request costs. Run
// enough rounds for the interval (-rounds 10). The peer, when measured,
// has a table of its own: each of mcp, limits-1key and guard against peer,
// and denied against peer-denied, round by round, as a throughput ratio and
// a CPU difference with its interval. The federated configurations, when
// measured, have one too: each one's Caddy CPU per answer minus its
// baseline's, round by round, with its interval.
//
// After the table, each *-redis configuration and body size has a line:
// its throughput against reverse_proxy; its p50 minus that of the same
// limits in process, round by round, in microseconds; and what each
// admitted request cost Redis. Before and after each measurement the
// benchmark reads Redis's INFO stats and INFO commandstats, on a connection
// of its own, while nothing else asks that Redis anything: round trips per
// admitted request are the exchanges the store had with Redis (Caddy's
// caddy_mcp_store_latency_seconds_count, a pipeline of several scripts
// being one) divided by the requests answered (warm-up included; the
// limits never trigger, so every request answered was admitted); scripts
// are the EVALSHA and EVAL calls Redis counted, and commands its
// total_commands_processed, without the benchmark's own INFO. Redis counts
// the commands a script runs inside it (the bucket script's TIME, GET and
// SET) as commands too, so commands measure the work Redis does. The line also says how
// many decisions Redis did not make, from Caddy's
// caddy_mcp_store_decisions_total (a timeout, or the breaker open after
// one): those were made with the node's own buckets and cost no round trip,
// so a row with any understates what Redis costs. Last come the CPU time
// redis-server used per admitted request, and Caddy's, beside Caddy's for
// the same limits in process: where the cost of keeping buckets in Redis
// goes, on a machine whose cores Redis shares with Caddy, the upstream and
// the load generator.
//
// The targets at the end are such same-run comparisons, but for one count:
// mcp {} keeps ≥ 0.95 of reverse_proxy's throughput with 1 KiB bodies and
// ≥ 0.90 with 64 KiB; with limits in process or the guard on, ≥ 0.93 and
// ≥ 0.88; p50 and p99 rise by at most 10 %; sessions stay within noise of
// mcp-session measured seconds before (≥ 0.97 of its throughput, p50 at
// most 5 % higher): what they measure is the whole of the feature's work
// per request (opening the token, about a quarter of a microsecond;
// restoring the id; the policy's pinned choice; writing the client's token
// back, no sealing: that happens once per session; and the token's bytes,
// about 90 more in each request's headers and in each answer's) against
// the same gateway and session without it, where Caddy spends tens of
// microseconds on each request; a
// denied call, answered at the
// edge, goes at least twice as fast as a proxied one; the first event of an
// SSE answer arrives within 1 ms of reverse_proxy's. With the buckets in
// Redis, throughput stays ≥ 0.90 of reverse_proxy's with 1 KiB bodies
// (64 KiB has no target), p50 rises by at most 150 µs over the same limits
// in process, and an admitted request costs at most one round trip to
// Redis: a count, which does not depend on the machine's speed. A missed
// target is worth a CPU profile of the Caddy under that load: -profile DIR
// writes one per configuration and body size after the rounds (from
// Caddy's admin endpoint, /debug/pprof/), to read with
// `go tool pprof -top DIR/mcp-64KiB.pprof`. For profiles
// alone:
//
//	go run ./bench -configs reverse_proxy,mcp,denied -sizes 64k -rounds 1 -duration 5s -profile /tmp/prof
//
// Flags select configurations (-configs mcp,reverse_proxy,sse), body sizes
// (-sizes 1k), rounds, durations, clients and the output format
// (-format json for every round's figures).
package main
