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

// Event is the server's game message (ServerOptions.Messages): Stream 0 is
// a reliable broadcast, 1 an unreliable one, 2 a reliable event about the
// mover of net slot Mover (About), to the clients that see it. Seq counts the server's
// net ticks with events, the same in every stream.
type Event struct {
	Stream uint8 `net:"range=0:3"`
	Seq    uint32
	Mover  uint16 `net:"range=0:1023"`
	About  components.Ref
}

// Poke is a client's game message naming a mover it sees.
type Poke struct {
	Seq   uint32
	Mover components.Ref
}

// Registry returns the replicated components and the messages, the same on
// both sides.
func Registry() *schema.Registry {
	reg := schema.NewRegistry()
	schema.MustRegister[Body](reg)
	schema.MustRegister[components.Predicted](reg)
	schema.MustRegisterMessage[Event](reg)
	schema.MustRegisterMessage[Poke](reg)
	return reg
}

// Hidden reports whether the mover of net slot i is outside client c's
// interest in a match with messages (ServerOptions.Messages): every third
// mover, for clients of an even id.
func Hidden(c replication.ClientID, i int) bool { return c%2 == 0 && i%3 == 0 }

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
	// Messages sends Events every net tick, counts the clients' Pokes
	// (Server.Pokes) and hides movers from some clients (Hidden).
	Messages bool
	Logger   *slog.Logger // nil: slog.Default()
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
	// With ServerOptions.Messages: the movers in order, the Events sent,
	// and per client the Pokes taken, those naming a mover the client does
	// not see or a wrong entity (PokesWrong), and the refused count.
	movers     []arche.Entity
	moverIndex map[arche.Entity]int
	Event      *replication.ServerEndpoint[Event]
	EventSeq   uint32
	Pokes      map[replication.ClientID]int
	PokesWrong map[replication.ClientID]int
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
	if o.Messages {
		s.moverIndex, s.Pokes, s.PokesWrong = map[arche.Entity]int{}, map[replication.ClientID]int{}, map[replication.ClientID]int{}
		cfg.Interest = &replication.Interest{Radius: 1e6, Every: 1,
			Focus: func(replication.ClientID) (components.Vec3, bool) { return components.Vec3{}, true },
			Filter: func(c replication.ClientID, e arche.Entity) bool {
				return !s.hidden(c, e)
			},
			Position: replication.PositionOf(func(b *Body) components.Vec3 { return components.Vec3{X: b.X, Z: b.Z} })}
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
	if o.Messages {
		if err := s.messages(); err != nil {
			return nil, err
		}
	}
	s.Sched.AddNetSystem(s.Net.SendSystem())
	idRep, idBody, idMover := arche.ComponentID[components.Replicated](&w), arche.ComponentID[Body](&w), arche.ComponentID[mover](&w)
	for i := range o.Movers {
		e := w.NewEntity(idRep, idBody, idMover)
		f := float64(i)
		*(*mover)(w.Get(e, idMover)) = mover{CX: math.Mod(f*7.3, 2*Half) - Half, CZ: math.Mod(f*11.9, 2*Half) - Half, R: 1 + math.Mod(f, 5), W: 0.5 + math.Mod(f*0.37, 2), A: f}
		if o.Messages {
			s.movers = append(s.movers, e)
			s.moverIndex[e] = i
		}
	}
	return s, nil
}

// Body returns the body of client c's player (a watcher's, or no player:
// the zero entity and false).
func (s *Server) Body(c replication.ClientID) (arche.Entity, bool) {
	e, ok := s.players[c]
	return e, ok && !e.IsZero()
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

// messages sets up the match's messages: a net system that sends each
// tick's Events, and the Pokes' handler.
func (s *Server) messages() error {
	var err error
	if s.Event, err = replication.ServerMessages[Event](s.Net); err != nil {
		return err
	}
	pokes, err := replication.ServerMessages[Poke](s.Net)
	if err != nil {
		return err
	}
	pokes.Handle(func(m replication.Message[Poke]) {
		if _, ok := s.moverIndex[m.Value.Mover.Entity]; !ok || s.hidden(m.From, m.Value.Mover.Entity) {
			s.PokesWrong[m.From]++
			return
		}
		s.Pokes[m.From]++
	})
	s.Sched.AddNetSystem(ecs.Func(func(*arche.World) {
		s.EventSeq++
		seq := s.EventSeq
		_ = s.Event.Broadcast(Event{Stream: 0, Seq: seq}, replication.Reliable)
		_ = s.Event.Broadcast(Event{Stream: 1, Seq: seq}, replication.Unreliable)
		e := s.movers[int(seq)%len(s.movers)]
		id, _ := s.Net.NetID(e)
		_ = s.Event.SendAbout(e, Event{Stream: 2, Seq: seq, Mover: uint16(id.Index()), About: components.RefTo(e)}, replication.Reliable)
	}))
	return nil
}

// hidden reports whether e is a mover outside client c's interest (Hidden
// of its net slot). (Read-only: it runs on the server's workers.)
func (s *Server) hidden(c replication.ClientID, e arche.Entity) bool {
	if _, ok := s.moverIndex[e]; !ok {
		return false
	}
	id, ok := s.Net.NetID(e)
	return ok && Hidden(c, int(id.Index()))
}
