//go:build race

package congestion

// raceEnabled: the race detector is on (long loops run fewer rounds).
const raceEnabled = true
