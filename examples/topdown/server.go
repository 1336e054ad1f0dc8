package main

import (
	"math"
	"math/rand/v2"

	arche "github.com/mlange-42/arche/ecs"

	"github.com/archenet/archenet/components"
	"github.com/archenet/archenet/ecs"
	"github.com/archenet/archenet/input"
	"github.com/archenet/archenet/replication"
	"github.com/archenet/archenet/replication/lagcomp"
	"github.com/archenet/archenet/transport"
)

// Server is the authoritative game: players stepped by their input, coins,
// shots.
type Server struct {
	World        *arche.World
	Sched        *ecs.Scheduler
	Net          *replication.Server
	Auth         *input.Authority[Body, Move]
	Hist         *lagcomp.History[Body] // what the clients were shown, for their shots
	Tags         *replication.ServerEndpoint[Tagged]
	players      map[replication.ClientID]arche.Entity
	events       []replication.ClientID // joins (and leaves, negated by the map)
	rng          *rand.Rand
	Picked, Hits int
	Greets       int // greetings that named a body still there
}

// NewServer creates the world and replicates it to the clients of ln.
func NewServer(ln transport.Listener) (*Server, error) {
	w := arche.NewWorld()
	s := &Server{World: &w, players: map[replication.ClientID]arche.Entity{}, rng: rand.New(rand.NewPCG(1, 2))}
	reg := Registry()
	var err error
	if s.Auth, err = input.NewAuthority(&w, input.AuthorityConfig[Body, Move]{Registry: reg, Step: Step, OnStep: s.shoot}); err != nil {
		return nil, err
	}
	if s.Hist, err = lagcomp.New[Body](&w, reg, lagcomp.Config{}); err != nil {
		return nil, err
	}
	if s.Sched, err = ecs.New(&w, ecs.Config{TickRate: SimRate, NetDivisor: NetDivisor}); err != nil {
		return nil, err
	}
	// The net rate, divisor and tick come from the scheduler.
	cfg := replication.ServerConfig{Registry: reg, Scheduler: s.Sched,
		Interest:     &replication.Interest{Radius: Radius, Position: replication.PositionOf(Pos)},
		OnConnect:    func(c replication.ClientID) { s.events = append(s.events, c) },
		OnDisconnect: func(c replication.ClientID, _ error) { s.events = append(s.events, c) }}
	if err = s.Auth.Configure(&cfg); err != nil {
		return nil, err
	}
	if s.Net, err = replication.NewServer(&w, ln, cfg); err != nil {
		return nil, err
	}
	if s.Tags, err = replication.ServerMessages[Tagged](s.Net); err != nil {
		return nil, err
	}
	greets, err := replication.ServerMessages[Greet](s.Net)
	if err != nil {
		return nil, err
	}
	// A greeting's body resolved to the live entity: a stale one never gets here.
	greets.Handle(func(m replication.Message[Greet]) {
		if !m.Value.To.Entity.IsZero() {
			s.Greets++
		}
	})
	s.Sched.AddNetSystem(s.Net.ReceiveSystem())
	s.Sched.AddNetSystem(ecs.Func(s.joinLeave))
	s.Sched.AddSystem(s.Auth.System())
	s.Sched.AddSystem(ecs.Func(s.coins))
	s.Sched.AddSystem(s.Auth.RoundSystem())
	s.Sched.AddNetSystem(s.Net.SendSystem())
	s.Sched.AddNetSystem(s.Hist.System(s.Net.Tick)) // records what each snapshot showed
	return s, nil
}

// shoot is the authority's OnStep: a player who fires tags the first other
// body within 20 m along its aim, as the shooter saw the others when it
// fired (its view tick, bounded by its round trip).
func (s *Server) shoot(e arche.Entity, _, b *Body, in *Move) {
	if !in.Fire {
		return
	}
	owner := (*components.Owner)(s.World.Get(e, arche.ComponentID[components.Owner](s.World))).Client
	view, ok := s.Auth.ViewTick(owner)
	sin, cos := math.Sincos(b.Yaw)
	s.Hist.Each(s.Hist.Clamp(view), func(t arche.Entity, tb *Body) bool {
		along, off := (tb.X-b.X)*cos+(tb.Z-b.Z)*sin, (tb.Z-b.Z)*cos-(tb.X-b.X)*sin
		// The history holds what clients were shown: a coin picked since is no longer alive.
		if ok && t != e && s.World.Alive(t) && !s.World.Has(t, arche.ComponentID[Coin](s.World)) && along > 0 && along < 20 && math.Abs(off) < 0.5 {
			s.Hits++
			// Everyone who sees the target hears of it (with the shooter's body).
			_ = s.Tags.SendAbout(t, Tagged{Target: components.RefTo(t), By: components.RefTo(e)}, replication.Reliable)
			return false
		}
		return true
	})
}

func (s *Server) joinLeave(w *arche.World) {
	for _, c := range s.events {
		if e, ok := s.players[c]; ok { // left
			w.RemoveEntity(e)
			delete(s.players, c)
			continue
		}
		e := arche.NewBuilder(w, arche.ComponentID[components.Replicated](w), arche.ComponentID[Body](w),
			arche.ComponentID[components.Owner](w), arche.ComponentID[components.Predicted](w)).New()
		(*components.Owner)(w.Get(e, arche.ComponentID[components.Owner](w))).Client = c
		s.players[c] = e
	}
	s.events = s.events[:0]
}

// coins keeps 20 coins on the field; a player within 1 m picks one up.
func (s *Server) coins(w *arche.World) {
	idBody, idCoin := arche.ComponentID[Body](w), arche.ComponentID[Coin](w)
	var picked []arche.Entity
	q := w.Query(arche.All(idCoin, idBody))
	n := q.Count()
	for q.Next() {
		c := (*Body)(q.Get(idBody))
		for _, p := range s.players {
			if b := (*Body)(w.Get(p, idBody)); (b.X-c.X)*(b.X-c.X)+(b.Z-c.Z)*(b.Z-c.Z) < 1 {
				b.Score++
				picked = append(picked, q.Entity())
				break
			}
		}
	}
	for _, e := range picked {
		w.RemoveEntity(e)
		s.Picked++
	}
	for ; n-len(picked) < 20; n++ {
		e := w.NewEntity(arche.ComponentID[components.Replicated](w), idBody, idCoin)
		*(*Body)(w.Get(e, idBody)) = Body{X: (s.rng.Float64()*2 - 1) * Half, Z: (s.rng.Float64()*2 - 1) * Half}
	}
}
