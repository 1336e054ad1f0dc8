package input

import (
	"errors"
	"fmt"
	"reflect"
	"time"

	arche "github.com/mlange-42/arche/ecs"
	"github.com/mlange-42/arche/generic"

	"github.com/archenet/archenet/components"
	"github.com/archenet/archenet/ecs"
	"github.com/archenet/archenet/input/internal/frames"
	"github.com/archenet/archenet/input/internal/inputlog"
	"github.com/archenet/archenet/input/internal/predict"
	"github.com/archenet/archenet/replication"
	"github.com/archenet/archenet/replication/bitio"
	"github.com/archenet/archenet/replication/lagcomp"
	"github.com/archenet/archenet/replication/schema"
)

// AuthorityConfig configures an [Authority]. Every zero field has a
// documented default.
type AuthorityConfig[S, I any] struct {
	// Registry is the server's component registry; S must be registered
	// in it. Required.
	Registry *schema.Registry
	// Step is the game's step function, the one clients predict with
	// (PlayerConfig.Step). Required.
	Step StepFunc[S, I]
	// Input configures the input codec; it must match the clients'
	// (PlayerConfig.Input). Zero: the defaults.
	Input Config
	// Log configures each client's input log.
	Log LogConfig
	// OnStep, if set, runs after each entity's step with its state before
	// and after and the input applied (fire a shot, play a sound). It runs
	// inside a query: queue structural changes (new entities) for later.
	OnStep func(e arche.Entity, before, after *S, in *I)
	// Outage returns the input applied while a client's inputs have been
	// missing for more than Input.Hold ticks, given the last input applied
	// (e.g. movement keys released, aim kept). It must be the clients'
	// (PlayerConfig.Outage): they predict their entity with it during the
	// outage. Nil: the zero input.
	Outage func(last I) I
	// Rewind bounds the view ticks [Authority.ViewTick] hands out (lag
	// compensation): what a client reports it saw, at most its round trip
	// as the server measured it (from its snapshot acks) plus an honest
	// render delay and a margin back. Zero: lagcomp's defaults (250 ms of
	// latency, 100 ms of render delay, 150 ms of margin); NetRate, if zero,
	// is the scheduler's.
	Rewind lagcomp.Limits
}

// AuthorityStats are an [Authority]'s counters, summed over every client
// that is or was connected.
type AuthorityStats struct {
	Stats             // the input logs' counters
	Dropped    uint64 // clients dropped for malformed input
	Steps      uint64 // entity steps run
	NoInputLog uint64 // input sections from clients the Authority does not know
}

// Authority is the server side of predicted entities: it keeps an
// input log per connected client, fed from the replication server's input hook,
// and each simulation tick steps every entity with component S and a
// components.Owner with its owner's input for that tick, with the same step
// function the owner predicts with ([Player]). Each snapshot tells the
// client which of its input ticks the state includes and its input buffer
// depth ([Authority.Configure] sets the server's hooks).
//
// Add [Authority.System] where the entities should step and
// [Authority.RoundSystem] after every system that changes S in the tick, so
// that the state the server continues from is the quantized one the client
// reconciles with. The tick comes from the world's ecs.TickInfo (an
// archenet ecs.Scheduler). Not safe for concurrent use.
type Authority[S, I any] struct {
	cfg    AuthorityConfig[S, I]
	world  *arche.World
	codec  *frames.Codec[I]
	round  *predict.Rounder[S]
	logs   [256]*inputlog.Log[I]
	info   generic.Resource[ecs.TickInfo]
	in     I
	before S // the state before the step, for OnStep (a field: no allocation)

	idState, idOwner arche.ID
	owned            arche.Mask // S with an Owner (built once: no per-tick boxing)
	stats            AuthorityStats

	rewinds *lagcomp.Rewinds // made at the first tick (the net rate is the scheduler's)
	views   [256]viewReport
	ackAge  [256]float64 // seconds: smoothed age of each client's snapshot acks (its round trip without a server)
	server  generic.Resource[replication.Server]

	configured bool // Configure ran (before the server was made)
}

