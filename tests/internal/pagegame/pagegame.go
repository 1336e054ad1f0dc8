// Package pagegame is the small game archenet's browser tests play, natively and in
// headless Chromium with the same code (tests/internal/pageclient is its page): a
// server whose movers circle the field and whose players steer predicted bodies
// ([Server]), a client that mirrors it, predicts its own body with input.Player and
// records the snapshot datagrams it receives ([Client], replicationtest.Recorder), and the
// convergence check a page runs against the server's [replicationtest.State].
package pagegame

import (
	"errors"
	"log/slog"
	"math"
	"time"

	arche "github.com/mlange-42/arche/ecs"

	"github.com/archenet/archenet/components"
	"github.com/archenet/archenet/ecs"
	"github.com/archenet/archenet/input"
	"github.com/archenet/archenet/replication"
	"github.com/archenet/archenet/replication/replicationtest"
	"github.com/archenet/archenet/replication/schema"
	"github.com/archenet/archenet/transport"
)

// Rates: 60 Hz simulation, 30 Hz snapshots.
const (
	SimRate, NetDivisor = 60, 2
	Half                = 30.0 // the field is [−Half, Half]² metres
)

// Body is the replicated state of movers and players.
type Body struct {
	X   float64 `net:"range=-64:64,step=0.001"`
	Z   float64 `net:"range=-64:64,step=0.001"`
	Yaw float64 `net:"angle,bits=12"`
}

// Move is one tick of a player's input.
type Move struct {
	Forward int8 `net:"range=-1:1"`
	Turn    int8 `net:"range=-1:1"`
}

// Registry returns the replicated components, the same on both sides.
func Registry() *schema.Registry {
	reg := schema.NewRegistry()
	schema.MustRegister[Body](reg)
	schema.MustRegister[components.Predicted](reg)
	return reg
}

// Step moves a player: turn at 3 rad/s, walk at 5 m/s, stop at the edge. The
// server's input.Authority and the owner's input.Player both run it.
func Step(b *Body, in *Move, dt float64) {
	b.Yaw = math.Remainder(b.Yaw+float64(in.Turn)*3*dt, 2*math.Pi)
	sin, cos := math.Sincos(b.Yaw)
	b.X = math.Max(-Half, math.Min(Half, b.X+float64(in.Forward)*5*cos*dt))
	b.Z = math.Max(-Half, math.Min(Half, b.Z+float64(in.Forward)*5*sin*dt))
}

// Wander returns a player's scripted input: walk, turning now and then, back from
// the edges; neutral while stop() holds.
func Wander(seed uint64, stop func() bool) func(uint32, *Body) Move {
	m := Move{Forward: 1}
	n := seed
	return func(_ uint32, b *Body) Move {
		if stop != nil && stop() {
			return Move{}
		}
		n = n*6364136223846793005 + 1442695040888963407
		if n>>58 == 0 {
			m.Turn = int8(n>>40%3) - 1
		}
		if b.X*b.X > 0.7*Half*Half || b.Z*b.Z > 0.7*Half*Half {
			m.Turn = 1
		}
		return m
	}
}

// ServerOptions configures a [Server].
type ServerOptions struct {
	Listener transport.Listener // required
	Movers   int                // entities circling the field
	// Players gives every client a predicted body (input.Authority); without,
	// clients only watch.
	Players bool
	Logger  *slog.Logger // nil: slog.Default()
}

// mover is the server-only state of a circling entity.
type mover struct{ CX, CZ, R, W, A float64 }

// Server is the authoritative game, stepped by its scheduler (Sched.Advance).
type Server struct {
	World *arche.World
	Sched *ecs.Scheduler
	Net   *replication.Server
	Auth  *input.Authority[Body, Move] // nil without Players
	// Still stops the movers (for convergence checks).
	Still   bool
	players map[replication.ClientID]arche.Entity
	events  []replication.ClientID // joins and leaves, in order
}

