package main

import (
	"errors"
	"log/slog"
	"math"
	"math/rand/v2"
	"time"

	"github.com/mlange-42/arche/ecs"

	"github.com/archenet/archenet/components"
	"github.com/archenet/archenet/input"
	"github.com/archenet/archenet/interp"
	"github.com/archenet/archenet/replication"
	"github.com/archenet/archenet/replication/bitio"
	"github.com/archenet/archenet/transport"
)

// BotOptions configures a [Bot].
type BotOptions struct {
	// Conn is the connection to the server. Required.
	Conn transport.Conn
	// Seed seeds the scripted input.
	Seed uint64
	// Now is the clock of the replication client (interpolation). Nil:
	// time.Now. Frame's argument must come from the same clock.
	Now func() time.Time
	// Logger receives connection events. Nil: slog.Default().
	Logger *slog.Logger
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
	Snapshots     uint64 // new snapshot ticks seen
	Projectiles   int    // projectile mirrors right now
	// Interpolating counts remote entities drawn from two snapshots in the
	// last frame (the rest extrapolate or hold).
	Interpolating, Extrapolating, Holding int
}

// Bot is a headless client: its own arche world mirrored by a
// replication.Client with interpolation, an avatar driven by scripted input
// and predicted with the server's step function, and corrections smoothed.
type Bot struct {
	opts  BotOptions
	world *ecs.World
	cl    *replication.Client

	codec  *input.Codec[ShooterInput]
	sender *input.Sender[ShooterInput]
	sync   *input.TickSync
	pred   *input.Predictor[Avatar, ShooterInput]
	smooth interp.Smoother
	isys   *interp.System
	w      bitio.Writer

	idAvatar, idVisual, idProj, idNetID ecs.ID
	avatar                              ecs.Entity
	hasAvatar                           bool
	lastState                           uint32 // simulation tick of the newest avatar state reconciled
	lastNet                             uint32 // newest snapshot tick observed
	lastFrame                           time.Time
	drawn                               components.Visual
	shift                               components.Vec3 // sum of the corrections' position changes

	rng    *rand.Rand
	script ShooterInput
	stats  BotStats
}

