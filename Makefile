# The commands a developer and CI run. `make test` is the one the README gives.

.PHONY: test test-deps test-under-load demo release bench-micro bench bench-hostile

# Every test: unit, golden, integration through a real Caddy with the
# official Go and TypeScript SDK clients and servers, and the official MCP
# conformance suite through the gateway.
test: test-deps
	go test -race -count=1 ./...

# What the tests need: the locked npm dependencies (the TypeScript client
# and server, the authorization server of the authorization tests,
# the conformance suite), and Redis for the tests of limits shared on Redis
# (with apt-get, where it is missing).
test-deps:
	scripts/ensure-redis
	npm ci --prefix test/tsclient --no-audit --no-fund --loglevel=error
	npm ci --prefix test/conformance --no-audit --no-fund --loglevel=error
	npm ci --prefix test/conformance/latest --no-audit --no-fund --loglevel=error
	npm ci --prefix test/authserver --no-audit --no-fund --loglevel=error

# The integration tests COUNT times each (default 5) with every core kept
# busy, to find a flaky test before it lands (not run by CI; see
# scripts/test-under-load).
test-under-load: test-deps
	scripts/test-under-load $(COUNT)

# The gateway in front of the demo MCP server, on https://localhost:8443/mcp.
demo:
	go run ./examples/demo

# A release binary with xcaddy, as pinned by xcaddy.json, in dist/caddy.
release:
	go run ./cmd/release

# Every micro-benchmark once, so that none can rot; figures come from running
# them with a real -benchtime. Those of the Redis store start redis-server.
bench-micro:
	scripts/ensure-redis
	go test -run '^$$' -bench . -benchtime 1x ./...

# The gateway against a plain reverse_proxy, side by side in one run, on
# loopback: a Markdown table and the targets (about 4 minutes; see
# bench/doc.go for how to read it, and `go run ./bench -quick` for a smoke
# run).
bench:
	go run ./bench

# Hostile traffic (slow bodies, wide batches, long keys and ids, compressed
# and reordered event streams, reloads) against the gateway and a plain
# reverse_proxy, side by side: a Markdown report of what each costs (about
# 3 minutes; -caddy PATH measures another build, -quick is a smoke run).
bench-hostile:
	go run ./bench/hostile
