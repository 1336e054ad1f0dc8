package replication

import (
	"errors"
	"fmt"

	arche "github.com/mlange-42/arche/ecs"

	"github.com/archenet/archenet/components"
	"github.com/archenet/archenet/replication/internal/slots"
)

// Errors of [Server.PredictedSpawn].
var (
	// ErrSpawnAllowance: the owner already has ServerConfig.MaxPredictedSpawns
	// keyed entities alive (a client cannot make the server hold more).
	ErrSpawnAllowance = errors.New("replication: predicted-spawn allowance exhausted")
	// ErrSpawnKey: the entity is not a replicated entity owned by a client,
	// or the owner already has an entity with this key.
	ErrSpawnKey = errors.New("replication: bad predicted spawn")
)

// DefaultMaxPredictedSpawns is the default of
// ServerConfig.MaxPredictedSpawns and ClientConfig.MaxPredictedSpawns.
const DefaultMaxPredictedSpawns = 64

// spawnKeys is the server's record of predicted spawns: the key of each
// keyed entity (pending until its slot is allocated at the next Send) and
// the count each owner holds.
type spawnKeys struct {
	pending map[arche.Entity]slots.Key // created this tick, no slot yet
	keys    map[slots.Key]struct{}     // keys alive, per owner
	count   [256]int
	// ended are, per owner, the keys whose entity the game removed before
	// it had a slot (before the Send after its creation): the owner is
	// told this tick, so its provisional entity ends at once instead of
	// timing out.
	ended [256][]uint32
	owing []ClientID // owners with ended keys
}

// PredictedSpawn marks e — an entity the game just created because client
// owner's input said so (its projectile) — as the authoritative twin of the
// entity that client predicted with the same key (Client.SpawnPredicted):
// the owner's client adopts its provisional entity as e's mirror instead of
// creating a second one; other clients see an ordinary spawn. The key is
// the game's, derived on both sides from the input (e.g. the input tick
// that fired), so a client cannot choose it for the server.
//
// e must be alive with components.Replicated and a components.Owner naming
// a client; each owner may hold at most ServerConfig.MaxPredictedSpawns
// keyed entities alive, and keys must be unique among them — beyond that
// PredictedSpawn fails ([ErrSpawnAllowance], [ErrSpawnKey]) and the game
// should not create the entity (the client's provisional one then expires).
func (s *Server) PredictedSpawn(e arche.Entity, key uint32) error {
	if !s.world.Alive(e) || !s.world.Has(e, s.ids.rep) || !s.world.Has(e, s.ids.owner) {
		return fmt.Errorf("%w: entity without Replicated and Owner", ErrSpawnKey)
	}
	owner := (*components.Owner)(s.world.Get(e, s.ids.owner)).Client
	if owner == 0 {
		return fmt.Errorf("%w: owner 0 is the server", ErrSpawnKey)
	}
	sk := &s.spawnKeys
	if sk.count[owner] >= s.cfg.MaxPredictedSpawns {
		return fmt.Errorf("%w: client %d holds %d", ErrSpawnAllowance, owner, sk.count[owner])
	}
	k := slots.Key{Owner: owner, Key: key}
	if _, dup := sk.keys[k]; dup {
		return fmt.Errorf("%w: client %d already has key %d", ErrSpawnKey, owner, key)
	}
	if _, again := sk.pending[e]; again {
		return fmt.Errorf("%w: entity already keyed", ErrSpawnKey)
	}
	if slot, ok := s.slots.Of(e); ok && s.slots.Infos[slot].Keyed {
		return fmt.Errorf("%w: entity already keyed", ErrSpawnKey)
	}
	if sk.pending == nil {
		sk.pending, sk.keys = map[arche.Entity]slots.Key{}, map[slots.Key]struct{}{}
	}
	sk.pending[e] = k
	sk.keys[k] = struct{}{}
	sk.count[owner]++
	s.Stats.PredictedSpawns++
	return nil
}

// takeKeys moves each pending key to the slot just allocated for e; the
// key of an entity that died before its slot is forgotten, and its owner
// told this tick (endedKeys).
func (s *Server) takeKeys() {
	sk := &s.spawnKeys
	for e, k := range sk.pending {
		slot, ok := s.slots.Of(e)
		if !ok || !s.slots.Infos[slot].Alive {
			s.forgetKey(k)
			if len(sk.ended[k.Owner]) == 0 {
				sk.owing = append(sk.owing, k.Owner)
			}
			sk.ended[k.Owner] = append(sk.ended[k.Owner], k.Key)
			continue
		}
		s.slots.Infos[slot].Keyed, s.slots.Infos[slot].Key = true, k
	}
	clear(sk.pending)
}

// endedKeys returns the keys client id is to be told ended this tick.
func (s *Server) endedKeys(id ClientID) []uint32 { return s.spawnKeys.ended[id] }

// clearEndedKeys forgets the keys told this tick (after the flush).
func (s *Server) clearEndedKeys() {
	sk := &s.spawnKeys
	for _, o := range sk.owing {
		sk.ended[o] = sk.ended[o][:0]
	}
	sk.owing = sk.owing[:0]
}

// forgetKey releases a key (its entity is gone).
func (s *Server) forgetKey(k slots.Key) {
	sk := &s.spawnKeys
	if _, ok := sk.keys[k]; ok {
		delete(sk.keys, k)
		sk.count[k.Owner]--
	}
}
