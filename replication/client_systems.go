package replication

import "time"

// clientSystem names one of the systems a client's frame needs. When one
// that is needed does not run, the client says which, in a warning on its
// logger, within [systemWarnAfter] (and every 10 s while it lasts): a
// missing piece of wiring is loud instead of a client that silently stays
// "connecting", draws raw snapshots or sends no input.
type clientSystem uint8

// The systems of a client's frame.
const (
	// systemReceive is Client.Receive (Client.ReceiveSystem): always needed.
	systemReceive clientSystem = iota
	// systemSend is Client.Send (Client.SendSystem, or an input.Player,
	// which sends its inputs itself): needed once welcomed.
	systemSend
	// systemInterpolate is Client.Interpolate (Client.InterpolationSystem):
	// needed once ready when ClientConfig.Interpolation or
	// InterpolatedComponents is set.
	systemInterpolate
	// systemPredict is an input helper's frame (input.Player.System):
	// needed once ready when a helper declared it ([Client.ExpectPredictSystem]).
	systemPredict
	numClientSystems
)

// systemWarnAfter is how long a needed system may go without running before
// the client warns.
const systemWarnAfter = 2 * time.Second

// systemWarnEvery is how often the warning repeats while a system stays
// away.
const systemWarnEvery = 10 * time.Second

// systemHints are the warnings, by system.
var systemHints = [numClientSystems]string{
	systemReceive: "Client.Receive has not run: the client sees nothing from the server, stays connecting and is dropped " +
		"(add Client.ReceiveSystem before the game's systems)",
	systemSend: "Client.Send has not run since the Welcome: the server hears no acks or input from this client and drops it " +
		"(add Client.SendSystem last, or run input.Player.System, which sends)",
	systemInterpolate: "Client.Interpolate has not run: remote entities show raw snapshots, and the client reports no view " +
		"with its inputs (lag compensation off) (add Client.InterpolationSystem after Client.ReceiveSystem)",
	systemPredict: "input.Player.Update has not run: the client's own entity is not predicted and no input is sent " +
		"(add Player.System after Client.ReceiveSystem)",
}

// systemWatch follows which of a client's systems run: a pure state
// machine fed the systems that ran and the time.
type systemWatch struct {
	ran    [numClientSystems]time.Time // when each last ran
	need   [numClientSystems]time.Time // since when each is needed (zero: not now)
	warned [numClientSystems]time.Time
	expect [numClientSystems]bool // declared by a helper (systemPredict)
}

// note records that system s ran at now.
func (w *systemWatch) note(s clientSystem, now time.Time) { w.ran[s] = now }

// needs updates which systems the client needs in state st, with
// interpolation configured or not.
func (w *systemWatch) needs(st ClientState, interpolates bool, now time.Time) {
	want := [numClientSystems]bool{
		systemReceive:     st != StateClosed,
		systemSend:        st == StateJoined || st == StateReady,
		systemInterpolate: st == StateReady && interpolates,
		systemPredict:     st == StateReady && w.expect[systemPredict],
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

// missing returns a system that is needed and has not run for
// systemWarnAfter, and is due for a warning at now (ok false: none).
func (w *systemWatch) missing(now time.Time) (clientSystem, time.Duration, bool) {
	for s := range numClientSystems {
		if w.need[s].IsZero() {
			continue
		}
		since := w.need[s]
		if w.ran[s].After(since) {
			since = w.ran[s]
		}
		if d := now.Sub(since); d >= systemWarnAfter && now.Sub(w.warned[s]) >= systemWarnEvery {
			w.warned[s] = now
			return s, d, true
		}
	}
	return 0, 0, false
}

// ExpectPredictSystem declares that the client's frame has a prediction
// system (input.Player declares its Update): once ready, the client warns
// when it does not run (see [Client.PredictSystemRan]).
func (c *Client) ExpectPredictSystem() { c.watch.expect[systemPredict] = true }

// PredictSystemRan tells the client that its prediction system ran
// (input.Player's Update calls it), and checks the others: a needed system
// that has not run for 2 s is named in a warning. Receive, Send and
// Interpolate note themselves.
func (c *Client) PredictSystemRan() {
	now := c.cfg.Now()
	c.watch.note(systemPredict, now)
	c.checkSystems(now)
}

// checkSystems warns about a needed system that does not run.
func (c *Client) checkSystems(now time.Time) {
	c.watch.needs(c.state, c.cfg.Interpolation || len(c.cfg.InterpolatedComponents) > 0, now)
	if s, d, ok := c.watch.missing(now); ok {
		c.cfg.Logger.Warn("archenet: "+systemHints[s], "for", d.Round(time.Millisecond), "state", c.state)
	}
}
