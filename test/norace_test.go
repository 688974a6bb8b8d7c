//go:build !race

package test

// raceSlowdown is how much slower the race detector makes the gateway's
// work: CPU bounds are that much larger under it.
const raceSlowdown = 1
