package host

import (
	"time"

	"github.com/archenet/archenet/transport"
)

// Drain stops admitting and ends the host gracefully: new connections are
// refused with transport.CodeDraining and "server draining: " + reason
// (the client's Err says so); each match's connected clients get a drain
// notice with reason and deadline (replication.Client.Draining); a match
// ends when its game closes it, when its last client leaves, or at deadline
// (its clients are then disconnected with CodeDraining; the zero deadline:
// none). [Host.Done] closes once every match has ended. Open fails from now
// on. Only the first Drain counts.
func (h *Host) Drain(reason string, deadline time.Time) {
	h.mu.Lock()
	if h.state != admitting {
		h.mu.Unlock()
		return
	}
	h.state = draining
	text := transport.TruncateReason("server draining: "+reason, transport.MaxReasonLen)
	h.drain.Store(&drainInfo{reason: reason, deadline: deadline,
		refusal: &transport.CloseError{Code: transport.CodeDraining, Reason: text}})
	n := len(h.matches)
	h.mu.Unlock()
	h.cfg.Logger.Info("archenet/host: draining", "reason", reason, "deadline", deadline, "matches", n)
	h.checkDone()
}

// Draining reports whether Drain was called.
func (h *Host) Draining() bool { return h.drain.Load() != nil }
