package replication

import (
	"errors"
	"math"
	"reflect"
	"unsafe"

	"github.com/archenet/archenet/components"
	"github.com/archenet/archenet/replication/internal/grid"
	"github.com/mlange-42/arche/ecs"
)

// Interest configures per-client relevance: each client receives the
// entities within Radius of its focus point (found with a spatial hash
// grid over the x/z plane), entities without a position (global state),
// and the entities it owns. An entity's position is its
// components.Transform's Pos, or what [Interest].Position reads from
// another component (a 2D game's pose, say). An entity that is relevant
// stays relevant until it is farther than Radius × (1 + Hysteresis), so an
// entity on the border does not flap between spawned and despawned.
//
// Focus runs on the simulation goroutine (in Send, once per client, before
// the clients' datagrams are built in parallel). Filter, called for every
// client and nearby entity, runs on the server's workers
// (ServerConfig.Workers) while they build the clients' datagrams, on
// several goroutines at once: it must only read the world (and its own
// state, safely for concurrent use) and change nothing.
type Interest struct {
	// Radius of the area of interest in metres. Required (> 0).
	Radius float64
	// Hysteresis widens the leave radius. 0: DefaultHysteresis (0.15).
	Hysteresis float64
	// CellSize of the spatial hash grid. 0: Radius/2.
	CellSize float64
	// Position names the replicated component that holds an entity's
	// position and how to read it ([PositionOf]). Zero:
	// components.Transform's Pos.
	Position Position
	// Focus returns a client's point of interest. Nil (or ok = false): the
	// position of the first entity the client owns that has a position;
	// a client with no such entity gets only global and owned entities.
	Focus func(c ClientID) (pos components.Vec3, ok bool)
	// Filter, if set, must also accept an entity for it to be relevant. It
	// runs on the workers, concurrently (see above).
	Filter func(c ClientID, e ecs.Entity) bool
	// Every recomputes relevance every N-th net tick (entities spawned in
	// between wait for the next update). 0: every 2nd net tick (15 Hz at
	// 30 Hz); 1: every tick.
	Every int
}

// DefaultHysteresis is the default of [Interest].Hysteresis.
const DefaultHysteresis = 0.15

// Position tells interest management where an entity is: the replicated
// component that holds its position, and how to read it. Make one with
// [PositionOf]; the zero Position is components.Transform's Pos.
type Position struct {
	typ  reflect.Type
	read func(unsafe.Pointer) components.Vec3
}

// PositionOf returns the Position read from component T by read. Interest
// works on the x/z plane: a 2D game returns its coordinates as X and Z,
// e.g. PositionOf(func(b *Body) components.Vec3 { return components.Vec3{X: b.X, Z: b.Y} }).
// T must be in the server's registry. read runs on the server's workers
// while they build a frame, for entities of their share: it must only read
// the component it is given.
func PositionOf[T any](read func(*T) components.Vec3) Position {
	return Position{typ: reflect.TypeFor[T](), read: func(p unsafe.Pointer) components.Vec3 { return read((*T)(p)) }}
}

// Type returns the component type positions are read from.
func (p Position) Type() reflect.Type {
	if p.typ == nil {
		return reflect.TypeFor[components.Transform]()
	}
	return p.typ
}

// Of returns e's position in w: what [Position.Type]'s component of e says
// (ok is false if e has none).
func (p Position) Of(w *ecs.World, e ecs.Entity) (pos components.Vec3, ok bool) {
	id := ecs.TypeID(w, p.Type())
	if !w.Has(e, id) {
		return components.Vec3{}, false
	}
	return p.at(w.Get(e, id)), true
}

// at reads the position from a pointer to the component (of [Position.Type]).
func (p Position) at(ptr unsafe.Pointer) components.Vec3 {
	if p.read == nil {
		return (*components.Transform)(ptr).Pos
	}
	return p.read(ptr)
}

func (i *Interest) validate() error {
	if !(i.Radius > 0) || math.IsInf(i.Radius, 0) {
		return errors.New("replication: Interest.Radius must be positive")
	}
	if i.Hysteresis < 0 {
		return errors.New("replication: Interest.Hysteresis must not be negative")
	}
	if i.Every < 0 {
		return errors.New("replication: Interest.Every must not be negative")
	}
	return nil
}

// gridConfig is the grid's settings for i, defaults resolved.
func (i *Interest) gridConfig() grid.Config {
	h := i.Hysteresis
	if h == 0 {
		h = DefaultHysteresis
	}
	every := i.Every
	if every == 0 {
		every = 2
	}
	cell := i.CellSize
	if cell <= 0 {
		cell = i.Radius / 2
	}
	return grid.Config{Radius: i.Radius, Leave: i.Radius * (1 + h), CellSize: cell, Every: every, Filter: i.Filter}
}
