package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/archenet/archenet/examples/arena/game"
	"github.com/archenet/archenet/transport/sim"
)

// The arena over a 100 ms RTT link, with and without predicted shots and
// lag compensation: a shot appears on its shooter's screen the frame it is
// fired (without: a round trip and more later), and more shots aimed at
// other players as drawn hit.
func TestArenaPredictedShotsAndLagCompensation(t *testing.T) {
	oneWay := sim.Conditions{Latency: 50 * time.Millisecond, Jitter: 5 * time.Millisecond}
	link := sim.Link{Up: oneWay, Down: oneWay}
	type result struct {
		latency         time.Duration
		shots, hits     uint64
		measured        int
		adopted, lost   uint64
		claims, clamped uint64
		maxClaim, bound time.Duration
	}
	play := func(off bool) result {
		s := newSimArenaWith(t, 7, 4, link, game.ServerOptions{NoLagCompensation: off}, game.BotOptions{NoPredictedShots: off})
		s.run(20 * time.Second)
		var r result
		var sum time.Duration
		for _, b := range s.arena.Bots {
			l, n := b.SpawnLatency()
			sum += l * time.Duration(n)
			r.measured += n
			r.adopted += b.Client().Stats.SpawnsAdopted
			r.lost += b.Client().Stats.SpawnsExpired
		}
		if r.measured > 0 {
			r.latency = sum / time.Duration(r.measured)
		}
		gs := s.arena.Server.Stats()
		r.shots, r.hits = gs.PlayerShots, gs.PlayerHits
		for _, b := range s.arena.Bots {
			rs := s.arena.Server.Rewinds().Stats(b.Client().ID())
			r.claims, r.clamped = r.claims+rs.Claims, r.clamped+rs.Clamped
			r.maxClaim, r.bound = max(r.maxClaim, rs.MaxClaim), max(r.bound, rs.LastBound)
		}
		checkPrediction(t, s)
		return r
	}
	before, after := play(true), play(false)
	for _, c := range []struct {
		name string
		r    result
	}{{"before (server spawns, no compensation)", before}, {"after (predicted, compensated)", after}} {
		t.Logf("%s: spawn latency on the shooter %v over %d shots; player shots %d, hits %d (%.1f%%); adopted %d, expired %d",
			c.name, c.r.latency, c.r.measured, c.r.shots, c.r.hits, 100*float64(c.r.hits)/float64(c.r.shots), c.r.adopted, c.r.lost)
	}
	require.Greater(t, before.measured, 50)
	require.Greater(t, before.latency, 100*time.Millisecond, "a round trip at least")
	require.Zero(t, after.latency, "on screen the frame it is fired")
	require.Greater(t, after.adopted, uint64(after.measured*9/10), "the server's spawns adopt the predicted ones")
	require.Greater(t, float64(after.hits)/float64(after.shots), float64(before.hits)/float64(before.shots), "aimed shots hit more often")
	// The bots' claims of view lag are honest: within the bounds the server
	// measured for them.
	t.Logf("view-lag claims %d, clamped %d; longest claim %v, bound %v", after.claims, after.clamped, after.maxClaim, after.bound)
	require.Equal(t, after.shots, after.claims)
	require.Zero(t, after.clamped)
}
