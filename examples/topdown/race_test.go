//go:build race

package main

// raceEnabled: the race detector is on (timing-dependent figures are
// reported, not bounded).
const raceEnabled = true
