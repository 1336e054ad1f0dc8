//go:build !race

package harness

// RaceEnabled: the race detector is on (timing bounds are reported, not
// enforced).
const RaceEnabled = false
