//go:build race

package fleettest

// raceEnabled is whether the tests run with the race detector: the nodes
// are then built with it too.
const raceEnabled = true
