//go:build !race

package toolschema

// raceSlowdown is how much slower the race detector makes a check: CPU
// bounds are that much larger under it.
const raceSlowdown = 1
