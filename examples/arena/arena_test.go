package main

import (
	"bytes"
	"io"
	"log/slog"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/archenet/archenet/components"
	"github.com/archenet/archenet/examples/arena/game"
	"github.com/archenet/archenet/transport/sim"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// simArena is the game over transport/sim with a simulated clock: every
// run with the same seed delivers the same packets at the same times.
type simArena struct {
	t     *testing.T
	net   *sim.Network
	arena *Arena
	now   time.Time
	// statuses holds one status per simulated second.
	statuses   []Status
	nextStatus time.Time
	// maxProjectiles is the most projectile mirrors any bot held at once.
	maxProjectiles int
	// interpolating is the most remote entities drawn by interpolation in
	// one bot frame.
	interpolating int
	// aimed is the most shots whose target a bot read as an avatar's
	// mirror in one frame.
	aimed int
	// maxJump is the largest visual discontinuity of a bot's avatar: how
	// much the drawn position's step in one frame differs from the step of
	// its motion without corrections. Zero except while a smoothed
	// correction decays; a snapped correction would show its whole size.
	maxJump float64
	poses   map[*game.Bot][2]components.Vec3
}

func newSimArena(t *testing.T, seed int64, bots int, link sim.Link, interest float64) *simArena {
	return newSimArenaWith(t, seed, bots, link, game.ServerOptions{Interest: interest}, game.BotOptions{})
}

// newSimArenaWith is newSimArena with server and bot options (Listener,
// Conn, Seed, Now and Logger are the rig's).
func newSimArenaWith(t *testing.T, seed int64, bots int, link sim.Link, so game.ServerOptions, bo game.BotOptions) *simArena {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	s := &simArena{t: t, net: sim.NewNetwork(seed, start), now: start, nextStatus: start.Add(time.Second), poses: map[*game.Bot][2]components.Vec3{}}
	so.Listener, so.NPCs, so.Seed, so.Now, so.Logger = s.net.Listen("arena"), 24, uint64(seed), s.net.Now, quiet
	srv, err := game.NewServerGame(so)
	require.NoError(t, err)
	s.arena = &Arena{Server: srv, ReadyTimeout: time.Second}
	for i := 0; i < bots; i++ {
		conn, err := s.net.Dial("arena", link)
		require.NoError(t, err)
		bo.Conn, bo.Seed, bo.Now, bo.Logger = conn, uint64(seed)*100+uint64(i), s.net.Now, quiet
		b, err := game.NewBot(bo)
		require.NoError(t, err)
		s.arena.Bots = append(s.arena.Bots, b)
	}
	t.Cleanup(func() {
		for _, b := range s.arena.Bots {
			b.Close()
		}
		srv.Close()
	})
	return s
}

// simFrame is the simulated frame period: a 120 Hz client frame rate, two
// frames per 60 Hz server tick.
const simFrame = time.Second / 120

// run advances simulated time by d in frames, recording a status line per
// simulated second.
func (s *simArena) run(d time.Duration) {
	s.t.Helper()
	end := s.now.Add(d)
	for s.now.Before(end) {
		s.now = s.now.Add(simFrame)
		s.net.AdvanceTo(s.now)
		require.NoError(s.t, s.arena.Frame(s.now))
		for _, b := range s.arena.Bots {
			if drawn, motion, ok := b.Poses(); ok {
				if last, seen := s.poses[b]; seen {
					s.maxJump = max(s.maxJump, drawn.Sub(last[0]).Sub(motion.Sub(last[1])).Len())
				}
				s.poses[b] = [2]components.Vec3{drawn, motion}
			}
			st := b.Stats()
			s.maxProjectiles = max(s.maxProjectiles, st.Projectiles)
			s.interpolating = max(s.interpolating, st.Interpolating)
			s.aimed = max(s.aimed, st.Aimed)
		}
		if !s.now.Before(s.nextStatus) {
			s.statuses = append(s.statuses, s.arena.Status(s.now))
			s.nextStatus = s.nextStatus.Add(time.Second)
		}
	}
}

// checkPrediction asserts that every bot's corrections are explained: a
// prediction can only be wrong after the server pushed the avatar (a hit)
// or applied an input the client did not send (a missing frame).
func checkPrediction(t *testing.T, s *simArena) (corrections, explained uint64) {
	t.Helper()
	for i, b := range s.arena.Bots {
		st := b.Stats()
		id := b.Client().ID()
		in, ok := s.arena.Server.InputStats(id)
		require.True(t, ok, "bot %d has no input log", i)
		pushes := s.arena.Server.Pushes(id)
		t.Logf("bot %d (client %d): %d matches, %d corrections (max %d steps), %d resets; server: %d pushes, %d inputs received, %d missing, %d late; lead %.1f ticks",
			i, id, st.Matches, st.Corrections, st.MaxError, st.Resets, pushes, in.Received, in.Missing, in.Late, b.Lead())
		require.Greater(t, st.Matches, uint64(200), "bot %d: the avatar is predicted", i)
		require.LessOrEqual(t, st.Corrections, pushes+in.Missing+1, "bot %d: unexplained corrections", i)
		require.Equal(t, uint64(1), st.Resets, "bot %d: the predictor restarts only at the first state", i)
		corrections += st.Corrections
		explained += pushes + in.Missing
	}
	return corrections, explained
}

// checkSmoothing asserts that corrections were hidden: the drawn avatar
// never jumps by more than a small fraction of the largest correction.
func checkSmoothing(t *testing.T, s *simArena) {
	t.Helper()
	var largest float64
	for _, b := range s.arena.Bots {
		largest = max(largest, b.Stats().MaxCorrection)
	}
	t.Logf("largest correction %.3f m; largest visual discontinuity %.4f m per frame", largest, s.maxJump)
	require.Greater(t, largest, 0.01, "some correction moved the avatar")
	require.Less(t, s.maxJump, largest/10)
}

// TestArenaPerfectLink plays 15 simulated seconds with three bots on a
// perfect link: clients join, avatars are predicted exactly except after
// hits, projectiles come and go on the clients, and the figures are sane.
func TestArenaPerfectLink(t *testing.T) {
	s := newSimArena(t, 1, 3, sim.Link{}, 0)
	s.run(time.Second)
	for i, b := range s.arena.Bots {
		require.True(t, b.Client().Ready(), "bot %d not ready: %v", i, b.Client().Err())
		_, _, ok := b.Poses()
		require.True(t, ok, "bot %d does not predict its avatar", i)
	}
	s.run(14 * time.Second)

	corrections, _ := checkPrediction(t, s)
	srv := s.arena.Server
	require.Equal(t, uint64(15*game.SimRate), srv.Tick())
	gs := srv.Stats()
	require.Greater(t, gs.ProjectilesSpawned, uint64(200), "NPCs and avatars fire")
	require.Greater(t, gs.ProjectilesGone, gs.ProjectilesSpawned-100, "projectiles expire")
	require.Zero(t, gs.InputMissing, "perfect link: every input tick arrives")
	require.Zero(t, gs.InputRejected)
	require.Greater(t, gs.Hits, uint64(0), "some shots hit avatars (the only corrections here)")
	require.LessOrEqual(t, corrections, gs.Hits, "perfect link: only hits need a correction")
	require.Greater(t, corrections, uint64(0))
	checkSmoothing(t, s)

	for i, b := range s.arena.Bots {
		cs := b.Client().Stats
		require.Greater(t, cs.Spawns, gs.ProjectilesSpawned/2, "bot %d sees projectiles spawn", i)
		require.Greater(t, cs.Despawns, gs.ProjectilesGone/2, "bot %d sees projectiles despawn", i)
		require.InDelta(t, srv.Entities(), b.Client().Mirrors(), 6, "bot %d mirrors the world", i)
	}
	require.Greater(t, s.maxProjectiles, 5)
	require.Greater(t, s.interpolating, 20, "remote entities are interpolated")

	// The hit feed: one line per hit, to the bots that see the victim (all
	// of them here), each naming the victim's mirror; the victim's own bot
	// reads it as its own avatar.
	require.Equal(t, gs.Hits, gs.FeedLines)
	var own uint64
	for i, b := range s.arena.Bots {
		st := b.Stats()
		require.InDelta(t, gs.FeedLines, st.Feed, 1, "bot %d: every line of the feed", i)
		require.Equal(t, st.Feed, st.FeedResolved, "bot %d: each names the victim's mirror", i)
		own += st.FeedOwn
	}
	require.InDelta(t, gs.FeedLines, own, 1, "each victim's bot reads its own avatar")
	// NPC shots name the avatar they were aimed at, which the bots read as
	// its mirror.
	require.Positive(t, gs.Aimed)
	require.Positive(t, s.aimed, "bots saw shots naming an avatar's mirror")

	// One status per simulated second; skip the first (joining).
	require.Len(t, s.statuses, 15)
	for _, st := range s.statuses[1:] {
		require.Equal(t, 3, st.Clients)
		require.Greater(t, st.Down, 2.0, "KB/s per client")
		require.Less(t, st.Down, 64.0, "KB/s per client, under the default cap")
		require.Greater(t, st.Entities, 30)
		require.False(t, math.IsNaN(st.CorrRate))
		require.Less(t, st.CorrRate, 2.0)
	}
	sum := s.arena.Summary(s.now)
	t.Logf("status: %v", s.statuses[len(s.statuses)-1])
	t.Logf("%v", sum)
	require.Equal(t, 3, sum.Clients)
	require.InDelta(t, 60, sum.TickRate, 1)
	require.InDelta(t, 15*game.SimRate, float64(sum.Ticks), 2)
	require.Greater(t, sum.Down, 2.0)
	require.Less(t, sum.CorrRate, 0.5)
	require.Equal(t, gs.InputReceived, sum.InputReceived)
	require.Greater(t, sum.InputReceived, uint64(3*14*game.SimRate), "inputs of ~14 s from three players")
	require.Contains(t, sum.String(), "summary: 15.0 s")
}

// TestArenaLossyLink: 50 ms RTT, jitter and 20% loss in both directions.
// Input redundancy keeps nearly every input tick arriving; every
// correction is still explained by a hit or a missing input.
func TestArenaLossyLink(t *testing.T) {
	cond := sim.Conditions{Latency: 25 * time.Millisecond, Jitter: 8 * time.Millisecond, Loss: 0.2}
	s := newSimArena(t, 2, 2, sim.Link{Up: cond, Down: cond}, 0)
	s.run(12 * time.Second)
	corrections, explained := checkPrediction(t, s)
	gs := s.arena.Server.Stats()
	t.Logf("corrections %d, hits+missing %d, input received %d missing %d", corrections, explained, gs.InputReceived, gs.InputMissing)
	require.Less(t, float64(gs.InputMissing), 0.01*float64(gs.InputReceived))
	for i, b := range s.arena.Bots {
		require.Greater(t, b.Client().Stats.Despawns, uint64(100), "bot %d sees projectiles despawn", i)
	}
	checkSmoothing(t, s)
	sum := s.arena.Summary(s.now)
	t.Logf("%v", sum)
	require.InDelta(t, 50, float64(sum.RTT.Milliseconds()), 25)
}

// TestArenaInterest: with a 15 m interest radius each bot mirrors only
// its neighbourhood and receives fewer bytes; prediction is unaffected.
func TestArenaInterest(t *testing.T) {
	full := newSimArena(t, 4, 3, sim.Link{}, 0)
	full.run(8 * time.Second)
	near := newSimArena(t, 4, 3, sim.Link{}, 15)
	near.run(8 * time.Second)
	checkPrediction(t, near)
	entities := near.arena.Server.Entities()
	for i, b := range near.arena.Bots {
		require.Less(t, b.Client().Mirrors(), entities/2, "bot %d mirrors only what is near", i)
		require.Greater(t, b.Client().Mirrors(), 0)
	}
	fs, ns := full.arena.Summary(full.now), near.arena.Summary(near.now)
	t.Logf("down per client: %.2f KB/s with every entity, %.2f KB/s within 15 m", fs.Down, ns.Down)
	require.Less(t, ns.Down, fs.Down/2)
}

// TestBotNotReadyIsFatal: a bot that cannot join fails the frame.
func TestBotNotReadyIsFatal(t *testing.T) {
	s := newSimArena(t, 3, 1, sim.Link{}, 0)
	s.arena.Server = nil // the server never runs: the Hello is never answered
	var err error
	for i := 0; i < 240 && err == nil; i++ {
		s.now = s.now.Add(simFrame)
		s.net.AdvanceTo(s.now)
		err = s.arena.Frame(s.now)
	}
	require.ErrorContains(t, err, "not connected after 1s")
}

// TestStatusLine checks the status line format of the issue.
func TestStatusLine(t *testing.T) {
	st := Status{Tick: 600, Clients: 3, Down: 4.2, RTT: 400 * time.Microsecond, CorrRate: 0, Entities: 57}
	require.Equal(t, "tick 600 clients 3 down 4.2 KB/s/client rtt 0.4 ms corrections 0.0/s entities 57", st.String())
	st.CorrRate = math.NaN()
	require.Contains(t, st.String(), "corrections - entities")
}

// TestRunOverQUIC runs the command itself: server and two bots over QUIC
// on loopback for two seconds of wall time.
func TestRunOverQUIC(t *testing.T) {
	if testing.Short() {
		t.Skip("real time")
	}
	var out, errb bytes.Buffer
	code := run([]string{"-duration", "2500ms", "-clients", "2"}, &out, &errb)
	t.Logf("stdout:\n%s\nstderr:\n%s", out.String(), errb.String())
	require.Equal(t, 0, code)
	lines := strings.Split(out.String(), "\n")
	status := 0
	for _, l := range lines {
		if strings.HasPrefix(l, "tick ") {
			status++
			require.Contains(t, l, "clients ")
		}
	}
	require.GreaterOrEqual(t, status, 2, "a status line per second")
	require.Contains(t, out.String(), "summary: ")
	require.Contains(t, out.String(), "2 clients")
	require.Regexp(t, `inputs +\d+ ticks received`, out.String())
}

// TestRunBadFlags: flag errors exit non-zero.
func TestRunBadFlags(t *testing.T) {
	var out, errb bytes.Buffer
	require.Equal(t, 2, run([]string{"-mode", "peer"}, &out, &errb))
	require.Contains(t, errb.String(), "-mode")
	errb.Reset()
	require.Equal(t, 2, run([]string{"-agones", "-mode", "both"}, &out, &errb))
	require.Contains(t, errb.String(), "-agones runs a server")
}
