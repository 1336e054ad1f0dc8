//go:build race

package tests

// raceEnabled: the race detector is on (timing bounds are reported, not
// enforced).
const raceEnabled = true
