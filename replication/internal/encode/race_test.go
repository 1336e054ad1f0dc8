//go:build race

package encode

// raceEnabled: the race detector is on (its instrumentation allocates:
// allocation counts are not checked).
const raceEnabled = true
