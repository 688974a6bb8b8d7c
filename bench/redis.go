package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/caddymcp/caddy-mcp/internal/caddyrun"
)

// redisInstall is what to run where redis-server is missing.
const redisInstall = "apt-get install redis-server"

// cpu is the CPU time the server has used so far.
func (r *redisServer) cpu() (time.Duration, bool) { return caddyrun.ProcessCPU(r.cmd.Process.Pid) }

// redisServer is the benchmark's own redis-server: on a free loopback port,
// nothing saved to disk, run for the whole benchmark and shared by the
// configurations whose limits keep their buckets in Redis.
type redisServer struct {
	// Addr is host:port on loopback.
	Addr string
	// Version is the server's redis_version.
	Version  string
	dir      string
	cmd      *exec.Cmd
	exited   chan struct{}
	stopOnce sync.Once
	// conn asks the server for its counters between measurements.
	conn *respConn
}

// startRedis runs bin in dir (created if need be) and returns once it
// answers PING.
func startRedis(bin, dir string) (*redisServer, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	port, err := caddyrun.FreePort()
	if err != nil {
		return nil, err
	}
	logPath := filepath.Join(dir, "redis.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	defer logFile.Close()
	cmd := exec.Command(bin,
		"--save", "",
		"--appendonly", "no",
		"--bind", "127.0.0.1",
		"--port", strconv.Itoa(port),
		"--dir", dir,
		"--daemonize", "no",
	)
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting redis-server: %w", err)
	}
	r := &redisServer{Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), dir: dir, cmd: cmd, exited: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		close(r.exited)
	}()
	if err := r.waitReady(15 * time.Second); err != nil {
		r.Stop()
		return nil, fmt.Errorf("redis-server on %s: %w\n%s", r.Addr, err, r.logTail(2000))
	}
	info, err := r.conn.info("server")
	if err != nil {
		r.Stop()
		return nil, fmt.Errorf("redis-server on %s: INFO server: %w", r.Addr, err)
	}
	r.Version = info["redis_version"]
	return r, nil
}

