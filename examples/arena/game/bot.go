package game

import (
	"errors"
	"math"
	"math/rand/v2"
	"time"

	"github.com/mlange-42/arche/ecs"

	"github.com/archenet/archenet/components"
	"github.com/archenet/archenet/input"
	"github.com/archenet/archenet/replication"
	"github.com/archenet/archenet/transport"
)

// BotOptions configures a [Bot].
type BotOptions struct {
	// Conn is the connection to the server. Required.
	Conn transport.Conn
	// Match names the match to join on a host of many matches
	// (replication.ClientConfig.Match). Empty: none.
	Match string
	// Seed seeds the scripted input.
	Seed uint64
	// Now is the clock of the replication client (interpolation). Nil:
	// time.Now. Frame's argument must come from the same clock.
	Now func() time.Time
	// Logger receives connection events (a *slog.Logger, say). Nil: the
	// client's default (replication.ClientConfig.Logger).
	Logger transport.Logger
	// Control, if set, is the player's input for an input tick (keyboard
	// and mouse of a graphical client) instead of the bot's script.
	Control func(tick uint32, s *Avatar) ShooterInput
	// NoPredictedShots shows the bot's projectiles only when the server's
	// spawn arrives (for comparison) instead of predicting them the tick
	// they are fired.
	NoPredictedShots bool
}

// BotStats are a bot's cumulative counters.
type BotStats struct {
	InputTicks  uint64 // input ticks sampled and sent
	Corrections uint64 // reconciliations that rewound and replayed
	Matches     uint64 // reconciliations that found the prediction exact
	Resets      uint64 // predictor restarts from the server's state
	MaxError    uint64 // largest correction, in quantized steps
	// MaxCorrection is the largest position change a correction made to
	// the predicted avatar, in metres (the smoother hides it).
	MaxCorrection float64
	// InputCorrections counts the corrections of states the server stepped
	// without this bot's input for their tick (it was late or lost, or the
	// bot's inputs were cut off): the input path's share of Corrections
	// (the rest are the game's: pushes, collisions).
	InputCorrections uint64
	Snapshots        uint64 // new snapshot ticks seen
	Projectiles      int    // projectile mirrors right now
	// Aimed counts the projectile mirrors right now whose Target reads as
	// an avatar's mirror (NPC shots aimed at a player).
	Aimed int
	// Interpolating counts remote entities drawn from two snapshots in the
	// last frame (the rest extrapolate or hold).
	Interpolating, Extrapolating, Holding int
	// Feed counts the hit-feed lines received; FeedResolved those whose
	// victim read as its mirror here (it always should: the feed goes to
	// the clients that see the victim); FeedOwn those about its own avatar.
	Feed, FeedResolved, FeedOwn uint64
}

// Bot is a headless client: its own arche world mirrored by a
// replication.Client with interpolation, and an avatar driven by scripted
// input through an input.Player (predicted with the server's step function,
// corrections smoothed).
type Bot struct {
	opts   BotOptions
	world  *ecs.World
	cl     *replication.Client
	player *input.Player[Avatar, ShooterInput]

	idProj, idTrans, idVel, idNetID, idAvatar, idVisual ecs.ID
	shots                                               shots
	lastNet                                             uint32          // newest snapshot tick observed
	shift                                               components.Vec3 // sum of the corrections' position changes
	maxCorr                                             float64
	rng                                                 *rand.Rand
	script                                              ShooterInput
	snapshots                                           uint64
	stats                                               BotStats
}

