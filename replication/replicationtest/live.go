package replicationtest

import (
	"fmt"

	"github.com/archenet/archenet/components"
	"github.com/archenet/archenet/replication/schema"
	"github.com/mlange-42/arche/ecs"
)

// History keeps the server's quantized state of the last ticks, so that a
// client can be checked while everything moves ([History.Check]): each
// mirror is compared with the server's state at the tick of the state it
// shows (replication.Client.StateTick), not with the server's newest.
// Record it after each Server.Send. Not safe for concurrent use.
type History struct {
	reg   *schema.Registry
	ticks []tickState // ring by tick
}

// tickState is the server's state at one tick, by net id.
type tickState struct {
	tick uint32
	ok   bool
	by   map[components.NetID]liveState
}

// liveState is an entity's component set and its lanes after the round
// trip a mirror goes through, as its owner sees them and as others do.
type liveState struct {
	set          uint64
	owner, other []uint64
}

// NewHistory returns a history of depth ticks (at least the client's
// render delay in ticks, plus the ticks a state may wait for a lost
// datagram's successor; the server's snapshot ring depth is a good choice).
func NewHistory(reg *schema.Registry, depth int) *History {
	return &History{reg: reg, ticks: make([]tickState, max(depth, 1))}
}

// Record captures the server world w's replicated entities as of tick
// (replication.Server.Tick after its Send); netID is the server's. Allocates.
func (h *History) Record(w *ecs.World, netID func(ecs.Entity) (components.NetID, bool), tick uint32) error {
	ts := &h.ticks[tick%uint32(len(h.ticks))]
	*ts = tickState{tick: tick, ok: true, by: map[components.NetID]liveState{}}
	q := w.Query(ecs.All(ecs.ComponentID[components.Replicated](w)))
	for q.Next() {
		e := q.Entity()
		id, ok := netID(e)
		if !ok {
			continue // (created since the Send: not replicated yet)
		}
		set, own := Quantized(h.reg, w, e, true, true)
		_, other := Quantized(h.reg, w, e, false, true)
		ts.by[id] = liveState{set: set, owner: own, other: other}
	}
	return nil
}

// at returns the state of tick, if the history still holds it.
func (h *History) at(tick uint32) (*tickState, bool) {
	ts := &h.ticks[tick%uint32(len(h.ticks))]
	return ts, ts.ok && ts.tick == tick
}

// LiveCheck is a client to check against a [History].
type LiveCheck struct {
	// Client is the client's world and Me its client id.
	Client *ecs.World
	Me     uint8
	// StateTick is the client's tick of the state a mirror shows
	// (replication.Client.StateTick).
	StateTick func(components.NetID) (uint32, bool)
	// SkipPredicted skips the client's own predicted entities (they run
	// ahead of the server).
	SkipPredicted bool
}

// LiveReport is what a live check found besides its verdict.
type LiveReport struct {
	// Compared counts mirrors compared with the server's state at their
	// state tick; Unchecked those whose state tick the history no longer
	// holds (an entity that has not changed for longer than its depth);
	// SkippedPredicted the client's own predicted entities.
	Compared, Unchecked, SkippedPredicted int
}

// Check compares every mirror of c's client with the server's state at
// the tick of the state the mirror shows: the component set and each
// quantized value must be the server's then (owner-only fields only for
// the entities the client owns). It fails on the first difference, naming
// the entity, the component, the field and the steps, or on a mirror of an
// entity the server did not have at that tick. It does not check which
// entities a client mirrors (Converged does, once still). It is
// [History.CheckCapture] of [CaptureClient].
func (h *History) Check(c LiveCheck) (LiveReport, error) {
	return h.CheckCapture(CaptureClient(h.reg, c.Client, c.Me, c.StateTick), c.SkipPredicted)
}

// CheckCapture is [History.Check] of a client's mirrors captured elsewhere:
// in a page, say ([CaptureClient] there, [ClientCapture.AppendBinary] across).
// skipPredicted skips the client's own predicted entities.
func (h *History) CheckCapture(c ClientCapture, skipPredicted bool) (LiveReport, error) {
	var r LiveReport
	for _, m := range c.Mirrors {
		id := m.ID
		own := id.Owner() == c.Me && c.Me != 0
		if own && skipPredicted && m.Predicted {
			r.SkippedPredicted++
			continue
		}
		ts, ok := h.at(m.Tick)
		if !ok {
			r.Unchecked++
			continue
		}
		st, ok := ts.by[id]
		if !ok {
			return r, fmt.Errorf("client %d mirrors %08x/%d with the state of tick %d, when the server did not have it", c.Me, id.Handle, id.Gen, m.Tick)
		}
		want := st.other
		if own {
			want = st.owner
		}
		if m.Set != st.set {
			return r, fmt.Errorf("client %d %08x/%d at tick %d: component set %s, server %s", c.Me, id.Handle, id.Gen, m.Tick, setNames(h.reg, m.Set), setNames(h.reg, st.set))
		}
		if len(m.Lanes) != len(want) {
			return r, fmt.Errorf("client %d %08x/%d at tick %d: %d quantized values, server %d", c.Me, id.Handle, id.Gen, m.Tick, len(m.Lanes), len(want))
		}
		for i := range want {
			if want[i] != m.Lanes[i] {
				comp, field, steps := describeLane(h.reg, m.Set, i, want[i], m.Lanes[i])
				return r, fmt.Errorf("client %d %08x/%d at tick %d: %s.%s differs from the server's by %d steps (client code %d, server %d)",
					c.Me, id.Handle, id.Gen, m.Tick, comp, field, steps, m.Lanes[i], want[i])
			}
		}
		r.Compared++
	}
	return r, nil
}
