package replication

import (
	arche "github.com/mlange-42/arche/ecs"

	"github.com/archenet/archenet/replication/internal/mirror"
)

// ProvisionalGen is the generation in the components.NetID of a provisional
// entity (Client.SpawnPredicted) until the server's spawn adopts it; real
// generations are below 2³¹.
const ProvisionalGen = mirror.ProvisionalGen

// ErrProvisional is wrapped by Client.SpawnPredicted's errors.
var ErrProvisional = mirror.ErrProvisional

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
	return c.mirrors.SpawnPredicted(c.link.ID(), key, c.cfg.Now(), comps...)
}

// Provisional returns the provisional entity of key, if it still waits for
// the server's spawn.
func (c *Client) Provisional(key uint32) (arche.Entity, bool) { return c.mirrors.Provisional(key) }
