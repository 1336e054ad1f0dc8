package input

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"reflect"
	"time"

	arche "github.com/mlange-42/arche/ecs"

	"github.com/archenet/archenet/components"
	"github.com/archenet/archenet/ecs"
	"github.com/archenet/archenet/input/internal/frames"
	"github.com/archenet/archenet/input/internal/predict"
	"github.com/archenet/archenet/interp"
	"github.com/archenet/archenet/replication"
	"github.com/archenet/archenet/replication/bitio"
)

// PlayerConfig configures a [Player]: the game's state and input types
// (type parameters), its step function and its input sampling. Every zero
// field has a documented default.
type PlayerConfig[S, I any] struct {
	// Step is the game's step function, the same one the server's
	// [Authority] runs. Required.
	Step StepFunc[S, I]
	// Sample returns the local input for input tick tick, given the
	// predicted state before it (read keys, aim, a bot's script). Required.
	Sample func(tick uint32, state *S) I
	// Input configures the input codec; it must match the server's
	// (AuthorityConfig.Input). Zero: the defaults.
	Input Config
	// History is the predictor's history in ticks. Zero: 128.
	History int
	// Sync tunes the input clock; TickInterval defaults to the server's
	// simulation tick interval from the Welcome and Arrivals to the client's
	// server-time estimator.
	Sync SyncConfig
	// Visual, if set, maps a state to its drawn pose: the Player then keeps
	// a components.Visual on the predicted entity (adding it if missing),
	// the predicted pose with corrections smoothed away (Smoother).
	Visual func(*S) components.Visual
	// Smoother configures the correction smoothing of Visual.
	Smoother interp.SmootherConfig
	// OnCorrection, if set, sees every reconciliation that rewound or reset
	// the prediction (statistics, effects).
	OnCorrection func(Correction[S])
	// OnPredict, if set, runs after each input tick is predicted for the
	// first time (not in the replays of a reconciliation) with the state
	// before and after the step and the input: the place for predicted
	// effects of the step, such as a shot's projectile
	// (replication.Client.SpawnPredicted keyed by tick).
	OnPredict func(tick uint32, before, after *S, in *I)
	// Outage returns the input the server applies while this client's
	// inputs are cut off (more than Input.Hold ticks missing), given the
	// last input: the server's AuthorityConfig.Outage. While the Player
	// sees its inputs cut off ([Player.Stalled]: snapshots stopped, or the
	// server's input acks say it applies the outage input) it predicts and
	// sends this instead of calling Sample, so the entity goes where the
	// server takes it. Nil: the zero input.
	Outage func(last I) I
	// Now is the clock. Nil: time.Now. It must be the replication client's
	// clock (ClientConfig.Now).
	Now func() time.Time
}

// PlayerStats are a [Player]'s cumulative counters.
type PlayerStats struct {
	InputTicks  uint64 // input ticks sampled, predicted and sent
	Matches     uint64 // reconciliations that found the prediction exact
	Corrections uint64 // reconciliations that rewound and replayed
	Resets      uint64 // restarts from the server's state
	MaxError    uint64 // largest correction, in quantized steps of a field
	// OutageTicks counts input ticks predicted and sent with the outage
	// input (PlayerConfig.Outage) because the inputs were cut off, and
	// Outages the spells of them.
	OutageTicks, Outages uint64
}

// Player is the client side of a predicted entity the client owns (an
// avatar): each [Player.Update] it reconciles the prediction with the newest
// authoritative state, samples the input of the input ticks due, predicts
// them with the game's step function, sends the input (redundantly, only
// changed fields), and draws the predicted pose with corrections smoothed.
// It wires the input codec, the sender of redundant frames, a [TickSync],
// the predictor and an interp.Smoother together.
//
// The predicted entity is the client's mirror of the entity with component S
// whose owner is this client (the server's [Authority] steps it). Between
// snapshots the mirror's S holds the predicted state; the replication
// client overwrites it with the server's state when a newer one arrives,
// and the next Update reconciles against it.
//
// Run [Player.Update] (or [Player.System]) once per frame after the client's
// Receive. The Player sends the client's datagrams itself, right after it
// predicts (the input goes out with no extra delay), so a client with a
// Player needs no SendSystem. Not safe for concurrent use.
type Player[S, I any] struct {
	cfg   PlayerConfig[S, I]
	cl    *replication.Client
	world *arche.World

	codec  *frames.Codec[I]
	sender *frames.Sender[I]
	sync   *TickSync
	pred   *predict.Predictor[S, I]
	smooth interp.Smoother
	w      bitio.Writer

	idState, idNetID, idVisual arche.ID
	entity                     arche.Entity
	has                        bool
	stateTick                  uint32 // simulation tick of the newest state reconciled
	started                    bool
	lastNet                    uint32
	joinNet                    uint32 // the newest snapshot acked before the client was ready
	lastFrame                  time.Time
	drawn                      components.Visual
	before                     S // the state before a predicted step, for OnPredict (a field: no allocation)
	last                       I // the last input sampled (the outage input's basis)
	watch                      stallWatch

	stats PlayerStats
}