// NewBot creates the client world and sends the Hello.
func NewBot(opts BotOptions) (*Bot, error) {
	if opts.Conn == nil {
		return nil, errors.New("arena: BotOptions.Conn is required")
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	w := ecs.NewWorld()
	b := &Bot{opts: opts, world: &w, rng: rand.New(rand.NewPCG(opts.Seed, 0xb07))}
	b.idProj = ecs.ComponentID[Projectile](b.world)
	b.idTrans, b.idVel = ecs.ComponentID[components.Transform](b.world), ecs.ComponentID[components.Velocity](b.world)
	b.idNetID, b.idAvatar = ecs.ComponentID[components.NetID](b.world), ecs.ComponentID[Avatar](b.world)
	b.idVisual = ecs.ComponentID[components.Visual](b.world)
	b.shots = shots{seen: map[ecs.Entity]bool{}}
	var err error
	b.cl, err = replication.NewClient(b.world, opts.Conn, replication.ClientConfig{
		Registry:      newRegistry(),
		Match:         opts.Match,
		Interpolation: true, // remote avatars, NPCs, projectiles
		Now:           opts.Now,
		Logger:        opts.Logger,
	})
	if err != nil {
		return nil, err
	}
	// The own avatar (components.Predicted) is predicted, not interpolated.
	b.player, err = input.NewPlayer(b.cl, input.PlayerConfig[Avatar, ShooterInput]{
		Step:      stepAvatar,
		Sample:    b.nextInput,
		Outage:    outageInput,
		OnPredict: b.onPredict,
		Visual:    avatarVisual,
		OnCorrection: func(c input.Correction[Avatar]) {
			if c.Status == input.ReconcileCorrected {
				if c.InputMissing {
					b.stats.InputCorrections++
				}
				b.maxCorr = max(b.maxCorr, math.Hypot(c.New.X-c.Old.X, c.New.Z-c.Old.Z))
				b.shift = b.shift.Add(components.Vec3{X: c.New.X - c.Old.X, Z: c.New.Z - c.Old.Z})
			}
		},
		Now: opts.Now,
	})
	if err != nil {
		return nil, err
	}
	if b.shots.own, err = input.NewProjectiles(b.player, b.moveProjectile); err != nil {
		return nil, err
	}
	feed, err := replication.ClientMessages[HitFeed](b.cl)
	if err != nil {
		return nil, err
	}
	feed.Handle(b.onFeed)
	return b, nil
}

// onFeed counts a line of the hit feed.
func (b *Bot) onFeed(m replication.Message[HitFeed]) {
	b.stats.Feed++
	if v := m.Value.Victim.Entity; !v.IsZero() {
		b.stats.FeedResolved++
		if own, ok := b.player.Entity(); ok && own == v {
			b.stats.FeedOwn++
		}
	}
}

// World returns the client's world (mirrors, the predicted avatar with its
// smoothed components.Visual, own projectiles with their predicted
// Transform, remote entities with their interpolated Visual).
func (b *Bot) World() *ecs.World { return b.world }

// Player returns the prediction of the bot's avatar.
func (b *Bot) Player() *input.Player[Avatar, ShooterInput] { return b.player }

// Client returns the replication client.
func (b *Bot) Client() *replication.Client { return b.cl }

// Stats returns the counters.
func (b *Bot) Stats() BotStats {
	st := b.player.Stats()
	s := b.stats
	s.InputTicks, s.Corrections, s.Matches, s.Resets, s.MaxError = st.InputTicks, st.Corrections, st.Matches, st.Resets, st.MaxError
	s.MaxCorrection, s.Snapshots = b.maxCorr, b.snapshots
	return s
}

// RTT returns the transport's smoothed RTT.
func (b *Bot) RTT() time.Duration { return b.cl.RTT() }

// BytesIn returns the payload bytes received (datagrams and messages).
func (b *Bot) BytesIn() uint64 {
	st := b.opts.Conn.Stats()
	return st.DatagramBytesReceived + st.MessageBytesReceived
}

// Lead returns the input clock's lead over the server in ticks.
func (b *Bot) Lead() float64 {
	if clk := b.player.Clock(); clk != nil {
		return clk.Lead()
	}
	return 0
}

// Close closes the connection.
func (b *Bot) Close() { _ = b.opts.Conn.Close() }

// Frame runs one client frame: receive, then the player (reconcile,
// sample and predict the input ticks due, send, draw the avatar), then
// interpolation of everything else. It returns the client's error once it
// is disconnected.
func (b *Bot) Frame(time.Time) error {
	b.cl.Receive()
	if b.cl.State() == replication.StateClosed {
		err := b.cl.Err()
		if err == nil {
			err = errors.New("disconnected")
		}
		return err
	}
	if st := b.cl.ServerTick(); st != 0 && st != b.lastNet {
		b.lastNet = st
		b.snapshots++
	}
	if err := b.player.Update(); err != nil {
		return err
	}
	b.shots.own.Update()
	b.measureShots()
	b.draw()
	return nil
}

// nextInput is the scripted player: hold keys for a while, turn smoothly,
// head back to the centre near the walls; aim at the nearest other player
// as drawn and fire at it, else fire in bursts. (The input.Player sends
// what it saw with each input, for the server's lag compensation.)
func (b *Bot) nextInput(tick uint32, s *Avatar) ShooterInput {
	if b.opts.Control != nil {
		return b.opts.Control(tick, s)
	}
	if b.rng.IntN(90) == 0 {
		b.script.Keys = uint8(b.rng.IntN(16))
	}
	if b.rng.IntN(45) == 0 {
		b.script.Fire = !b.script.Fire
	}
	b.script.Yaw += (b.rng.Float64()*2 - 1) * 0.05
	if math.Abs(s.X) > arenaHalf*0.8 || math.Abs(s.Z) > arenaHalf*0.8 {
		b.script.Yaw = math.Atan2(-s.Z, -s.X)
		b.script.Keys = keyForward
	}
	in := b.script
	if yaw, ok := b.aim(s); ok {
		in.Yaw, in.Fire = yaw, true
	}
	in.Yaw = math.Remainder(in.Yaw, 2*math.Pi)
	b.script.Yaw = math.Remainder(b.script.Yaw, 2*math.Pi)
	return in
}

// draw advances the render clock and interpolates remote entities (the
// player drew the avatar).
func (b *Bot) draw() {
	b.cl.Interpolate()
	st := b.cl.InterpolationStats()
	b.stats.Interpolating, b.stats.Extrapolating, b.stats.Holding = st.Interpolating, st.Extrapolating, st.Holding
	q := b.world.Query(ecs.All(b.idProj))
	b.stats.Projectiles, b.stats.Aimed = q.Count(), 0
	for q.Next() {
		// An NPC's shot names the avatar it was aimed at: its mirror here.
		if t := (*Projectile)(q.Get(b.idProj)).Target.Entity; !t.IsZero() && b.world.Alive(t) && b.world.Has(t, b.idAvatar) {
			b.stats.Aimed++
		}
	}
}

// Poses returns the drawn position of the local avatar and its motion: the
// predicted position minus every correction so far, a path without the
// corrections' jumps. ok is false until prediction has started.
func (b *Bot) Poses() (drawn, motion components.Vec3, ok bool) {
	if _, ok := b.player.Entity(); !ok {
		return drawn, motion, false
	}
	return b.player.Visual().Pos, avatarVisual(b.player.State()).Pos.Sub(b.shift), true
}
