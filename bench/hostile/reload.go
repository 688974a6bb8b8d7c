package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/caddymcp/caddy-mcp/internal/caddyrun"
)

// reloadMCPBlock gives the mcp site a limit and a guard that never refuse,
// so that every request takes the handler's whole path.
const reloadMCPBlock = `mcp {
	rate_limit l {
		rate 1000000/1s
	}
	concurrency {
		max 1000
	}
}`

// reload runs keep-alive clients against two sites of one Caddy, one behind
// mcp and one a plain reverse_proxy to the same upstream, while the config is
// reloaded again and again, and counts the requests that fail at the
// transport (no response at all) on each. A reload shuts the old server
// down: it closes its idle keep-alive connections, which a client may have
// just picked for its next POST, and Go's transport retries no POST. Both
// sites meet that race; the question is whether the gateway makes it worse.
func reload(r *run) (*section, error) {
	reloads, every, clients := 50, 100*time.Millisecond, 12
	if r.quick {
		reloads = 20
	}
	p, text, plainPort, err := startTwoSites(r)
	if err != nil {
		return nil, err
	}
	sec := &section{Name: "reload", What: fmt.Sprintf("%d keep-alive clients, half on each site of one Caddy (the mcp site with "+
		"a limit and a guard that never refuse, and a plain reverse_proxy site, to the same upstream), send tools/call POSTs "+
		"one after another while the config is reloaded %d times, one every %s (`POST /load` with "+
		"`Cache-Control: must-revalidate`, as `caddy reload --force`), with a grace period of 1ns. "+
		"A failure is a request that got no response: EOF, or the connection reset.", clients, reloads, every)}

	load := startReloadLoad(r, clients, "http://"+p.Addr+pathEcho, fmt.Sprintf("http://127.0.0.1:%d%s", plainPort, pathEcho))
	reloadErr := reloadRepeatedly(r, p.Admin, text, reloads, every)
	load.stop()
	sec.Tables = append(sec.Tables, load.table("mcp", "reverse_proxy"))
	return sec, errors.Join(reloadErr, p.Alive())
}

// startTwoSites starts one Caddy serving the mcp site on its port and a plain
// reverse_proxy site on plainPort, both to the benchmark's upstream, and
// returns the Caddyfile it loaded, to load again.
func startTwoSites(r *run) (p *caddyProcess, text string, plainPort int, err error) {
	if plainPort, err = caddyrun.FreePort(); err != nil {
		return nil, "", 0, err
	}
	p, err = startCaddyWith(r.bin, r.tmp, "two-sites", func(port, adminPort int, storage string) string {
		text = caddyfile(port, adminPort, storage, reloadMCPBlock, r.up.Addr) + fmt.Sprintf(`
http://127.0.0.1:%d {
	reverse_proxy %s {
		header_up Host {upstream_hostport}
	}
}
`, plainPort, r.up.Addr)
		return text
	})
	if err != nil {
		return nil, "", 0, err
	}
	r.track(p)
	return p, text, plainPort, nil
}

// reloadRepeatedly loads text into the Caddy at admin, forced, every so
// often, until reloads are done or one fails.
func reloadRepeatedly(r *run, admin, text string, reloads int, every time.Duration) error {
	client := &http.Client{Timeout: 30 * time.Second}
	for range reloads {
		if err := sleep(r.ctx, every); err != nil {
			return err
		}
		req, _ := http.NewRequestWithContext(r.ctx, http.MethodPost, "http://"+admin+"/load", bytes.NewReader([]byte(text)))
		req.Header.Set("Content-Type", "text/caddyfile")
		req.Header.Set("Cache-Control", "must-revalidate")
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("reload: %d %s", resp.StatusCode, strings.TrimSpace(string(body)))
		}
	}
	return nil
}

// reloadLoad is the clients of the reload scenario, spread evenly over the
// sites, each counting how its requests ended.
type reloadLoad struct {
	counts []reloadTally
	done   chan struct{}
	wg     sync.WaitGroup
}

type reloadTally struct{ ok, eof, reset, other atomic.Int64 }

func startReloadLoad(r *run, clients int, sites ...string) *reloadLoad {
	l := &reloadLoad{counts: make([]reloadTally, len(sites)), done: make(chan struct{})}
	for c := range clients {
		site := c % len(sites)
		l.wg.Go(func() { l.client(r, c, sites[site], &l.counts[site]) })
	}
	return l
}

// client sends one call after another to url until the load stops.
func (l *reloadLoad) client(r *run, c int, url string, n *reloadTally) {
	client := newHTTPClient(30 * time.Second)
	defer client.CloseIdleConnections()
	for i := 0; ; i++ {
		select {
		case <-l.done:
			return
		default:
		}
		_, err := post(r.ctx, client, url, toolsCall(fmt.Sprintf(`"%d-%d"`, c, i), "echo"), nil)
		switch {
		case err == nil:
			n.ok.Add(1)
		case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
			n.eof.Add(1)
		case errors.Is(err, syscall.ECONNRESET):
			n.reset.Add(1)
		default:
			n.other.Add(1)
		}
	}
}

func (l *reloadLoad) stop() {
	close(l.done)
	l.wg.Wait()
}

// table is the tally per site, named in the order the sites were given.
func (l *reloadLoad) table(names ...string) table {
	t := table{Header: []string{"site", "requests", "failed", "share failed", "EOF", "reset", "other"}}
	for i, name := range names {
		c := &l.counts[i]
		failed := c.eof.Load() + c.reset.Load() + c.other.Load()
		all := c.ok.Load() + failed
		share := "—"
		if all > 0 {
			share = fmt.Sprintf("%.2f %%", 100*float64(failed)/float64(all))
		}
		t.add(name, thousands(int(all)), fmt.Sprint(failed), share, fmt.Sprint(c.eof.Load()), fmt.Sprint(c.reset.Load()), fmt.Sprint(c.other.Load()))
	}
	return t
}
