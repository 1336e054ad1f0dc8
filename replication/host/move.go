package host

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/archenet/archenet/replication"
	"github.com/archenet/archenet/transport"
	arche "github.com/mlange-42/arche/ecs"
)

// Moving a match to another host: the match's server writes a checkpoint
// (Match.Checkpoint), another host opens a match of the same name from it
// (MatchConfig.Checkpoint, Match.NewServer), and the first tells its
// players where the match goes on (Match.MoveTo): they resume their seats
// there, and the match here ends once they have gone.

// Checkpointer is a Game that has state of its own to carry in a
// checkpoint (anything its replicated components do not hold: server-only
// components, scores, the simulation's clock). Match.Checkpoint asks it on
// the match's goroutine; the restored game gets the bytes back from
// Match.NewServer.
type Checkpointer interface {
	CheckpointState() ([]byte, error)
}

// checkpointReq is a Checkpoint call waiting for the match's goroutine.
type checkpointReq struct {
	reply chan checkpointResult
}

type checkpointResult struct {
	b   []byte
	err error
}

// ErrMatchEnded: the match ended before the call was served.
var ErrMatchEnded = errors.New("host: the match ended")

// Checkpoint writes the match to bytes (replication.Server.Checkpoint, with
// the game's own state if it is a Checkpointer), taken at the start of its
// next frame. Safe from any goroutine but the match's own (it waits for
// it; with Config.Manual, for the next Step on another goroutine).
func (m *Match) Checkpoint(ctx context.Context) ([]byte, error) {
	req := checkpointReq{reply: make(chan checkpointResult, 1)}
	select {
	case m.cpReqs <- req:
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-m.ended:
		return nil, ErrMatchEnded
	}
	select {
	case r := <-req.reply:
		return r.b, r.err
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-m.ended:
		return nil, ErrMatchEnded
	}
}

// serveCheckpoints takes the checkpoints asked for (the match's goroutine).
func (m *Match) serveCheckpoints() {
	for {
		select {
		case req := <-m.cpReqs:
			var r checkpointResult
			var state []byte
			if c, ok := m.game.(Checkpointer); ok {
				state, r.err = c.CheckpointState()
			}
			if r.err == nil {
				start := time.Now()
				r.b, r.err = m.srv.Checkpoint(nil, state)
				m.log.Info("archenet/host: checkpoint", "bytes", len(r.b), "took", time.Since(start), "err", r.err)
			}
			req.reply <- r
		default:
			return
		}
	}
}

// moveInfo is where a match goes on (MoveTo).
type moveInfo struct {
	address, reason string
	deadline        time.Time
}

// MoveTo tells the match's players, at its next frame, that the match goes
// on at address (a host that opened it from this match's checkpoint):
// each gets a drain notice naming it (replication.DrainNotice.Address),
// resumes its seat there, and leaves this one. The match ends once no
// player is left here, or at deadline (the zero time: none). The host
// keeps admitting to its other matches. Safe from any goroutine; a later
// MoveTo replaces an earlier one's address.
func (m *Match) MoveTo(address, reason string, deadline time.Time) {
	m.move.Store(&moveInfo{address: address, reason: reason, deadline: deadline})
}

// noticeMove passes a new MoveTo on to the match's server.
func (m *Match) noticeMove() {
	if mv := m.move.Load(); mv != nil && mv != m.moveSeen {
		m.moveSeen = mv
		m.srv.DrainTo(mv.address, mv.reason, mv.deadline)
	}
}

// moveEnd returns why a moving match ends now, or nil.
func (m *Match) moveEnd(now time.Time) *transport.CloseError {
	mv := m.moveSeen
	if mv == nil {
		return nil
	}
	if len(m.players) == 0 || !mv.deadline.IsZero() && !now.Before(mv.deadline) {
		return &transport.CloseError{Code: transport.CodeDraining, Reason: transport.TruncateReason(fmt.Sprintf("server draining: the match moved to %s", mv.address), transport.MaxReasonLen)}
	}
	return nil
}

// NewServer makes the match's replication server in world, with
// m.Configure applied to cfg and m.Listener as its listener: a new one
// (replication.NewServer), or, if the match was opened from a checkpoint
// (MatchConfig.Checkpoint), the checkpoint's (replication.Restore), with
// the game's own state it carried. Call it from MatchConfig.Start.
func (m *Match) NewServer(world *arche.World, cfg replication.ServerConfig) (*replication.Server, []byte, error) {
	m.Configure(&cfg)
	if m.cfg.Checkpoint != nil {
		return replication.Restore(world, m.Listener(), cfg, m.cfg.Checkpoint)
	}
	srv, err := replication.NewServer(world, m.Listener(), cfg)
	return srv, nil, err
}