// NewPlayer attaches prediction of the client's own S entity to cl: it
// takes over cl's input section ([replication.Client.SetInput]) and
// observes its snapshots. S must be registered in cl's registry (the
// precision the server sends it with); I is the input type.
func NewPlayer[S, I any](cl *replication.Client, cfg PlayerConfig[S, I]) (*Player[S, I], error) {
	if cl == nil || cfg.Step == nil || cfg.Sample == nil {
		return nil, fmt.Errorf("%w: NewPlayer needs a client, Step and Sample", ErrInvalidConfig)
	}
	reg := cl.Registry()
	plan := reg.ByType(reflect.TypeFor[S]())
	if plan == nil {
		return nil, fmt.Errorf("%w: %s is not in the client's registry", ErrInvalidConfig, reflect.TypeFor[S]())
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	smooth, err := interp.NewSmoother(cfg.Smoother)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	p := &Player[S, I]{cfg: cfg, cl: cl, world: cl.World(), smooth: smooth}
	if p.codec, err = frames.New[I](frames.Config(cfg.Input)); err != nil {
		return nil, err
	}
	p.sender = frames.NewSender(p.codec)
	// Dt is set from the server's tick rate at the Welcome (see start).
	if p.pred, err = predict.New(plan, cfg.Step, predict.Config{History: cfg.History}); err != nil {
		return nil, err
	}
	p.idState = arche.TypeID(p.world, reflect.TypeFor[S]())
	p.idNetID = arche.ComponentID[components.NetID](p.world)
	if cfg.Visual != nil {
		p.idVisual = arche.ComponentID[components.Visual](p.world)
	}
	cl.SetInput(p.appendInput)
	cl.OnSnapshot(p.onSnapshot)
	cl.ExpectPredictSystem() // (the client warns if Update does not run)
	return p, nil
}

// start creates the input clock and sets the step once the server's tick
// rate is known.
func (p *Player[S, I]) start() error {
	rate := p.cl.NetRate() * p.cl.NetDivisor()
	if rate <= 0 {
		return nil
	}
	sc := p.cfg.Sync
	if sc.TickInterval == 0 {
		sc.TickInterval = time.Second / time.Duration(rate)
	}
	if sc.Arrivals == nil {
		sc.Arrivals = p.cl.Arrivals()
	}
	s, err := NewTickSync(sc)
	if err != nil {
		return err
	}
	p.sync = s
	p.pred.SetDt(1 / float64(rate)) // exactly the server's ecs.TickInfo.Dt
	p.watch = stallWatch{hold: p.codec.Hold(), tick: time.Second / time.Duration(rate),
		net: time.Second / time.Duration(p.cl.NetRate())}
	p.started = true
	return nil
}

// Update runs one client frame of prediction at the client's clock: it
// reconciles, predicts and sends the input ticks due, and draws. It returns
// an error only for an invalid SyncConfig (found when the server's rate is
// known). Call it after the client's Receive; it does nothing until the
// client is ready.
func (p *Player[S, I]) Update() error {
	now := p.cfg.Now()
	p.cl.PredictSystemRan()
	if !p.cl.Ready() {
		// Ack the snapshots while the initial world arrives: the server
		// drops a client that acknowledges none (ServerConfig.Limits.JoinTimeout),
		// and the Player sends for the client.
		if st := p.cl.ServerTick(); st != 0 && st != p.joinNet {
			p.joinNet = st
			p.cl.Send()
		}
		return nil
	}
	if !p.started {
		if err := p.start(); err != nil || !p.started {
			return err
		}
	}
	fresh := false
	if st := p.cl.ServerTick(); st != 0 && st != p.lastNet {
		p.lastNet, fresh = st, true
		r, ok := p.cl.InputReport(st)
		p.watch.snapshot(now, uint32(p.cl.SimTick(st)), r.Applied, ok)
	}
	p.sync.ObserveRTT(p.cl.RTT())
	p.reconcile()
	first, n := p.sync.Advance(now)
	if stalled := p.watch.stalled; p.watch.check(now, p.cl.RTT()) && !stalled {
		p.stats.Outages++
	}
	if p.has && p.stateTick != 0 { // predict from the server's first state
		for i := range n {
			t := first + uint32(i)
			in := p.sample(t)
			p.push(t, &in) // rounds in to what the server decodes
			if p.cfg.OnPredict != nil {
				p.before = *p.pred.State()
				p.cfg.OnPredict(t, &p.before, p.pred.Predict(t, &in), &in)
			} else {
				p.pred.Predict(t, &in)
			}
			p.stats.InputTicks++
		}
	}
	if p.has && p.stateTick != 0 {
		// The mirror shows the prediction until the next state arrives.
		*(*S)(p.world.Get(p.entity, p.idState)) = *p.pred.State()
	}
	if n > 0 || fresh {
		p.cl.Send()
	}
	p.draw(now)
	return nil
}

// push hands the input of tick t to the sender with the view lag, once the
// render clock runs: what the client saw when it acted travels with the
// input, for the server's lag compensation (Authority.ViewTick).
func (p *Player[S, I]) push(t uint32, in *I) {
	if clk := p.cl.InterpClock(); clk != nil && clk.Ready() {
		q := math.Round(p.ViewLag(t) * 4)
		p.sender.PushView(t, in, uint16(min(max(q, 0), frames.MaxViewLag)))
		return
	}
	p.sender.Push(t, in)
}

// sample returns the input of tick t: the game's, or the outage input while
// the inputs are cut off.
func (p *Player[S, I]) sample(t uint32) I {
	if p.watch.stalled {
		p.stats.OutageTicks++
		return outageInput(p.cfg.Outage, p.last)
	}
	p.last = p.cfg.Sample(t, p.pred.State())
	return p.last
}

// Stalled reports whether the Player sees its inputs cut off from the
// server (no fresh snapshot for about Input.Hold ticks, or the server says
// it applies the outage input): it then predicts and sends the outage input
// instead of sampling the game's (PlayerConfig.Outage). A game may show
// "connection interrupted".
func (p *Player[S, I]) Stalled() bool { return p.watch.stalled }

// System returns an ecs.System running [Player.Update] (errors are the
// client's logger's business: a bad SyncConfig is reported once there).
func (p *Player[S, I]) System() ecs.System { return &playerSystem[S, I]{p: p} }

type playerSystem[S, I any] struct {
	p      *Player[S, I]
	failed bool
}

func (s *playerSystem[S, I]) Initialize(*arche.World) {}
func (s *playerSystem[S, I]) Finalize(*arche.World)   {}
func (s *playerSystem[S, I]) Update(*arche.World) {
	if err := s.p.Update(); err != nil && !s.failed {
		s.failed = true
		s.p.cl.Logger().Log(context.Background(), slog.LevelError, "archenet: input.Player", "err", err)
	}
}

// appendInput is the client's input source: the newest input frames.
func (p *Player[S, I]) appendInput(dst []byte) []byte {
	p.w.Reset(p.w.Bytes()[:0])
	if p.sender.AppendFrames(&p.w) == 0 {
		return dst
	}
	return append(dst, p.w.Bytes()...)
}

// onSnapshot passes every snapshot's input feedback to the sender (frames
// the server holds need no resending) and the input clock (buffer depth).
func (p *Player[S, I]) onSnapshot(tick uint32, _ time.Time) {
	if r, ok := p.cl.InputReport(tick); ok && r.HasFeedback {
		p.sender.Ack(r.Held)
		if p.sync != nil && !p.watch.stalled {
			// (During an outage the depth measures the outage, not the
			// upstream delay the lead is built on.)
			p.sync.ObserveFeedback(r.Depth)
		}
	}
}

// find looks up the client's own S entity.
func (p *Player[S, I]) find() bool {
	if p.has && p.world.Alive(p.entity) {
		return true
	}
	p.has, p.stateTick = false, 0
	me := p.cl.ID()
	q := p.world.Query(arche.All(p.idState, p.idNetID))
	for q.Next() {
		if !p.has && (*components.NetID)(q.Get(p.idNetID)).Owner() == me {
			p.entity, p.has = q.Entity(), true
		}
	}
	return p.has
}

// reconcile compares the newest authoritative state with the prediction for
// its tick, then leaves the predicted state in the entity's S.
func (p *Player[S, I]) reconcile() {
	if !p.find() {
		return
	}
	st := (*S)(p.world.Get(p.entity, p.idState))
	// The state's tick is the snapshot that last changed the entity; that
	// snapshot's input report names the input the state includes.
	net, ok := p.cl.StateTick(*(*components.NetID)(p.world.Get(p.entity, p.idNetID)))
	if !ok || net == 0 {
		return
	}
	simTick := uint32(p.cl.SimTick(net))
	if simTick == p.stateTick {
		return
	}
	var applied uint32
	if r, ok := p.cl.InputReport(net); ok {
		applied = r.Applied
	} else if p.stateTick != 0 {
		return // that snapshot is gone from the receiver: wait for the next state
	} // else the first state: no input of ours was applied yet
	p.stateTick = simTick
	c := p.pred.Reconcile(simTick, applied, st)
	switch c.Status {
	case predict.Match:
		p.stats.Matches++
		return
	case predict.Corrected:
		p.stats.Corrections++
		p.stats.MaxError = max(p.stats.MaxError, c.MaxError)
		if p.cfg.Visual != nil {
			p.smooth.Correct(p.drawn, p.cfg.Visual(&c.New)) // keep drawing where it was; the offset decays
		}
	case predict.Reset:
		p.stats.Resets++
		p.smooth = interp.Smoother{Config: p.cfg.Smoother}
	default:
		return
	}
	if p.cfg.OnCorrection != nil {
		p.cfg.OnCorrection(correction(&c))
	}
}

// draw decays the correction offset and writes the smoothed pose.
func (p *Player[S, I]) draw(now time.Time) {
	dt := time.Duration(0)
	if !p.lastFrame.IsZero() {
		dt = now.Sub(p.lastFrame)
	}
	p.lastFrame = now
	if p.cfg.Visual == nil || !p.has || p.stateTick == 0 {
		return
	}
	p.smooth.Decay(dt)
	p.drawn = p.smooth.Apply(p.cfg.Visual(p.pred.State()))
	if !p.world.Has(p.entity, p.idVisual) {
		p.world.Add(p.entity, p.idVisual)
	}
	*(*components.Visual)(p.world.Get(p.entity, p.idVisual)) = p.drawn
}

// Entity returns the predicted entity; ok is false until the server's first
// state for it has arrived.
func (p *Player[S, I]) Entity() (e arche.Entity, ok bool) {
	return p.entity, p.has && p.stateTick != 0
}

// State returns the predicted state at [Player.Tick] (valid until the next
// Update).
func (p *Player[S, I]) State() *S { return p.pred.State() }

// PredictedAt returns a copy of the predicted state after simulation tick
// tick, while it is in the predictor's history (PlayerConfig.History): what
// the server's state at that tick should be, when the server applied this
// client's inputs. For convergence checks of a moving predicted entity
// (replicationtest.Check.PredictedAt).
func (p *Player[S, I]) PredictedAt(tick uint32) (*S, bool) {
	var s S
	if !p.pred.StateAt(tick, &s) {
		return nil, false
	}
	return &s, true
}

// Tick returns the newest predicted input tick.
func (p *Player[S, I]) Tick() uint32 { return p.pred.Tick() }

// Visual returns the drawn pose (with Visual configured).
func (p *Player[S, I]) Visual() components.Visual { return p.drawn }

// Stats returns the counters.
func (p *Player[S, I]) Stats() PlayerStats { return p.stats }

// ViewLag returns how far, in simulation ticks, the world the client draws
// ([replication.Client.DrawnTick]: its render clock, held back while its
// snapshots are late) trails input tick tick: the lag with which this
// client sees remote entities when it acts at that tick (report it with
// the input for the server's lag compensation, replication/lagcomp). 0
// before the render clock runs.
func (p *Player[S, I]) ViewLag(tick uint32) float64 {
	drawn, ok := p.cl.DrawnTick()
	if !ok {
		return 0
	}
	return math.Remainder(float64(tick)-drawn*float64(p.cl.NetDivisor()), 1<<32)
}

// Clock returns the input clock (nil before the Welcome): lead, jitter.
func (p *Player[S, I]) Clock() *TickSync { return p.sync }