func (r *redisServer) waitReady(limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		select {
		case <-r.exited:
			return errors.New("exited before answering PING")
		default:
		}
		c, err := dialRESP(r.Addr)
		if err == nil {
			var pong string
			if pong, err = c.do("PING"); err == nil && pong == "PONG" {
				r.conn = c
				return nil
			}
			c.close()
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("does not answer PING after %s: %v", limit, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Alive reports an error if the server has exited.
func (r *redisServer) Alive() error {
	select {
	case <-r.exited:
		return fmt.Errorf("redis-server on %s exited: %s\n%s", r.Addr, r.cmd.ProcessState, r.logTail(2000))
	default:
		return nil
	}
}

// Stop ends the server: SIGTERM (with nothing to save it exits at once),
// then a kill if it has not exited in 5 s.
func (r *redisServer) Stop() {
	r.stopOnce.Do(func() {
		if r.conn != nil {
			r.conn.close()
		}
		_ = r.cmd.Process.Signal(os.Interrupt)
		select {
		case <-r.exited:
		case <-time.After(5 * time.Second):
			_ = r.cmd.Process.Kill()
			<-r.exited
		}
	})
}

func (r *redisServer) logTail(n int) string {
	b, err := os.ReadFile(filepath.Join(r.dir, "redis.log"))
	if err != nil {
		return ""
	}
	return string(b[max(0, len(b)-n):])
}

// redisCounters are the server's command counters at one moment.
type redisCounters struct {
	// Commands is total_commands_processed: every command, the counter
	// reads (INFO) and the commands scripts run inside Redis included.
	Commands uint64
	// Scripts are the calls of EVALSHA and EVAL (and their read-only
	// forms): the rate-limit decisions, each a command a client sent.
	Scripts uint64
	// Info are the calls of INFO: the benchmark's own reads.
	Info uint64
}

// counters reads the command counters. An INFO is not counted in its own
// answer, only in the next one.
func (r *redisServer) counters() (redisCounters, error) {
	info, err := r.conn.info("stats", "commandstats")
	if err != nil {
		return redisCounters{}, fmt.Errorf("redis-server on %s: INFO: %w", r.Addr, err)
	}
	var c redisCounters
	if c.Commands, err = strconv.ParseUint(info["total_commands_processed"], 10, 64); err != nil {
		return redisCounters{}, fmt.Errorf("redis-server on %s: INFO stats: total_commands_processed %q", r.Addr, info["total_commands_processed"])
	}
	for _, name := range []string{"eval", "evalsha", "eval_ro", "evalsha_ro"} {
		c.Scripts += commandCalls(info["cmdstat_"+name])
	}
	c.Info = commandCalls(info["cmdstat_info"])
	return c, nil
}

// commandCalls reads calls= from a commandstats line's value,
// "calls=12,usec=34,…"; 0 for a command never called.
func commandCalls(stat string) uint64 {
	for f := range strings.SplitSeq(stat, ",") {
		if v, ok := strings.CutPrefix(f, "calls="); ok {
			n, _ := strconv.ParseUint(v, 10, 64)
			return n
		}
	}
	return 0
}

// redisUse is what one measurement asked of Redis.
type redisUse struct {
	// Scripts are the EVALSHA and EVAL calls during the measurement: the
	// decisions the handler asked of Redis, several in one round trip when
	// a request meets several limits, which Redis does not tell. Commands are all the
	// commands Redis processed meanwhile, except the benchmark's own
	// counter reads: the scripts, the commands they run inside Redis
	// (TIME, GET, SET), and any other a client sent.
	Commands uint64 `json:"commands"`
	Scripts  uint64 `json:"scripts"`
	// RoundTrips are the exchanges the handler had with Redis, a pipeline
	// of several scripts being one (a request meeting two limits): from
	// Caddy's caddy_mcp_store_latency_seconds_count.
	RoundTrips uint64 `json:"round_trips"`
	// Answered are the good answers of the measurement, warm-up included:
	// with limits that never trigger, the requests admitted.
	Answered uint64 `json:"answered"`
	// Decisions are the decisions the handler asked of its Redis store,
	// and Fallbacks those Redis did not make: it did not answer within
	// the store's timeout, or had not since, and the handler decided with
	// its own buckets. From Caddy's caddy_mcp_store_decisions_total.
	Decisions uint64 `json:"decisions"`
	Fallbacks uint64 `json:"fallbacks"`
	// CPU is the CPU time redis-server used meanwhile (0 where the system
	// does not tell).
	CPU time.Duration `json:"cpu_ns"`
}

// useBetween is what was asked of Redis between two counter reads, for
// answered requests admitted. The INFO of the first read is counted in the
// second, and is taken out.
func useBetween(before, after redisCounters, answered uint64) *redisUse {
	info := after.Info - before.Info
	return &redisUse{Commands: after.Commands - before.Commands - info, Scripts: after.Scripts - before.Scripts, Answered: answered}
}

// storeDecisions are a Caddy's caddy_mcp_store_decisions_total, summed
// over its stores: all, and those Redis did not make; and its round trips
// to Redis, caddy_mcp_store_latency_seconds_count.
type storeDecisions struct{ all, fallbacks, roundTrips uint64 }

// readStoreDecisions reads them from the admin endpoint's /metrics.
func readStoreDecisions(admin string) (storeDecisions, error) {
	client := http.Client{Timeout: 5 * time.Second}
	resp, err := client.Get("http://" + admin + "/metrics")
	if err != nil {
		return storeDecisions{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return storeDecisions{}, fmt.Errorf("%s/metrics: %s", admin, resp.Status)
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return storeDecisions{}, err
	}
	return parseStoreDecisions(string(body)), nil
}

// parseStoreDecisions sums caddy_mcp_store_decisions_total in a metrics
// page: outcome "redis" is a decision Redis made, "error" and "down" one it
// did not.
func parseStoreDecisions(page string) storeDecisions {
	var d storeDecisions
	for line := range strings.SplitSeq(page, "\n") {
		if rest, ok := strings.CutPrefix(line, "caddy_mcp_store_latency_seconds_count{"); ok {
			if _, value, ok := strings.Cut(rest, "} "); ok {
				v, _ := strconv.ParseFloat(strings.TrimSpace(value), 64)
				d.roundTrips += uint64(v)
			}
			continue
		}
		rest, ok := strings.CutPrefix(line, "caddy_mcp_store_decisions_total{")
		if !ok {
			continue
		}
		labels, value, ok := strings.Cut(rest, "} ")
		if !ok {
			continue
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(value), 64)
		if err != nil {
			continue
		}
		d.all += uint64(v)
		if !strings.Contains(labels, `outcome="redis"`) {
			d.fallbacks += uint64(v)
		}
	}
	return d
}

// perRequest is the commands, the scripts and the round trips per admitted
// request.
func (u *redisUse) perRequest() (commands, scripts, roundTrips float64) {
	if u.Answered == 0 {
		return math.NaN(), math.NaN(), math.NaN()
	}
	n := float64(u.Answered)
	return float64(u.Commands) / n, float64(u.Scripts) / n, float64(u.RoundTrips) / n
}

// respConn is one connection to Redis speaking just enough RESP2 for the
// benchmark's reads: commands of bulk strings, and answers that are simple
// strings, errors, integers or bulk strings.
type respConn struct {
	nc net.Conn
	br *bufio.Reader
}

func dialRESP(addr string) (*respConn, error) {
	nc, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return nil, err
	}
	return &respConn{nc: nc, br: bufio.NewReader(nc)}, nil
}

func (c *respConn) close() { _ = c.nc.Close() }

// do sends one command and returns its answer.
func (c *respConn) do(args ...string) (string, error) {
	if err := c.nc.SetDeadline(time.Now().Add(5 * time.Second)); err != nil {
		return "", err
	}
	req := fmt.Appendf(nil, "*%d\r\n", len(args))
	for _, a := range args {
		req = fmt.Appendf(req, "$%d\r\n%s\r\n", len(a), a)
	}
	if _, err := c.nc.Write(req); err != nil {
		return "", err
	}
	line, err := c.br.ReadString('\n')
	if err != nil {
		return "", err
	}
	line = strings.TrimSuffix(line, "\r\n")
	if line == "" {
		return "", errors.New("empty answer")
	}
	switch kind, rest := line[0], line[1:]; kind {
	case '+', ':':
		return rest, nil
	case '-':
		return "", errors.New(rest)
	case '$':
		n, err := strconv.Atoi(rest)
		if err != nil || n < 0 {
			return "", fmt.Errorf("answer %q: want a bulk string", line)
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(c.br, buf); err != nil {
			return "", err
		}
		return string(buf[:n]), nil
	}
	return "", fmt.Errorf("answer %q: not a kind this client reads", line)
}

// info runs INFO on sections and returns its fields by name.
func (c *respConn) info(sections ...string) (map[string]string, error) {
	text, err := c.do(append([]string{"INFO"}, sections...)...)
	if err != nil {
		return nil, err
	}
	fields := map[string]string{}
	for line := range strings.SplitSeq(text, "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), ":"); ok && !strings.HasPrefix(k, "#") {
			fields[k] = v
		}
	}
	return fields, nil
}
