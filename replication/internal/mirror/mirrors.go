package mirror

import (
	"math/bits"
	"reflect"
	"time"
	"unsafe"

	arche "github.com/mlange-42/arche/ecs"

	"github.com/archenet/archenet/components"
	"github.com/archenet/archenet/interp"
	"github.com/archenet/archenet/replication/internal/entity"
	"github.com/archenet/archenet/replication/internal/receive"
	"github.com/archenet/archenet/replication/internal/wire"
	"github.com/archenet/archenet/replication/schema"
)

// Config is what the mirrors need of the client's configuration, its
// defaults resolved (the fields of replication.ClientConfig of the same
// names, documented there).
type Config struct {
	Registry               *schema.Registry // required
	MaxEntities            int
	Interpolation          bool
	InterpolatedComponents []reflect.Type
	InterpClock            interp.ClockConfig
	Interpolate            func(owner uint8, set uint64) bool
	MaxExtrapolation       time.Duration
	PredictedSpawnTimeout  time.Duration
	OnPredictedSpawnEnd    func(key uint32, e arche.Entity, removed bool)
	MaxPredictedSpawns     int
}

// Counts are where the mirrors count what they did: the client's
// statistics (a nil pointer: not counted).
type Counts struct {
	// Spawns and Despawns count mirrors created (or adopted) and removed
	// by the server's spawn batches; Applied the entity states written.
	Spawns, Despawns, Applied *uint64
	// PredictedSpawns counts provisional entities, SpawnsAdopted those a
	// spawn adopted, SpawnsEnded those the server ended unsent,
	// SpawnsExpired those that timed out.
	PredictedSpawns, SpawnsAdopted, SpawnsEnded, SpawnsExpired *uint64
}

// Mirrors are a client's mirrors of the server's entities in its arche
// world. Not safe for concurrent use.
type Mirrors struct {
	cfg     Config
	world   *arche.World
	plans   []*schema.Plan
	ids     []arche.ID // per plan
	idNetID arche.ID
	count   Counts

	table table
	n     int   // alive mirrors, kept so spawns need not count them
	self  uint8 // the client's id, as of the last Welcome
	idBuf []arche.ID
	prov  map[uint32]provisional // predicted spawns waiting (spawn.go)
	// relMask is the relation components of the registry; relSlots the
	// slots of mirrors that were given one (Relations keeps their targets)
	relMask  uint64
	relSlots []uint32
	relPass  uint32
	interpState
}

// New returns the mirrors of world, or an error naming an interpolation
// setting the registry cannot serve.
func New(world *arche.World, cfg Config, counts Counts) (*Mirrors, error) {
	for _, p := range []**uint64{&counts.Spawns, &counts.Despawns, &counts.Applied, &counts.PredictedSpawns,
		&counts.SpawnsAdopted, &counts.SpawnsEnded, &counts.SpawnsExpired} {
		if *p == nil {
			*p = new(uint64)
		}
	}
	m := &Mirrors{cfg: cfg, world: world, plans: cfg.Registry.Plans(), count: counts, table: newTable(cfg.MaxEntities)}
	for _, p := range m.plans {
		m.ids = append(m.ids, arche.TypeID(world, p.Type))
	}
	m.idNetID = arche.ComponentID[components.NetID](world)
	for i, p := range m.plans {
		if p.IsRelation() {
			m.relMask |= 1 << i
		}
	}
	if err := m.setupInterp(); err != nil {
		return nil, err
	}
	return m, nil
}

// NetIDComponent is the id of components.NetID, which every mirror has.
func (m *Mirrors) NetIDComponent() arche.ID { return m.idNetID }

// Len returns the number of mirrored entities.
func (m *Mirrors) Len() int { return m.n }

// find returns the live mirror of id, or nil.
func (m *Mirrors) find(id components.NetID) *mirror {
	mr := m.table.get(id.Index())
	if mr == nil || !mr.alive || mr.gen != id.Gen || mr.owner != id.Owner() {
		return nil // (a handle's owner bits name the client the entity was handed to)
	}
	return mr
}

// Entity returns the mirror entity of a net handle and generation.
func (m *Mirrors) Entity(id components.NetID) (arche.Entity, bool) {
	if mr := m.find(id); mr != nil {
		return mr.entity, true
	}
	return arche.Entity{}, false
}

// StateTick returns the server tick of the state last written into the
// mirror of id.
func (m *Mirrors) StateTick(id components.NetID) (uint32, bool) {
	if mr := m.find(id); mr != nil {
		return mr.src, true
	}
	return 0, false
}

// RemoveAll removes every mirror and every provisional entity (a
// reconnect).
func (m *Mirrors) RemoveAll() {
	m.table.each(m.remove)
	m.dropProvisional()
}

