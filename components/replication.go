package components

import arche "github.com/mlange-42/arche/ecs"

// NetID is the network identity of a replicated entity. The server assigns
// it; client mirrors carry the same value. Handle packs the owner (8 bits,
// 0 = server) and a slot index (24 bits); Gen grows each time a slot is
// reused, so a recycled handle is never confused with the entity that held
// it before.
type NetID struct {
	Handle uint32
	Gen    uint32
}

// MakeHandle packs an owner id and a slot index (index < 2^24).
func MakeHandle(owner uint8, index uint32) uint32 { return uint32(owner)<<24 | index&0xffffff }

// Owner returns the owning client id (0 = server).
func (n NetID) Owner() uint8 { return uint8(n.Handle >> 24) }

// Index returns the slot index.
func (n NetID) Index() uint32 { return n.Handle & 0xffffff }

// IsZero reports whether n is unset.
func (n NetID) IsZero() bool { return n == NetID{} }

// Ref refers to a replicated entity from a field of a message (see
// schema.RegisterMessage): the sender names its own entity, and the
// receiver reads its own entity for it. On the wire it is the entity's
// net handle and generation, about the handle's bits plus a few for the
// generation.
//
//   - Sending, set Entity (the server's entity; on a client, a mirror) or
//     leave it zero for none. The library fills ID and Set; naming an
//     entity that is not replicated (or, on a client, not a mirror) makes
//     the send fail.
//   - Receiving, ID and Set say what the sender named, and Entity is this
//     side's entity for it: the live server entity (a client's message
//     naming a stale, unknown or irrelevant entity is refused before the
//     game sees it), or the client's mirror. Entity is zero when the sender
//     named none (Set is false) or, on a client, when the entity has no
//     mirror there (not yet spawned, outside its interest, despawned):
//     never another entity. Such a reference can be resolved later with
//     the client's Entity(ID).
type Ref struct {
	Entity arche.Entity
	ID     NetID
	Set    bool
}

// RefTo returns a reference to e (for a message field).
func RefTo(e arche.Entity) Ref { return Ref{Entity: e} }

// Owner marks the client that owns an entity (its player avatar, its
// projectiles). Owned entities receive owner-only fields and may be
// predicted by their owner. Client 0 is the server (no client owns it).
//
// An entity is handed to another client by changing Client (in place, or by
// replacing the component): from the next net tick its NetID names the new
// owner on the server and on every client (the old NetID no longer
// resolves), its mirrors stay, and the owner-only fields go to the new owner.
type Owner struct {
	Client uint8
}

// Replicated marks an entity for replication. Its replicated components are
// those registered with the replication registry that the entity has.
//
// The server reads its fields when the entity is created and when a
// component is added to it or removed from it, not each tick: to change
// them for a live entity, replace the component (remove it and add it back
// with the new values before the server's next Send; an entity without
// Replicated at a Send is despawned).
type Replicated struct {
	// Priority weights the entity when a client's budget cannot carry every
	// change: its priority accumulator grows by Priority each tick it waits.
	// 0 means 1.
	Priority float32
	// SendEvery sends the entity's changes only every N-th net tick
	// (staggered across entities); 0 or 1 means every net tick.
	SendEvery uint8
	// Dormant entities are not read or compared each tick: their state is
	// re-read only after Server.MarkDirty. For large sets of mostly static
	// entities.
	Dormant bool
}

// Transform is the standard replicated pose: a large-world position at
// 1 mm (grid cells of 65.536 m, so precision is the same anywhere) and a
// smallest-three rotation at 10 bits per component (≤ 0.1671° error).
type Transform struct {
	Pos Vec3 `net:"world,step=0.001"`
	Rot Quat `net:"quat,bits=10"`
}

// Velocity is the standard replicated linear velocity: ±100 m/s per axis at
// 1 cm/s, one bit when at rest.
type Velocity struct {
	Linear Vec3 `net:"vel,max=100,step=0.01"`
}

// Predicted marks an entity that its owning client simulates ahead with
// its own inputs and reconciles against the server's state.
type Predicted struct{}

// Interpolated marks an entity that clients draw from a buffer of snapshots
// (see package interp); mirrors get a Visual component.
type Interpolated struct{}
