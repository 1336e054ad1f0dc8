package encode

import (
	"sync"

	"github.com/archenet/archenet/replication/internal/entity"
	"github.com/archenet/archenet/replication/internal/store"
	"github.com/archenet/archenet/replication/internal/wire"
)

// Group is what the encoders of one ring share: the residual coding they
// choose together each tick (from what the records they sent showed), and
// the records pre-encoded for all of them (pre.go). A server makes one
// Group and one Encoder per worker goroutine.
//
// A tick, after the ring's Commit: [Group.BeginTick]; optionally
// [Group.BeginPreencode] and the encoders' [Encoder.Preencode] on disjoint
// ranges; the Builds (each encoder on one goroutine); each encoder's
// [Encoder.EndTick]; [Group.EndPreencode]; the ring's EndTick.
type Group struct {
	r     *store.Ring
	codes codeState
	pre   preTable
	encs  []*Encoder
	// preShares is the state of Preencode's jobs on the workers.
	preShares preShares
	// mu guards chosen, the tick whose coding BeginTick chose (the first
	// encoder to begin a tick calls it if the server did not).
	mu     sync.Mutex
	chosen uint32
}

// NewGroup returns the encoders' shared state over r.
func NewGroup(r *store.Ring) *Group {
	g := &Group{r: r}
	g.codes.coding = wire.DefaultCoding
	g.pre.minShare = 2
	return g
}

// Ring returns the group's ring.
func (g *Group) Ring() *store.Ring { return g.r }

// Encoders returns the group's encoders, in the order they were made.
func (g *Group) Encoders() []*Encoder { return g.encs }

// BeginTick starts a tick's encoding after the ring's Commit: the encoders'
// counts of the last tick's records (their EndTick) choose the coding of
// this tick's. No Build of the last tick may still run. It does its work
// once per tick: the first Build or Preencode of a tick calls it too, so a
// caller that skips it gets the same bytes.
func (g *Group) BeginTick() {
	f := g.r.Current()
	if f == nil {
		return
	}
	g.mu.Lock()
	if g.chosen != f.Tick {
		g.codes.choose()
		g.chosen = f.Tick
	}
	g.mu.Unlock()
}

// SetCoding replaces the group's choice of this tick's residual coding and
// quadratic extrapolation (tests and tools that want a coding of their
// own); the next ticks choose again.
func (g *Group) SetCoding(c wire.Coding, quad bool) {
	g.BeginTick()
	g.codes.coding, g.codes.quad = c, quad
}

// EndPreencode ends a tick's Builds on every encoder of the group: the key
// most of them shared, a tick on, is the one the next tick pre-encodes
// (see pre.go), for the slots in wanted (nil: all; the entities the clients
// hold or are to hold: others would be encoded for nobody).
func (g *Group) EndPreencode(wanted entity.Bitset) { g.pre.end(g.encs, wanted) }
