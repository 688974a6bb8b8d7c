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
	plainPort, err := freePort()
	if err != nil {
		return nil, err
	}
	var text string
	p, err := startCaddyWith(r.bin, r.tmp, "two-sites", func(port, adminPort int, storage string) string {
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
		return nil, err
	}
	r.track(p)
	sec := &section{Name: "reload", What: fmt.Sprintf("%d keep-alive clients, half on each site of one Caddy (the mcp site with "+
		"a limit and a guard that never refuse, and a plain reverse_proxy site, to the same upstream), send tools/call POSTs "+
		"one after another while the config is reloaded %d times, one every %s (`POST /load` with "+
		"`Cache-Control: must-revalidate`, as `caddy reload --force`), with a grace period of 1ns. "+
		"A failure is a request that got no response: EOF, or the connection reset.", clients, reloads, every)}

	sites := []string{"http://" + p.Addr + pathEcho, fmt.Sprintf("http://127.0.0.1:%d%s", plainPort, pathEcho)}
	type tally struct{ ok, eof, reset, other atomic.Int64 }
	counts := make([]tally, len(sites))
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for c := range clients {
		site := c % len(sites)
		wg.Go(func() {
			client := newHTTPClient(30 * time.Second)
			defer client.CloseIdleConnections()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				_, err := post(r.ctx, client, sites[site], toolsCall(fmt.Sprintf(`"%d-%d"`, c, i), "echo"), nil)
				switch {
				case err == nil:
					counts[site].ok.Add(1)
				case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
					counts[site].eof.Add(1)
				case errors.Is(err, syscall.ECONNRESET):
					counts[site].reset.Add(1)
				default:
					counts[site].other.Add(1)
				}
			}
		})
	}
	admin := &http.Client{Timeout: 30 * time.Second}
	var reloadErr error
	for range reloads {
		if err := sleep(r.ctx, every); err != nil {
			reloadErr = err
			break
		}
		req, _ := http.NewRequestWithContext(r.ctx, http.MethodPost, "http://"+p.Admin+"/load", bytes.NewReader([]byte(text)))
		req.Header.Set("Content-Type", "text/caddyfile")
		req.Header.Set("Cache-Control", "must-revalidate")
		resp, err := admin.Do(req)
		if err != nil {
			reloadErr = err
			break
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			reloadErr = fmt.Errorf("reload: %d %s", resp.StatusCode, strings.TrimSpace(string(body)))
			break
		}
	}
	close(stop)
	wg.Wait()

	t := table{Header: []string{"site", "requests", "failed", "share failed", "EOF", "reset", "other"}}
	for i, name := range []string{"mcp", "reverse_proxy"} {
		c := &counts[i]
		failed := c.eof.Load() + c.reset.Load() + c.other.Load()
		all := c.ok.Load() + failed
		share := "—"
		if all > 0 {
			share = fmt.Sprintf("%.2f %%", 100*float64(failed)/float64(all))
		}
		t.add(name, thousands(int(all)), fmt.Sprint(failed), share, fmt.Sprint(c.eof.Load()), fmt.Sprint(c.reset.Load()), fmt.Sprint(c.other.Load()))
	}
	sec.Tables = append(sec.Tables, t)
	return sec, errors.Join(reloadErr, p.alive())
}