// viewReport is what a client reported it saw with the input applied to its
// entities at tick.
type viewReport struct {
	tick uint32
	lag  uint16 // quarter ticks
	ok   bool
}

// NewAuthority returns an authority stepping the S entities of world.
func NewAuthority[S, I any](world *arche.World, cfg AuthorityConfig[S, I]) (*Authority[S, I], error) {
	if world == nil || cfg.Registry == nil || cfg.Step == nil {
		return nil, fmt.Errorf("%w: NewAuthority needs a world, Registry and Step", ErrInvalidConfig)
	}
	plan := cfg.Registry.ByType(reflect.TypeFor[S]())
	if plan == nil {
		return nil, fmt.Errorf("%w: %s is not in the registry", ErrInvalidConfig, reflect.TypeFor[S]())
	}
	a := &Authority[S, I]{cfg: cfg, world: world, info: generic.NewResource[ecs.TickInfo](world), server: generic.NewResource[replication.Server](world)}
	var err error
	if a.codec, err = frames.New[I](frames.Config(cfg.Input)); err != nil {
		return nil, err
	}
	if a.round, err = predict.NewRounder[S](plan); err != nil {
		return nil, err
	}
	if _, err = inputlog.New(a.codec, inputlog.Config(cfg.Log)); err != nil {
		return nil, err
	}
	if _, err = lagcomp.NewRewinds(cfg.Rewind); err != nil {
		return nil, fmt.Errorf("%w: Rewind: %w", ErrInvalidConfig, err)
	}
	a.idState = arche.TypeID(world, reflect.TypeFor[S]())
	a.idOwner = arche.ComponentID[components.Owner](world)
	a.owned = arche.All(a.idState, a.idOwner)
	return a, nil
}

// Configure sets the server config's input hooks (Input, InputAck,
// InputFeedback) to this authority's, and chains OnConnect and
// OnDisconnect (the game's run first) to open and close each client's log.
// Call it before replication.NewServer, which copies the config: it fails
// if a server is open on the authority's world already, and if an input
// hook is already set. An authority whose Step runs beside an open server
// without having been configured panics, saying so (its entities would
// never get their owners' input).
func (a *Authority[S, I]) Configure(cfg *replication.ServerConfig) error {
	if a.server.Has() {
		return fmt.Errorf("%w: Configure after replication.NewServer: the server has copied its config already (configure it first, then create the server)", ErrInvalidConfig)
	}
	if cfg.Input != nil || cfg.InputAck != nil || cfg.InputFeedback != nil {
		return fmt.Errorf("%w: ServerConfig already has input hooks", ErrInvalidConfig)
	}
	a.configured = true
	cfg.Input, cfg.InputAck, cfg.InputFeedback = a.receive, a.inputAck, a.feedback
	connect, disconnect := cfg.OnConnect, cfg.OnDisconnect
	cfg.OnConnect = func(c replication.ClientID) {
		if connect != nil {
			connect(c)
		}
		a.logs[c], _ = inputlog.New(a.codec, inputlog.Config(a.cfg.Log)) // checked in NewAuthority
		a.views[c], a.ackAge[c] = viewReport{}, 0
		if a.rewinds != nil {
			a.rewinds.Reset(c)
		}
	}
	cfg.OnDisconnect = func(c replication.ClientID, reason error) {
		if disconnect != nil {
			disconnect(c, reason)
		}
		if l := a.logs[c]; l != nil {
			a.stats.add(Stats(l.Stats()))
			a.logs[c] = nil
		}
	}
	return nil
}

// tick is the simulation tick being run (the next one before the first).
func (a *Authority[S, I]) tick() uint32 {
	if a.info.Has() {
		return uint32(a.info.Get().Tick)
	}
	return 0
}