// Spawn applies one entry of a spawn batch of tick: a despawn, a new
// mirror (or the adoption of a provisional entity), or a mirror's new
// component set, with the entity's state. latest is the newest view
// decoded (nil: none): a datagram may already have brought a newer state.
func (m *Mirrors) Spawn(tick uint32, e wire.SpawnEntry, latest *receive.View) {
	if e.Slot >= entity.MaxSlots {
		return
	}
	if e.Despawn {
		if mr := m.table.get(e.Slot); mr != nil && mr.alive && mr.gen == e.Meta.Gen {
			m.remove(e.Slot, mr)
			*m.count.Despawns++
		}
		return
	}
	if mr := m.table.get(e.Slot); m.n >= m.cfg.MaxEntities && (mr == nil || !mr.alive) {
		return
	}
	mr := m.table.at(e.Slot)
	if mr.alive && mr.gen != e.Meta.Gen {
		m.remove(e.Slot, mr) // the slot was reused: the old entity is gone
		mr = m.table.at(e.Slot)
	}
	if !mr.alive && e.HasKey && m.adopt(mr, e.Key, e.Meta.Set) {
		mr.alive, mr.gen, mr.set, mr.owner = true, e.Meta.Gen, e.Meta.Set, e.Meta.Owner
		m.n++
		*m.count.Spawns++
	} else if !mr.alive {
		m.idBuf = m.idBuf[:0]
		for set := e.Meta.Set; set != 0; set &= set - 1 {
			m.idBuf = append(m.idBuf, m.ids[bits.TrailingZeros64(set)])
		}
		m.idBuf = append(m.idBuf, m.idNetID)
		track := m.spawnInterp(e.Meta)
		mr.entity = m.world.NewEntity(m.idBuf...)
		mr.alive, mr.gen, mr.set, mr.owner, mr.predicted = true, e.Meta.Gen, e.Meta.Set, e.Meta.Owner, false
		if track {
			m.initTrack(mr)
		}
		m.n++
		*m.count.Spawns++
	} else {
		if mr.set != e.Meta.Set {
			m.exchange(mr, e.Meta.Set)
		}
		mr.owner = e.Meta.Owner // (handed to another client)
	}
	*(*components.NetID)(m.world.Get(mr.entity, m.idNetID)) = components.NetID{Handle: components.MakeHandle(e.Meta.Owner, e.Slot), Gen: e.Meta.Gen}
	if e.Meta.Set&m.relMask != 0 {
		mr.target, mr.hasTarget = e.Target, e.HasTarget
		if !mr.relListed {
			mr.relListed = true
			m.relSlots = append(m.relSlots, e.Slot)
		}
	}
	m.write(mr, e.Meta.Set, e.Lanes)
	mr.src = tick
	if m.clock != nil && !mr.predicted {
		// The spawn's state is the entity's at tick: its first sample (the
		// server may send nothing more while it does not change).
		m.pushState(mr, tick, e.Lanes, false, 0)
	}
	if latest != nil {
		if i := latest.Find(e.Slot); i >= 0 && latest.Metas[i].Gen == mr.gen && latest.Metas[i].Set == mr.set && int32(latest.Srcs[i]-mr.src) > 0 {
			m.write(mr, mr.set, latest.EntityLanes(i))
			mr.src = latest.Srcs[i]
		}
	}
}

// Relations points the relation component of every mirror that has one at
// the mirror of its target: none while the target has no mirror here (not
// spawned yet, outside the client's interest, despawned), never a removed
// or another entity. Run it after the tick's spawns and despawns.
func (m *Mirrors) Relations() {
	keep := m.relSlots[:0]
	m.relPass++
	for _, slot := range m.relSlots {
		mr := m.table.get(slot)
		if mr == nil || !mr.alive || mr.set&m.relMask == 0 {
			if mr != nil {
				mr.relListed = false
			}
			continue
		}
		if mr.relPass == m.relPass {
			continue // (listed twice: removed and spawned again in one Receive)
		}
		mr.relPass = m.relPass
		keep = append(keep, slot)
		var want arche.Entity
		if mr.hasTarget {
			want, _ = m.Entity(mr.target)
		}
		id := m.ids[bits.TrailingZeros64(mr.set&m.relMask)]
		rel := m.world.Relations()
		if rel.Get(mr.entity, id) != want {
			rel.Set(mr.entity, id, want)
		}
	}
	m.relSlots = keep
}

// exchange gives mirror mr the components of set (and the interpolation
// components that go with them).
func (m *Mirrors) exchange(mr *mirror, set uint64) {
	var add, rem []arche.ID
	for s := set &^ mr.set; s != 0; s &= s - 1 {
		add = append(add, m.ids[bits.TrailingZeros64(s)])
	}
	for s := mr.set &^ set; s != 0; s &= s - 1 {
		rem = append(rem, m.ids[bits.TrailingZeros64(s)])
	}
	add, rem, track := m.exchangeInterp(mr, set, add, rem)
	m.world.Exchange(mr.entity, add, rem)
	mr.set = set
	if track {
		m.initTrack(mr)
	}
}

// remove removes the mirror of slot and forgets it.
func (m *Mirrors) remove(slot uint32, mr *mirror) {
	if m.world.Alive(mr.entity) {
		m.world.RemoveEntity(mr.entity)
	}
	*mr = mirror{}
	m.table.release(slot)
	m.n--
}

// write dequantizes lanes (all components of set) into the mirror.
func (m *Mirrors) write(mr *mirror, set uint64, lanes []uint64) {
	off := 0
	for s := set; s != 0; s &= s - 1 {
		id := bits.TrailingZeros64(s)
		p := m.plans[id]
		n := p.NumLanes()
		if n > 0 {
			p.DequantizeBytes(lanes[off:off+n], unsafe.Slice((*byte)(m.world.Get(mr.entity, m.ids[id])), p.Size))
		}
		off += n
	}
	*m.count.Applied++
}

// Show takes the view of a tick that gained datagrams (nil: none): every
// interpolated mirror's state at its tick goes to its buffer or track, and
// the entries newer than what each mirror holds are written into it.
// Allocation-free.
func (m *Mirrors) Show(v *receive.View) {
	if v == nil {
		return
	}
	if m.clock != nil {
		m.pushInterp(v)
	}
	for i, slot := range v.Slots {
		mr := m.table.get(slot)
		if mr == nil || !mr.alive || mr.gen != v.Metas[i].Gen || mr.set != v.Metas[i].Set || int32(v.Srcs[i]-mr.src) <= 0 {
			continue
		}
		m.write(mr, mr.set, v.EntityLanes(i))
		mr.src = v.Srcs[i]
	}
}
