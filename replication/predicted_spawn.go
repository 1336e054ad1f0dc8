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
	// ErrSpawnAllowance: the owner already has ServerConfig.Limits.MaxPredictedSpawns
	// keyed entities alive (a client cannot make the server hold more).
	ErrSpawnAllowance = errors.New("replication: predicted-spawn allowance exhausted")
	// ErrSpawnKey: the entity is not a replicated entity owned by a client,
	// or the owner already has an entity with this key.
	ErrSpawnKey = errors.New("replication: bad predicted spawn")
)

// DefaultMaxPredictedSpawns is the default of
// ServerConfig.Limits.MaxPredictedSpawns and ClientConfig.MaxPredictedSpawns.
const DefaultMaxPredictedSpawns = 64

// PredictedSpawn marks e — an entity the game just created because client
// owner's input said so (its projectile) — as the authoritative twin of the
// entity that client predicted with the same key (Client.SpawnPredicted):
// the owner's client adopts its provisional entity as e's mirror instead of
// creating a second one; other clients see an ordinary spawn. The key is
// the game's, derived on both sides from the input (e.g. the input tick
// that fired), so a client cannot choose it for the server.
//
// e must be alive with components.Replicated and a components.Owner naming
// a client; each owner may hold at most ServerConfig.Limits.MaxPredictedSpawns
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
	keys := &s.slots.Keys
	if n := keys.Count(owner); n >= s.cfg.Limits.MaxPredictedSpawns {
		return fmt.Errorf("%w: client %d holds %d", ErrSpawnAllowance, owner, n)
	}
	k := slots.Key{Owner: owner, Key: key}
	if keys.Alive(k) {
		return fmt.Errorf("%w: client %d already has key %d", ErrSpawnKey, owner, key)
	}
	if keys.Pending(e) {
		return fmt.Errorf("%w: entity already keyed", ErrSpawnKey)
	}
	if slot, ok := s.slots.Of(e); ok && s.slots.Infos[slot].Keyed {
		return fmt.Errorf("%w: entity already keyed", ErrSpawnKey)
	}
	keys.Add(e, k)
	s.Stats.PredictedSpawns++
	return nil
}