// receive is ServerConfig.Input: it stores the frames of a client
// datagram's input section in the client's log. Malformed input drops the
// client; stale or flooding datagrams are dropped alone.
func (a *Authority[S, I]) receive(c replication.ClientID, ackTick uint32, section []byte) error {
	l := a.logs[c]
	if l == nil {
		a.stats.NoInputLog++
		return nil
	}
	a.noteAck(c, ackTick)
	// The server's Receive runs at the start of the tick it belongs to:
	// the next tick the log consumes.
	_, err := l.Receive(bitio.NewReader(section), a.tick())
	if errors.Is(err, ErrMalformed) {
		a.stats.Dropped++
		return fmt.Errorf("input: %w", err)
	}
	return nil // a section against a frame the log no longer holds, or over the rate: counted by the log
}

// noteAck measures client c's round trip from the snapshot tick it acked
// in a datagram that arrived now: how many net ticks ago that snapshot was
// sent, less one (the client waits for its next send, the server for its
// next Receive: about a tick in all), smoothed with gain 1/8.
func (a *Authority[S, I]) noteAck(c replication.ClientID, ackTick uint32) {
	if ackTick == 0 || !a.info.Has() {
		return
	}
	info := a.info.Get()
	netDt := info.Dt * float64(max(info.NetDivisor, 1))
	age := max(float64(int32(info.NetTick-ackTick))-1, 0) * netDt
	if a.ackAge[c] == 0 {
		a.ackAge[c] = age
		return
	}
	a.ackAge[c] += (age - a.ackAge[c]) / 8
}

// ViewTick returns the net tick (fractional) at which client c saw the
// world when it sampled the input applied to its entities this tick: what
// its input.Player reported with that input (its render clock), bounded by
// the round trip the server measured for it ([Authority.RTT];
// AuthorityConfig.Rewind; the
// claims and bounds are in [Authority.Rewinds]). Judge its shot against
// what it saw with lagcomp.History: hist.At(target, hist.Clamp(view), &s).
// ok is false if this tick's input was not the client's own frame (late,
// lost, held or the outage input) or carried no view (the client does not
// interpolate remote entities), or outside a tick. O(1).
func (a *Authority[S, I]) ViewTick(c replication.ClientID) (view float64, ok bool) {
	r := a.views[c]
	if !r.ok || !a.info.Has() || a.rewinds == nil {
		return 0, false
	}
	info := a.info.Get()
	if r.tick != uint32(info.Tick) {
		return 0, false
	}
	div := float64(max(info.NetDivisor, 1))
	at := float64(r.tick) / div
	claimed := (float64(r.tick) - float64(r.lag)/4) / div
	return a.rewinds.Judge(c, at, claimed, a.RTT(c)), true
}

// RTT returns the round trip that bounds client c's rewinds: the one the
// world's replication server measured for it (Server.RTT: the transport's
// smoothed RTT), else, with no server on the world or before it measured
// one, the age of the snapshots c acks, in net ticks less one, smoothed.
func (a *Authority[S, I]) RTT(c replication.ClientID) time.Duration {
	if a.server.Has() {
		if rtt := a.server.Get().RTT(c); rtt > 0 {
			return rtt
		}
	}
	return time.Duration(a.ackAge[c] * float64(time.Second))
}

// Rewinds returns the judge of the view ticks clients report, with each
// client's claims and bounds (lagcomp.Rewinds.Stats); nil before the first
// tick.
func (a *Authority[S, I]) Rewinds() *lagcomp.Rewinds { return a.rewinds }

// inputAck is ServerConfig.InputAck: the input tick the state includes.
func (a *Authority[S, I]) inputAck(c replication.ClientID) (uint32, bool) {
	if l := a.logs[c]; l != nil {
		return l.LastApplied()
	}
	return 0, false
}

// feedback is ServerConfig.InputFeedback: the newest input tick held and
// the buffer depth.
func (a *Authority[S, I]) feedback(c replication.ClientID) (uint32, int, bool) {
	if l := a.logs[c]; l != nil {
		fb := l.Feedback()
		return fb.Ack, fb.Depth, fb.HasAck
	}
	return 0, 0, false
}

