package replication

import (
	"context"
	"log/slog"
	"time"

	"github.com/archenet/archenet/replication/internal/watch"
)

// ExpectPredictSystem declares that the client's frame has a prediction
// system (input.Player declares its Update): once ready, the client warns
// when it does not run (see [Client.PredictSystemRan]).
func (c *Client) ExpectPredictSystem() { c.watch.Expect(watch.Predict) }

// PredictSystemRan tells the client that its prediction system ran
// (input.Player's Update calls it), and checks the others: a needed system
// that has not run for 2 s is named in a warning. Receive, Send and
// Interpolate note themselves.
func (c *Client) PredictSystemRan() {
	now := c.cfg.Now()
	c.watch.Note(watch.Predict, now)
	c.checkSystems(now)
}

// checkSystems warns, on the client's logger, about a system of its frame
// that is needed and does not run (within 2 s, and every 10 s while it
// lasts): a missing piece of wiring is loud instead of a client that
// silently stays "connecting", draws raw snapshots or sends no input.
func (c *Client) checkSystems(now time.Time) {
	st := c.link.State()
	c.watch.Needs(st, c.cfg.Interpolation || len(c.cfg.InterpolatedComponents) > 0, now)
	if s, d, ok := c.watch.Missing(now); ok {
		c.cfg.Logger.Log(context.Background(), slog.LevelWarn, "archenet: "+s.Hint(), "for", d.Round(time.Millisecond), "state", ClientState(st))
	}
}
