//go:build race

package main

// raceEnabled: the race detector is on (real-time tests with timing bounds
// run without it, in .ci/run).
const raceEnabled = true
