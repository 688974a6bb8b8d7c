package main

import (
	"fmt"
	"log"
	"net/http"
	"path/filepath"

	"github.com/caddymcp/caddy-mcp/internal/caddyrun"
)

// start builds Caddy if needed, and starts the upstreams and every Caddy
// the selection needs.
func (b *bench) start(tmp string) error {
	switch {
	case b.o.caddyBin != "":
		b.build = "given with -caddy"
	case b.sel.needsPeer():
		b.build = "bench/peer: the mcp plugin and mholt/caddy-ratelimit v0.1.0"
		log.Print("building bench/peer: the mcp plugin and mholt/caddy-ratelimit in one Caddy")
		bin, err := caddyrun.BuildModule(tmp, "bench/peer")
		if err != nil {
			return err
		}
		b.o.caddyBin = bin
	default:
		b.build = "cmd/caddy with the mcp plugin"
		log.Print("building cmd/caddy")
		bin, err := caddyrun.Build(tmp)
		if err != nil {
			return err
		}
		b.o.caddyBin = bin
	}
	var err error
	if b.o.upstreamProcess {
		b.upstreams, err = startUpstreamProcess()
	} else {
		b.upstreams, err = serveUpstreams()
	}
	if err != nil {
		return err
	}
	redisAddr, issuerURL, err := b.startServices(tmp)
	if err != nil {
		return err
	}
	if err := b.startCaddies(tmp, redisAddr, issuerURL); err != nil {
		return err
	}
	for _, c := range b.sel.Running {
		if c.Bearer {
			b.sessionHeaders[c.Name] = "Authorization: Bearer " + b.issuer.Token + "\r\n"
		}
	}
	if err := b.prepare(); err != nil {
		return err
	}
	if err := b.openSessions(); err != nil {
		return err
	}
	log.Printf("started %d Caddy processes; upstreams on %s (responder), %s (Go SDK), %s and %s (the second and the slow responder)",
		len(b.caddies), b.upstreams.Responder, b.upstreams.SDK, b.upstreams.Second, b.upstreams.Slow)
	return nil
}

// startServices starts what the selection's configurations need beside
// Caddy: Redis, the trace sink, the token issuer.
func (b *bench) startServices(tmp string) (redisAddr, issuerURL string, err error) {
	if b.sel.needsRedis() {
		if b.redis, err = startRedis(b.o.redisBin, filepath.Join(tmp, "redis")); err != nil {
			return "", "", err
		}
		redisAddr = b.redis.Addr
		log.Printf("started redis-server %s on %s", b.redis.Version, redisAddr)
	}
	if b.sel.needsTraceSink() {
		if b.traceSink, err = startTraceSink(); err != nil {
			return "", "", err
		}
	}
	if b.sel.needsIssuer() {
		if b.issuer, err = startIssuer(); err != nil {
			return "", "", err
		}
		issuerURL = b.issuer.URL
	}
	return redisAddr, issuerURL, nil
}

// startCaddies starts a Caddy for each configuration that is not direct.
func (b *bench) startCaddies(tmp, redisAddr, issuerURL string) error {
	marks := map[string]string{
		redisAddrMark: redisAddr, issuerMark: issuerURL,
		responderMark: b.upstreams.Responder, secondMark: b.upstreams.Second, slowMark: b.upstreams.Slow,
	}
	for _, c := range b.sel.Running {
		if c.Direct {
			continue
		}
		p, err := caddyrun.Start(b.o.caddyBin, filepath.Join(tmp, c.Name), c.Name, func(port, adminPort int, storage string) string {
			return caddyfile(c, port, adminPort, storage, b.upstreamOf(c), marks)
		})
		if err != nil {
			return err
		}
		b.caddies[c.Name] = p
	}
	return nil
}

// prepare has the gateways that check calls learn the tools, checks the
// tools policy of those that have one, and that the federated ones list
// and route as they should.
func (b *bench) prepare() error {
	for _, c := range b.sel.Running {
		if c.ListsTools {
			if err := listTools(b.caddies[c.Name].Addr); err != nil {
				return fmt.Errorf("%s: %w", c.Name, err)
			}
		}
		if c.Federated {
			if err := checkFederation(b.caddies[c.Name].Addr); err != nil {
				return fmt.Errorf("%s: %w", c.Name, err)
			}
		}
		if c.Policy {
			if err := checkPolicy(b.caddies[c.Name].Addr); err != nil {
				return fmt.Errorf("%s: %w", c.Name, err)
			}
		}
	}
	return nil
}

// openSessions opens the session each Sessions configuration's requests
// name.
func (b *bench) openSessions() error {
	for _, c := range b.sel.Running {
		if !c.Sessions {
			continue
		}
		token, err := openSession(b.caddies[c.Name].Addr, c.Sealed)
		if err != nil {
			return fmt.Errorf("%s: %w", c.Name, err)
		}
		b.sessionHeaders[c.Name] = sessionLines(token)
		if c.Sealed {
			log.Printf("%s: opened a session; every request names it by the gateway's token (%d bytes, in place of the responder's id of %d)", c.Name, len(token), len(responderSessionID))
		} else {
			log.Printf("%s: opened a session; every request names it by the responder's own id (%d bytes)", c.Name, len(token))
		}
	}
	return nil
}

// shutdown stops every process the benchmark started.
func (b *bench) shutdown() {
	for _, p := range b.caddies {
		p.Stop()
	}
	if b.redis != nil {
		b.redis.Stop()
	}
	if b.issuer != nil {
		b.issuer.Close()
	}
	if b.traceSink != nil {
		b.traceSink.Close()
	}
	if b.upstreams != nil {
		b.upstreams.stop()
	}
}

func (b *bench) upstreamOf(c config) string {
	switch c.Upstream {
	case upstreamSDK:
		return b.upstreams.SDK
	case upstreamSlow:
		return b.upstreams.Slow
	}
	return b.upstreams.Responder
}

// target is where c's requests go, with a body of size bytes.
func (b *bench) target(c config, size int) *target {
	t := &target{path: "/mcp", body: body(size), keys: c.Keys, headers: b.sessionHeaders[c.Name], expect: upstreamText}
	if c.Direct {
		t.addr = b.upstreamOf(c)
	} else {
		t.addr = b.caddies[c.Name].Addr
	}
	switch {
	case c.Denied && c.Peer:
		// The peer refuses with an empty 429.
		t.expect, t.status = "", http.StatusTooManyRequests
	case c.Denied:
		t.expect = "RATE_LIMITED"
	case c.Upstream == upstreamSDK:
		// The echo tool's answer starts with the text sent.
		t.expect = `"text":"The gateway reads`
	case c.List:
		// Every list holds the slow server's tool: its answer was
		// waited for.
		t.body, t.expect = listBody, slowTool
	}
	return t
}

func (b *bench) sseTarget(c config) *target {
	t := b.target(c, 1<<10)
	t.path, t.firstEvent = ssePath, true
	return t
}

func (b *bench) config(name string) config {
	for _, c := range b.sel.Running {
		if c.Name == name {
			return c
		}
	}
	panic("bench: no running configuration " + name)
}
