package mirror

import (
	"errors"
	"fmt"
	"math"
	"math/bits"
	"time"

	arche "github.com/mlange-42/arche/ecs"

	"github.com/archenet/archenet/components"
)

// ProvisionalGen is the generation in the components.NetID of a
// provisional entity until the server's spawn adopts it; real generations
// are below 2³¹.
const ProvisionalGen = math.MaxUint32

// ErrProvisional is wrapped by SpawnPredicted's errors.
var ErrProvisional = errors.New("replication: predicted spawn refused")

// provisional is a spawn this client predicts, waiting for the server's.
type provisional struct {
	entity arche.Entity
	since  time.Time
}

// SpawnPredicted creates, at now, the provisional entity of key with the
// given components and a components.NetID in the owner space of self (the
// client's id; 0: not joined), for the server's spawn of that key to adopt
// (Spawn). It fails before the Welcome, for a key already waiting, and
// beyond Config.MaxPredictedSpawns waiting at once.
func (m *Mirrors) SpawnPredicted(self uint8, key uint32, now time.Time, comps ...arche.ID) (arche.Entity, error) {
	switch {
	case self == 0:
		return arche.Entity{}, fmt.Errorf("%w: not joined", ErrProvisional)
	case len(m.prov) >= m.cfg.MaxPredictedSpawns:
		return arche.Entity{}, fmt.Errorf("%w: %d already waiting (ClientConfig.MaxPredictedSpawns)", ErrProvisional, len(m.prov))
	}
	if _, dup := m.prov[key]; dup {
		return arche.Entity{}, fmt.Errorf("%w: key %d already waiting", ErrProvisional, key)
	}
	m.idBuf = append(m.idBuf[:0], comps...)
	m.idBuf = append(m.idBuf, m.idNetID)
	e := m.world.NewEntity(m.idBuf...)
	*(*components.NetID)(m.world.Get(e, m.idNetID)) = components.NetID{Handle: components.MakeHandle(self, key&(1<<24-1)), Gen: ProvisionalGen}
	if m.prov == nil {
		m.prov = map[uint32]provisional{}
	}
	m.prov[key] = provisional{entity: e, since: now}
	*m.count.PredictedSpawns++
	return e, nil
}

// Provisional returns the provisional entity of key, if it still waits for
// the server's spawn.
func (m *Mirrors) Provisional(key uint32) (arche.Entity, bool) {
	p, ok := m.prov[key]
	return p.entity, ok
}

// adopt makes the provisional entity of key the mirror mr of a spawn with
// set, if there is one; it reports whether it did.
func (m *Mirrors) adopt(mr *mirror, key uint32, set uint64) bool {
	p, ok := m.prov[key]
	if !ok {
		return false
	}
	delete(m.prov, key)
	if !m.world.Alive(p.entity) {
		return false
	}
	var add, rem []arche.ID
	for s := set; s != 0; s &= s - 1 {
		if id := m.ids[bits.TrailingZeros64(s)]; !m.world.Has(p.entity, id) {
			add = append(add, id)
		}
	}
	for i, id := range m.ids {
		if set&(1<<i) == 0 && m.world.Has(p.entity, id) {
			rem = append(rem, id)
		}
	}
	if len(add)+len(rem) > 0 {
		m.world.Exchange(p.entity, add, rem)
	}
	mr.entity, mr.predicted = p.entity, true
	*m.count.SpawnsAdopted++
	return true
}

// Expire ends the provisional entities the server did not spawn within
// Config.PredictedSpawnTimeout of now.
func (m *Mirrors) Expire(now time.Time) {
	for key, p := range m.prov {
		if now.Sub(p.since) > m.cfg.PredictedSpawnTimeout {
			*m.count.SpawnsExpired++
			m.finishProvisional(key, p, false)
		}
	}
}

// End ends the provisional entity of key, whose twin the server removed
// before it was ever sent (a wire.ParseSpawnsEnded callback).
func (m *Mirrors) End(key uint32) {
	if p, ok := m.prov[key]; ok {
		*m.count.SpawnsEnded++
		m.finishProvisional(key, p, true)
	}
}

// finishProvisional forgets the provisional entity of key and hands it to
// the game's OnPredictedSpawnEnd, or removes it.
func (m *Mirrors) finishProvisional(key uint32, p provisional, removed bool) {
	delete(m.prov, key)
	if !m.world.Alive(p.entity) {
		return
	}
	if m.cfg.OnPredictedSpawnEnd != nil {
		m.cfg.OnPredictedSpawnEnd(key, p.entity, removed)
		return
	}
	m.world.RemoveEntity(p.entity)
}

// dropProvisional removes every provisional entity (a reconnect).
func (m *Mirrors) dropProvisional() {
	for key, p := range m.prov {
		if m.world.Alive(p.entity) {
			m.world.RemoveEntity(p.entity)
		}
		delete(m.prov, key)
	}
}
