//go:build !race && !js

package webtransporttest

// raceEnabled: the race detector is on; Chromium skips (see there).
const raceEnabled = false
