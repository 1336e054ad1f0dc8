package replication

import (
	"errors"
	"fmt"
	"math"
	"math/bits"
	"time"

	arche "github.com/mlange-42/arche/ecs"

	"github.com/archenet/archenet/components"
)

// ProvisionalGen is the generation in the components.NetID of a provisional
// entity (Client.SpawnPredicted) until the server's spawn adopts it; real
// generations are below 2³¹.
const ProvisionalGen = math.MaxUint32

// ErrProvisional is wrapped by Client.SpawnPredicted's errors.
var ErrProvisional = errors.New("replication: predicted spawn refused")

// provisional is a spawn this client predicts, waiting for the server's.
type provisional struct {
	entity arche.Entity
	since  time.Time
}

// SpawnPredicted creates a provisional local entity with the given
// components (and a components.NetID in this client's owner space, with
// [ProvisionalGen]) for a spawn this client predicts — its projectile, the
// tick it fires — identified by key, the same key the server's game passes
// to [Server.PredictedSpawn] for the entity it creates (derive it from the
// input on both sides, e.g. the input tick). The game simulates and draws
// it at once.
//
// When the server's spawn of that key arrives, this very entity becomes
// the mirror of the server's: its NetID changes to the server's, its
// component set becomes the server's, and the replication client writes the
// server's state into it from then on (as for any mirror; [Client.StateTick]
// says the tick of that state, so the game can re-extrapolate it to its
// predicted tick). It is never interpolated. No duplicate appears. If no
// spawn of that key arrives within ClientConfig.PredictedSpawnTimeout (the
// server refused, or decided otherwise), the entity is removed.
//
// It fails before the Welcome, for a key already waiting, and beyond
// ClientConfig.MaxPredictedSpawns waiting at once.
func (c *Client) SpawnPredicted(key uint32, comps ...arche.ID) (arche.Entity, error) {
	switch {
	case c.id == 0:
		return arche.Entity{}, fmt.Errorf("%w: not joined", ErrProvisional)
	case len(c.prov) >= c.cfg.MaxPredictedSpawns:
		return arche.Entity{}, fmt.Errorf("%w: %d already waiting (ClientConfig.MaxPredictedSpawns)", ErrProvisional, len(c.prov))
	}
	if _, dup := c.prov[key]; dup {
		return arche.Entity{}, fmt.Errorf("%w: key %d already waiting", ErrProvisional, key)
	}
	c.idBuf = append(c.idBuf[:0], comps...)
	c.idBuf = append(c.idBuf, c.idNetID)
	e := c.world.NewEntity(c.idBuf...)
	*(*components.NetID)(c.world.Get(e, c.idNetID)) = components.NetID{Handle: components.MakeHandle(c.id, key&(1<<24-1)), Gen: ProvisionalGen}
	if c.prov == nil {
		c.prov = map[uint32]provisional{}
	}
	c.prov[key] = provisional{entity: e, since: c.cfg.Now()}
	c.Stats.PredictedSpawns++
	return e, nil
}

// Provisional returns the provisional entity of key, if it still waits for
// the server's spawn.
func (c *Client) Provisional(key uint32) (arche.Entity, bool) {
	p, ok := c.prov[key]
	return p.entity, ok
}

// adopt makes the provisional entity of key the mirror m of a spawn with
// set, if there is one; it reports whether it did.
func (c *Client) adopt(m *mirror, key uint32, set uint64) bool {
	p, ok := c.prov[key]
	if !ok {
		return false
	}
	delete(c.prov, key)
	if !c.world.Alive(p.entity) {
		return false
	}
	var add, rem []arche.ID
	for s := set; s != 0; s &= s - 1 {
		if id := c.ids[bits.TrailingZeros64(s)]; !c.world.Has(p.entity, id) {
			add = append(add, id)
		}
	}
	for i, id := range c.ids {
		if set&(1<<i) == 0 && c.world.Has(p.entity, id) {
			rem = append(rem, id)
		}
	}
	if len(add)+len(rem) > 0 {
		c.world.Exchange(p.entity, add, rem)
	}
	m.entity, m.predicted = p.entity, true
	c.Stats.SpawnsAdopted++
	return true
}

// expireProvisional ends provisional entities the server did not spawn in
// time.
func (c *Client) expireProvisional(now time.Time) {
	for key, p := range c.prov {
		if now.Sub(p.since) > c.cfg.PredictedSpawnTimeout {
			c.Stats.SpawnsExpired++
			c.finishProvisional(key, p, false)
		}
	}
}

// endProvisional ends the provisional entity of key, whose twin the server
// removed before it was ever sent.
func (c *Client) endProvisional(key uint32) {
	if p, ok := c.prov[key]; ok {
		c.Stats.SpawnsEnded++
		c.finishProvisional(key, p, true)
	}
}

// finishProvisional forgets the provisional entity of key and hands it to
// the game's OnPredictedSpawnEnd, or removes it.
func (c *Client) finishProvisional(key uint32, p provisional, removed bool) {
	delete(c.prov, key)
	if !c.world.Alive(p.entity) {
		return
	}
	if c.cfg.OnPredictedSpawnEnd != nil {
		c.cfg.OnPredictedSpawnEnd(key, p.entity, removed)
		return
	}
	c.world.RemoveEntity(p.entity)
}

// dropProvisional removes every provisional entity (a reconnect).
func (c *Client) dropProvisional() {
	for key, p := range c.prov {
		if c.world.Alive(p.entity) {
			c.world.RemoveEntity(p.entity)
		}
		delete(c.prov, key)
	}
}
