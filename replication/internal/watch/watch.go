package watch

import (
	"time"

	"github.com/archenet/archenet/replication/internal/link"
)

// System names one of the systems a client's frame needs.
type System uint8

// The systems of a client's frame.
const (
	// Receive is Client.Receive (Client.ReceiveSystem): always needed.
	Receive System = iota
	// Send is Client.Send (Client.SendSystem, or an input.Player, which
	// sends its inputs itself): needed once welcomed.
	Send
	// Interpolate is Client.Interpolate (Client.InterpolationSystem):
	// needed once ready when ClientConfig.Interpolation or
	// InterpolatedComponents is set.
	Interpolate
	// Predict is an input helper's frame (input.Player.System): needed
	// once ready when a helper declared it (Client.ExpectPredictSystem).
	Predict
	numSystems
)

// WarnAfter is how long a needed system may go without running before
// Missing names it.
const WarnAfter = 2 * time.Second

// WarnEvery is how often Missing names it again while it stays away.
const WarnEvery = 10 * time.Second

// hints are the warnings, by system.
var hints = [numSystems]string{
	Receive: "Client.Receive has not run: the client sees nothing from the server, stays connecting and is dropped " +
		"(add Client.ReceiveSystem before the game's systems)",
	Send: "Client.Send has not run since the Welcome: the server hears no acks or input from this client and drops it " +
		"(add Client.SendSystem last, or run input.Player.System, which sends)",
	Interpolate: "Client.Interpolate has not run: remote entities show raw snapshots, and the client reports no view " +
		"with its inputs (lag compensation off) (add Client.InterpolationSystem after Client.ReceiveSystem)",
	Predict: "input.Player.Update has not run: the client's own entity is not predicted and no input is sent " +
		"(add Player.System after Client.ReceiveSystem)",
}

// Hint is the warning about system s not running: what goes wrong, and
// how to add it.
func (s System) Hint() string { return hints[s] }

// Watch follows which of a client's systems run: a state machine fed the
// systems that ran and the time. The zero Watch is ready.
type Watch struct {
	ran    [numSystems]time.Time // when each last ran
	need   [numSystems]time.Time // since when each is needed (zero: not now)
	warned [numSystems]time.Time
	expect [numSystems]bool // declared by a helper (Predict)
}

// Note records that system s ran at now.
func (w *Watch) Note(s System, now time.Time) { w.ran[s] = now }

// Expect declares that the client's frame has system s (Predict): it is
// needed once ready.
func (w *Watch) Expect(s System) { w.expect[s] = true }

// Needs updates which systems the client needs in state st, with
// interpolation configured or not.
func (w *Watch) Needs(st link.State, interpolates bool, now time.Time) {
	want := [numSystems]bool{
		Receive:     st != link.Closed,
		Send:        st == link.Joined || st == link.Ready,
		Interpolate: st == link.Ready && interpolates,
		Predict:     st == link.Ready && w.expect[Predict],
	}
	for s, on := range want {
		switch {
		case !on:
			w.need[s] = time.Time{}
		case w.need[s].IsZero():
			w.need[s] = now
		}
	}
}

// Missing returns a system that is needed and has not run for WarnAfter,
// and is due for a warning at now, with how long it has not run (ok false:
// none).
func (w *Watch) Missing(now time.Time) (System, time.Duration, bool) {
	for s := range numSystems {
		if w.need[s].IsZero() {
			continue
		}
		since := w.need[s]
		if w.ran[s].After(since) {
			since = w.ran[s]
		}
		if d := now.Sub(since); d >= WarnAfter && now.Sub(w.warned[s]) >= WarnEvery {
			w.warned[s] = now
			return s, d, true
		}
	}
	return 0, 0, false
}
