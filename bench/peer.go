package main

import (
	"fmt"
	"io"
)

// peerPair is a configuration of the gateway against the peer doing the
// same job (letting every call through, or refusing every call), at one
// body size, round by round.
type peerPair struct {
	Config string `json:"config"`
	Peer   string `json:"peer"`
	Size   int    `json:"body_bytes"`
	// Ratio is the configuration's throughput over the peer's.
	Ratio spread `json:"ratio"`
	// CPU is the configuration's Caddy CPU per answer minus the peer's,
	// in microseconds: below zero, the gateway costs less.
	CPU *interval `json:"cpu_minus_peer_us,omitempty"`
}

// peerPairs are the configurations compared with the peer, each with the
// peer's configuration that does the same job.
var peerPairs = [][2]string{
	{cfgMCP, cfgPeer},
	{cfgLimits1, cfgPeer},
	{cfgGuard, cfgPeer},
	{cfgDenied, cfgPeerDenied},
}

// versusPeer compares each of peerPairs that was measured, at each size.
func versusPeer(all []*series, sizes []int) []peerPair {
	var pairs []peerPair
	for _, size := range sizes {
		for _, p := range peerPairs {
			ours, peer := findSeries(all, p[0], size), findSeries(all, p[1], size)
			if ours == nil || peer == nil {
				continue
			}
			var ratio, cpu []float64
			for i, smp := range ours.Samples {
				if i >= len(peer.Samples) {
					break
				}
				if r := peer.Samples[i].RPS(); r > 0 {
					ratio = append(ratio, smp.RPS()/r)
				}
				a, ok := cpuPerAnswer(ours, i)
				b, ok2 := cpuPerAnswer(peer, i)
				if ok && ok2 {
					cpu = append(cpu, a-b)
				}
			}
			pairs = append(pairs, peerPair{Config: p[0], Peer: p[1], Size: size, Ratio: spreadOf(ratio), CPU: medianInterval(cpu)})
		}
	}
	return pairs
}

// peerGoals are the targets against the peer: each configuration's Caddy
// CPU per answer at most the peer's, the median of the round-by-round
// differences (the measured range shown is its interval).
func peerGoals(pairs []peerPair) []goal {
	var gs goalList
	for _, p := range pairs {
		if p.CPU == nil {
			continue
		}
		gs.atMost(fmt.Sprintf("Caddy CPU per request, %s minus %s, %s (bracket: the interval)", p.Config, p.Peer, sizeLabel(p.Size)), spread{Median: p.CPU.Median, Min: p.CPU.Low, Max: p.CPU.High}, 0, "µs")
	}
	return gs
}

// writePeer is the comparison with the peer, when it was measured.
func (r *report) writePeer(w io.Writer) {
	if len(r.Peer) == 0 {
		return
	}
	fmt.Fprintln(w, "\nAgainst the peer, mholt/caddy-ratelimit, in the same Caddy binary (peer: a zone keyed by the client's address that never runs dry; peer-denied: one that refuses every call with an empty 429). Round by round: the gateway's throughput over the peer's (median [smallest–largest]), and its Caddy CPU per answer minus the peer's (median [interval, confidence]; below zero the gateway costs less):")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| gateway | peer | body | × peer's throughput | CPU minus the peer's |")
	fmt.Fprintln(w, "|---|---|---|---|---|")
	for _, p := range r.Peer {
		fmt.Fprintf(w, "| %s | %s | %s | %.3f [%.3f–%.3f] | %s |\n", p.Config, p.Peer, sizeLabel(p.Size),
			p.Ratio.Median, p.Ratio.Min, p.Ratio.Max, cpuInterval(p.CPU))
	}
}

// cpuInterval is a CPU time per request with its interval, in
// microseconds, or – where it was not measured.
func cpuInterval(iv *interval) string {
	if iv == nil {
		return "–"
	}
	return fmt.Sprintf("%+.1f µs [%+.1f, %+.1f; %.0f %%]", iv.Median, iv.Low, iv.High, 100*iv.Confidence)
}