// NewBot creates the client world and sends the Hello.
func NewBot(opts BotOptions) (*Bot, error) {
	if opts.Conn == nil {
		return nil, errors.New("arena: BotOptions.Conn is required")
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	w := ecs.NewWorld()
	b := &Bot{opts: opts, world: &w, rng: rand.New(rand.NewPCG(opts.Seed, 0xb07))}
	b.idAvatar = ecs.ComponentID[Avatar](b.world)
	b.idVisual = ecs.ComponentID[components.Visual](b.world)
	b.idProj = ecs.ComponentID[Projectile](b.world)
	b.idNetID = ecs.ComponentID[components.NetID](b.world)

	reg := newRegistry()
	var err error
	if b.codec, err = input.NewCodec[ShooterInput](input.Config{}); err != nil {
		return nil, err
	}
	b.sender = input.NewSender(b.codec)
	if b.pred, err = input.NewPredictor(reg.ByType(typeOf[Avatar]()), stepAvatar, input.PredictorConfig{Dt: simDt}); err != nil {
		return nil, err
	}
	b.cl, err = replication.NewClient(b.world, opts.Conn, replication.ClientConfig{
		Registry:      reg,
		Interpolation: true,
		Input:         b.appendInput,
		OnSnapshot:    b.onSnapshot,
		Now:           opts.Now,
		Logger:        opts.Logger,
	})
	if err != nil {
		return nil, err
	}
	// The input clock reads the client's server-time estimator, which the
	// render clock reads too: one estimate of the server's time.
	if b.sync, err = input.NewTickSync(input.SyncConfig{TickInterval: time.Second / simRate, Arrivals: b.cl.Arrivals()}); err != nil {
		return nil, err
	}
	return b, nil
}

// Client returns the replication client.
func (b *Bot) Client() *replication.Client { return b.cl }

// Stats returns the counters.
func (b *Bot) Stats() BotStats { return b.stats }

// RTT returns the transport's smoothed RTT.
func (b *Bot) RTT() time.Duration { return b.opts.Conn.Stats().RTT }

// BytesIn returns the payload bytes received (datagrams and messages).
func (b *Bot) BytesIn() uint64 {
	st := b.opts.Conn.Stats()
	return st.DatagramBytesReceived + st.MessageBytesReceived
}

// Lead returns the input clock's lead over the server in ticks.
func (b *Bot) Lead() float64 { return b.sync.Lead() }

// Close closes the connection.
func (b *Bot) Close() { _ = b.opts.Conn.Close() }

// Frame runs one client frame at local time now: receive, reconcile, sample
// and predict the input ticks due, send, interpolate and draw. It returns
// the client's error once it is disconnected.
func (b *Bot) Frame(now time.Time) error {
	b.cl.Receive()
	if b.cl.State() == replication.StateClosed {
		err := b.cl.Err()
		if err == nil {
			err = errors.New("disconnected")
		}
		return err
	}
	fresh := false
	if st := b.cl.ServerTick(); st != 0 && st != b.lastNet {
		b.lastNet, fresh = st, true
		b.stats.Snapshots++
	}
	b.sync.ObserveRTT(b.RTT())
	if b.cl.Ready() {
		b.reconcile()
	}

	first, n := b.sync.Advance(now)
	if b.hasAvatar && b.lastState != 0 { // predicting from the server's first state
		for i := 0; i < n; i++ {
			t := first + uint32(i)
			in := b.nextInput()
			b.sender.Push(t, &in) // rounds in to what the server decodes
			b.pred.Predict(t, &in)
			b.stats.InputTicks++
		}
	}
	if n > 0 || fresh {
		b.cl.Send()
	}
	b.draw(now)
	return nil
}

// appendInput is ClientConfig.Input: the newest input frames.
func (b *Bot) appendInput(dst []byte) []byte {
	b.w.Reset(b.w.Bytes()[:0])
	if b.sender.AppendFrames(&b.w) == 0 {
		return dst
	}
	return append(dst, b.w.Bytes()...)
}

// findAvatar looks up this client's avatar mirror.
func (b *Bot) findAvatar() bool {
	if b.hasAvatar && b.world.Alive(b.avatar) {
		return true
	}
	b.hasAvatar = false
	q := b.world.Query(ecs.All(b.idAvatar, b.idNetID))
	for q.Next() {
		if (*components.NetID)(q.Get(b.idNetID)).Owner() == b.cl.ID() {
			b.avatar, b.hasAvatar = q.Entity(), true
		}
	}
	return b.hasAvatar
}

// onSnapshot is ClientConfig.OnSnapshot: every snapshot's input feedback
// goes to the input clock (the server's input buffer depth) and the sender
// (frames the server holds need no resending). (Arrival times reach the
// input clock through the client's shared estimator.)
func (b *Bot) onSnapshot(tick uint32, _ time.Time) {
	if r, ok := b.cl.InputReport(tick); ok && r.HasFeedback {
		b.sender.Ack(r.Held)
		b.sync.ObserveFeedback(r.Depth)
	}
}

// reconcile compares the newest authoritative avatar state with the
// prediction for its tick.
func (b *Bot) reconcile() {
	if !b.findAvatar() {
		return
	}
	// The state's tick is the snapshot that last changed the avatar; that
	// snapshot's input report names the input the state includes.
	S, ok := b.cl.StateTick(*(*components.NetID)(b.world.Get(b.avatar, b.idNetID)))
	if !ok || S == 0 {
		return
	}
	simTick := uint32(b.cl.SimTick(S))
	if simTick == b.lastState {
		return
	}
	var applied uint32
	if r, ok := b.cl.InputReport(S); ok {
		applied = r.Applied
	} else if b.lastState != 0 {
		return // that snapshot is gone from the receiver: wait for the next state
	} // else the first state: no input of ours was applied yet
	b.lastState = simTick
	auth := *(*Avatar)(b.world.Get(b.avatar, b.idAvatar))
	c := b.pred.Reconcile(simTick, applied, &auth)
	switch c.Status {
	case input.ReconcileMatch:
		b.stats.Matches++
	case input.ReconcileCorrected:
		b.stats.Corrections++
		b.stats.MaxError = max(b.stats.MaxError, c.MaxError)
		b.stats.MaxCorrection = max(b.stats.MaxCorrection, math.Hypot(c.New.X-c.Old.X, c.New.Z-c.Old.Z))
		b.shift = b.shift.Add(components.Vec3{X: c.New.X - c.Old.X, Z: c.New.Z - c.Old.Z})
		// Keep drawing where the avatar was; the offset decays.
		b.smooth.Correct(b.drawn, avatarVisual(&c.New))
	case input.ReconcileReset:
		b.stats.Resets++
		b.smooth = interp.Smoother{}
	}
}

// nextInput is the scripted player: hold keys for a while, turn smoothly,
// head back to the centre near the walls, fire in bursts.
func (b *Bot) nextInput() ShooterInput {
	s := b.pred.State()
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
	b.script.Yaw = math.Remainder(b.script.Yaw, 2*math.Pi)
	return b.script
}

// draw advances the render clock, interpolates remote entities, and draws
// the predicted avatar with the correction smoother.
func (b *Bot) draw(now time.Time) {
	dt := time.Duration(0)
	if !b.lastFrame.IsZero() {
		dt = now.Sub(b.lastFrame)
	}
	b.lastFrame = now
	if clk := b.cl.InterpClock(); clk != nil {
		if b.isys == nil {
			b.isys = interp.NewSystem(clk, 0)
			b.isys.Initialize(b.world)
		}
		clk.Advance(now)
		b.isys.Update(b.world)
		st := b.isys.Stats()
		b.stats.Interpolating, b.stats.Extrapolating, b.stats.Holding = st.Interpolating, st.Extrapolating, st.Holding
	}
	q := b.world.Query(ecs.All(b.idProj))
	b.stats.Projectiles = q.Count()
	q.Close()
	if !b.findAvatar() || b.lastState == 0 {
		return
	}
	// The interpolation system also drew the avatar (the client gives every
	// mirror with a Transform a buffer); the predicted pose replaces it.
	b.smooth.Decay(dt)
	b.drawn = b.smooth.Apply(avatarVisual(b.pred.State()))
	*(*components.Visual)(b.world.Get(b.avatar, b.idVisual)) = b.drawn
}

// Poses returns the drawn position of the local avatar and its motion: the
// predicted position minus every correction so far, a path without the
// corrections' jumps. ok is false until prediction has started.
func (b *Bot) Poses() (drawn, motion components.Vec3, ok bool) {
	if !b.hasAvatar || b.lastState == 0 {
		return drawn, motion, false
	}
	return b.drawn.Pos, avatarVisual(b.pred.State()).Pos.Sub(b.shift), true
}