// NewServer creates the world, its movers and the replication server.
func NewServer(o ServerOptions) (*Server, error) {
	if o.Listener == nil {
		return nil, errors.New("pagegame: ServerOptions.Listener is required")
	}
	w := arche.NewWorld()
	s := &Server{World: &w, players: map[replication.ClientID]arche.Entity{}}
	reg := Registry()
	cfg := replication.ServerConfig{Registry: reg, NetRate: SimRate / NetDivisor, NetDivisor: NetDivisor,
		Tick:         func() uint32 { return s.Sched.Info().NetTick },
		OnConnect:    func(c replication.ClientID) { s.events = append(s.events, c) },
		OnDisconnect: func(c replication.ClientID, _ error) { s.events = append(s.events, c) },
		// (A page starved for seconds on a busy machine is not dead: no
		// test of this game is about liveness.)
		Limits: replication.ServerLimits{JoinTimeout: time.Minute, ClientTimeout: time.Minute},
		Logger: o.Logger}
	var err error
	if o.Players {
		if s.Auth, err = input.NewAuthority(&w, input.AuthorityConfig[Body, Move]{Registry: reg, Step: Step}); err != nil {
			return nil, err
		}
		if err = s.Auth.Configure(&cfg); err != nil {
			return nil, err
		}
	}
	if s.Net, err = replication.NewServer(&w, o.Listener, cfg); err != nil {
		return nil, err
	}
	if s.Sched, err = ecs.New(&w, ecs.Config{TickRate: SimRate, NetDivisor: NetDivisor}); err != nil {
		return nil, err
	}
	s.Sched.AddNetSystem(s.Net.ReceiveSystem())
	s.Sched.AddNetSystem(ecs.Func(s.joinLeave))
	if s.Auth != nil {
		s.Sched.AddSystem(s.Auth.System())
	}
	s.Sched.AddSystem(ecs.Func(s.move))
	if s.Auth != nil {
		s.Sched.AddSystem(s.Auth.RoundSystem())
	}
	s.Sched.AddNetSystem(s.Net.SendSystem())
	idRep, idBody, idMover := arche.ComponentID[components.Replicated](&w), arche.ComponentID[Body](&w), arche.ComponentID[mover](&w)
	for i := range o.Movers {
		e := w.NewEntity(idRep, idBody, idMover)
		f := float64(i)
		*(*mover)(w.Get(e, idMover)) = mover{CX: math.Mod(f*7.3, 2*Half) - Half, CZ: math.Mod(f*11.9, 2*Half) - Half, R: 1 + math.Mod(f, 5), W: 0.5 + math.Mod(f*0.37, 2), A: f}
	}
	return s, nil
}

// joinLeave gives joining players a body and removes a leaving one's.
func (s *Server) joinLeave(w *arche.World) {
	for _, c := range s.events {
		if e, ok := s.players[c]; ok {
			if !e.IsZero() {
				w.RemoveEntity(e)
			}
			delete(s.players, c)
			continue
		}
		if s.Auth == nil {
			s.players[c] = arche.Entity{} // (a watcher: remembered for its leave)
			continue
		}
		e := arche.NewBuilder(w, arche.ComponentID[components.Replicated](w), arche.ComponentID[Body](w),
			arche.ComponentID[components.Owner](w), arche.ComponentID[components.Predicted](w)).New()
		(*components.Owner)(w.Get(e, arche.ComponentID[components.Owner](w))).Client = c
		(*Body)(w.Get(e, arche.ComponentID[Body](w))).X = float64(len(s.players)) * 2
		s.players[c] = e
	}
	s.events = s.events[:0]
}

// move circles the movers, unless Still.
func (s *Server) move(w *arche.World) {
	if s.Still {
		return
	}
	idBody, idMover := arche.ComponentID[Body](w), arche.ComponentID[mover](w)
	q := w.Query(arche.All(idBody, idMover))
	for q.Next() {
		m, b := (*mover)(q.Get(idMover)), (*Body)(q.Get(idBody))
		m.A = math.Remainder(m.A+m.W/SimRate, 2*math.Pi)
		sin, cos := math.Sincos(m.A)
		*b = Body{X: m.CX + m.R*cos, Z: m.CZ + m.R*sin, Yaw: m.A}
	}
}

// State captures the server's replicated state for a client's [Client.Converged].
func (s *Server) State() (replicationtest.State, error) {
	return replicationtest.Capture(Registry(), s.World, s.Net.NetID)
}