// Step consumes the input of the current tick for every owned S entity and
// steps it (what [Authority.System] runs).
func (a *Authority[S, I]) Step() {
	if !a.configured && a.server.Has() {
		panic("input: this Authority's Configure was not called on the ServerConfig of the world's replication.Server (call it before NewServer): its entities would never get their owners' input")
	}
	tick, dt := a.tick(), 1.0/60
	if a.info.Has() {
		dt = a.info.Get().Dt
		if a.rewinds == nil {
			a.startRewinds()
		}
	}
	q := a.world.Query(&a.owned)
	for q.Next() {
		owner := (*components.Owner)(q.Get(a.idOwner)).Client
		l := a.logs[owner]
		if l == nil {
			continue // not connected: no input, no step
		}
		if l.Consume(tick, &a.in) == inputlog.Outage {
			a.in = outageInput(a.cfg.Outage, a.in)
		}
		lag, viewed := l.View()
		a.views[owner] = viewReport{tick: tick, lag: lag, ok: viewed}
		s := (*S)(q.Get(a.idState))
		if a.cfg.OnStep != nil {
			a.before = *s
		}
		a.cfg.Step(s, &a.in, dt)
		a.stats.Steps++
		if a.cfg.OnStep != nil {
			a.cfg.OnStep(q.Entity(), &a.before, s, &a.in)
		}
	}
}

// startRewinds makes the judge of view ticks once the scheduler's net rate
// is known.
func (a *Authority[S, I]) startRewinds() {
	lim := a.cfg.Rewind
	if info := a.info.Get(); lim.NetRate == 0 && info.TickRate > 0 {
		lim.NetRate = max(info.TickRate/max(info.NetDivisor, 1), 1)
	}
	r, err := lagcomp.NewRewinds(lim)
	if err != nil {
		r, _ = lagcomp.NewRewinds(lagcomp.Limits{NetRate: lim.NetRate}) // (checked in NewAuthority)
	}
	a.rewinds = r
}

// Round rounds every owned S to its quantized value (what
// [Authority.RoundSystem] runs).
func (a *Authority[S, I]) Round() {
	q := a.world.Query(&a.owned)
	for q.Next() {
		a.round.Round((*S)(q.Get(a.idState)))
	}
}

// System returns an ecs.System running [Authority.Step] every tick.
func (a *Authority[S, I]) System() ecs.System { return ecs.Func(func(*arche.World) { a.Step() }) }

// RoundSystem returns an ecs.System running [Authority.Round] every tick;
// add it after the systems that change S.
func (a *Authority[S, I]) RoundSystem() ecs.System { return ecs.Func(func(*arche.World) { a.Round() }) }

// ClientStats returns the input counters of client c's log: late,
// missing, duplicate and refused frames (false if c is not connected).
func (a *Authority[S, I]) ClientStats(c replication.ClientID) (Stats, bool) {
	if l := a.logs[c]; l != nil {
		return Stats(l.Stats()), true
	}
	return Stats{}, false
}

// Stats returns the counters, including the logs of connected clients.
func (a *Authority[S, I]) Stats() AuthorityStats {
	st := a.stats
	for _, l := range a.logs {
		if l != nil {
			st.add(Stats(l.Stats()))
		}
	}
	return st
}

func (s *AuthorityStats) add(l Stats) {
	s.Datagrams += l.Datagrams
	s.Malformed += l.Malformed
	s.NoBaseline += l.NoBaseline
	s.Flooded += l.Flooded
	s.Frames += l.Frames
	s.Duplicate += l.Duplicate
	s.Late += l.Late
	s.Ahead += l.Ahead
	s.Consumed += l.Consumed
	s.Received += l.Received
	s.Missing += l.Missing
	s.Outage += l.Outage
}

// outageInput is the input applied during an outage: fn(last), or the zero
// input.
func outageInput[I any](fn func(I) I, last I) I {
	if fn == nil {
		var zero I
		return zero
	}
	return fn(last)
}
