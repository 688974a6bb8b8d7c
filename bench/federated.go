package main

import (
	"fmt"
	"io"
	"strings"
	"time"
)

// The federated configurations: three responders behind one mcp block,
// each a server block of its own, in this order of precedence. The first
// is the responder every other configuration proxies to, and lists echo;
// the second lists add, the slow one wait, so that no name is given twice
// and none is prefixed. A call to echo is routed to the first; a
// tools/list is asked of all three in parallel, and waits for the slow
// one.

// slowDelay is how long the slow responder waits before each answer.
const slowDelay = 50 * time.Millisecond

// secondTool and slowTool are the tools the second and the slow responder
// list. They are short, so that the merged list of the three holds all of
// them in the bytes the load generator checks (checkBytes): every answer
// of federated-list must hold slowTool, the slow server's entry.
const (
	secondTool = `{"name":"add","description":"Adds two numbers.","inputSchema":{"type":"object"}}`
	slowTool   = `{"name":"wait","description":"Answers after 50 ms.","inputSchema":{"type":"object"}}`
)

// The marks that stand for the three responders, host:port, in
// federatedHandler; caddyfile puts their addresses in their place.
const (
	responderMark = "RESPONDER_HOST_PORT"
	secondMark    = "SECOND_HOST_PORT"
	slowMark      = "SLOW_HOST_PORT"
)

// federatedHandler is the mcp block of the federated configurations, each
// server reached with the reverse_proxy settings every configuration has.
var federatedHandler = "mcp {\n" + serverBlock("first", responderMark) + serverBlock("second", secondMark) + serverBlock("slow", slowMark) + "}"

func serverBlock(name, addr string) string {
	return "\tserver " + name + " {\n\t\treverse_proxy " + addr + " {\n\t\t\theader_up Host {upstream_hostport}\n\t\t}\n\t}\n"
}

// checkFederation checks, before the first round, that the gateway at
// addr lists the three servers' tools, and routes a call to echo to the
// first, which answers at once. The call also has the gateway learn the
// names it routes by.
func checkFederation(addr string) error {
	post := poster(addr)
	list, err := post(string(listBody))
	if err != nil {
		return fmt.Errorf("listing tools: %w", err)
	}
	for _, tool := range []string{echoTool, secondTool, slowTool} {
		if !strings.Contains(list, tool) {
			return fmt.Errorf("the merged list has no %s: %q", tool, list)
		}
	}
	answer, err := post(string(body(1 << 10)))
	if err != nil {
		return fmt.Errorf("a call to echo: %w", err)
	}
	if !strings.Contains(answer, upstreamText) {
		return fmt.Errorf("a call to echo was not answered by the first server: %q", answer)
	}
	return nil
}

// sizeAt is the body size c is measured with where the others are
// measured with the i-th body size, size; false where c is not measured: a
// List configuration sends its one tools/list, measured once, with the
// first.
func (c config) sizeAt(i, size int) (int, bool) {
	if !c.List {
		return size, true
	}
	return len(listBody), i == 0
}

// federation checks the federated configurations: a tools/list asked of
// three servers in parallel takes within 10 % of the slow one's alone, and
// a call routed by its tool's name keeps the throughput of mcp {} in
// front of one server, within noise.
func (gs *goalList) federation(rows []row, sizes []int) {
	if r := findRow(rows, cfgFedList, len(listBody)); r != nil {
		gs.atMost("p50 added, federated-list (three servers, one slow) over mcp-slow-list (the slow one alone)", r.AddedP50, 10, "%")
	}
	for _, size := range sizes {
		if r := findRow(rows, cfgFedCall, size); r != nil && size <= 1<<10 {
			gs.atLeast(fmt.Sprintf("throughput, federated-call / mcp {} (within noise), %s", sizeLabel(size)), r.Ratio, 0.95)
		}
	}
}

// fedFigure is a configuration (federated, or credential) against its
// baseline at one body size: the Caddy CPU per answer minus the baseline's, round by
// round, in microseconds.
type fedFigure struct {
	Config   string    `json:"config"`
	Baseline string    `json:"baseline"`
	Body     string    `json:"body"`
	CPU      *interval `json:"cpu_minus_baseline_us,omitempty"`
}

// versusBaseline compares each federated configuration measured with its
// baseline, round by round.
func versusBaseline(all []*series, sizes []int) []fedFigure {
	var figs []fedFigure
	for _, s := range all {
		if !s.Config.Federated {
			continue
		}
		base := findSeries(all, s.Config.Baseline, s.Size)
		if base == nil {
			continue
		}
		figs = append(figs, fedFigure{Config: s.Config.Name, Baseline: s.Config.Baseline, Body: bodyLabel(s.Size, s.Config.List), CPU: cpuMinusBaseline(s, base)})
	}
	return figs
}

// cpuMinusBaseline is s's Caddy CPU per answer minus base's, round by
// round, in microseconds.
func cpuMinusBaseline(s, base *series) *interval {
	var cpu []float64
	for i := range s.Samples {
		a, ok := cpuPerAnswer(s, i)
		b, ok2 := cpuPerAnswer(base, i)
		if ok && ok2 {
			cpu = append(cpu, a-b)
		}
	}
	return medianInterval(cpu)
}

// writeFederation is the federated configurations' CPU against their
// baselines', when they were measured.
func (r *report) writeFederation(w io.Writer) {
	if len(r.Federation) == 0 {
		return
	}
	fmt.Fprintln(w, "\nFederation, round by round: each federated configuration's Caddy CPU per answer minus its baseline's (median [interval, confidence]): federated-call against mcp {} in front of one server, federated-list against mcp {} in front of the slow server alone:")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| federated | baseline | body | CPU minus the baseline's |")
	fmt.Fprintln(w, "|---|---|---|---|")
	for _, f := range r.Federation {
		fmt.Fprintf(w, "| %s | %s | %s | %s |\n", f.Config, baselineLabel(f.Baseline), f.Body, cpuInterval(f.CPU))
	}
}
