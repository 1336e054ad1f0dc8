//go:build !race

package replication

// raceEnabled: the race detector is on (long loops run fewer rounds).
const raceEnabled = false
