package replication

import (
	"cmp"
	"slices"
	"time"

	"github.com/archenet/archenet/components"
	"github.com/archenet/archenet/replication/internal/codec"
	"github.com/archenet/archenet/replication/internal/encode"
	"github.com/archenet/archenet/replication/internal/entity"
	"github.com/archenet/archenet/replication/internal/gang"
	"github.com/archenet/archenet/replication/internal/grid"
	"github.com/archenet/archenet/replication/internal/peer"
	arche "github.com/mlange-42/arche/ecs"
)

// worker is one goroutine's scratch for building peers' ticks: its own
// snapshot encoder (and compressor), with its own record cache (a record's bytes depend only
// on the entity, the baseline and the client's view, so which worker encodes
// it does not change them), and its own spawn-batch writer.
type worker struct {
	peer.Scratch               // its encoder and spawn batch writer
	relevance    entity.Bitset // a client's next relevance, while it is computed
	// wanted: the relevance of the peers the worker built this tick, for
	// the next tick's pre-encoding
	wanted entity.Bitset
}

func newWorkers(cfg *ServerConfig, g *encode.Group) ([]*worker, error) {
	ws := make([]*worker, cfg.Workers)
	for i := range ws {
		ws[i] = &worker{Scratch: peer.Scratch{Enc: g.NewEncoder()}}
		ws[i].Enc.NoShare = cfg.NoSharedBuilds
		if cfg.Compression {
			c, err := codec.NewCompressor(cfg.CompressionDictionary)
			if err != nil {
				return nil, err
			}
			ws[i].Enc.Compression = c
		}
	}
	return ws, nil
}

// tickWork is the state of a tick's parallel phases, kept so that they
// allocate nothing per tick: the workers and their goroutines, the
// clients of the tick (in client order, and by focus), what every peer
// reads, the frame's, pre-encoding's and the peers' shares, and what the
// interest grid reads.
type tickWork struct {
	workers  []*worker
	gang     gang.Gang
	active   []*remote // the clients of this tick's Send
	byFocus  []*remote // active, ordered by interest focus for the workers
	step     peer.Tick // what the peers of this tick's Send read
	failed   []failedSend
	peerJobs peerJobs // the peers' phase on the workers
	gridSrc  grid.Source
	readPos  func(arche.Entity) components.Vec3 // Server.readPosition, made once
}

// preencode encodes, on the workers, the records most clients' datagrams
// need this tick (see encode.Group.Preencode): each once, from the frame
// just built, before the clients' builds copy them.
func (s *Server) preencode() {
	if !s.cfg.NoPreencode {
		s.group.Preencode(&s.work.gang)
	}
}

// endPreencode hands the next tick's pre-encoding what this tick's peers
// showed: the key they shared (the encoders' census) and the union of
// their relevance, which the workers gathered as they built.
func (s *Server) endPreencode() {
	if s.cfg.NoPreencode {
		return
	}
	wanted := &s.work.workers[0].wanted
	for _, w := range s.work.workers[1:] {
		wanted.Or(w.wanted)
		clear(w.wanted)
	}
	s.group.EndPreencode(*wanted)
	clear(*wanted)
}

// buildPeers runs every peer's tick, spread over the workers; the caller's
// goroutine (worker 0) also runs then, if set, after each peer it builds.
// What a peer builds does not depend on which worker built it or in what
// order, so the bytes every client gets are the same for any number of
// workers. With an interest grid, peers are ordered by where their focus
// is, so that each worker starts on clients of its own part of the world:
// they need much the same records, which the worker's cache then encodes
// once.
func (s *Server) buildPeers(peers []*remote, now time.Time, then func()) {
	if s.interest != nil && len(s.work.workers) > 1 {
		s.work.byFocus = append(s.work.byFocus[:0], peers...)
		peers = s.work.byFocus
		slices.SortFunc(peers, func(a, b *remote) int {
			if c := cmp.Compare(a.rel.FocusX, b.rel.FocusX); c != 0 {
				return c
			}
			return cmp.Compare(a.ID, b.ID)
		})
	}
	s.work.step = peer.Tick{Tick: s.tick, Now: now, NetRate: s.cfg.NetRate, Ring: s.ring,
		Slots: s.slots.Infos, Relayout: s.slots.Relayout, Plans: s.plans, Weights: s.slots.Weights}
	pj := &s.work.peerJobs
	if pj.build == nil {
		pj.build, pj.end = s.buildPeerAt, s.endPeers // (once: a method value is a closure)
	}
	pj.then, pj.peers = then, peers
	s.work.gang.Shares(len(peers), pj.build, pj.end)
	pj.then, pj.peers = nil, nil
}

// buildPeer runs peer p's tick on worker w (buildPeers), then the caller's
// hand-over if w is the caller's.
func (s *Server) buildPeer(w *worker, p *remote) {
	s.updateRelevance(p, w)
	if !s.cfg.NoPreencode {
		w.wanted.Or(p.plan.Relevant)
	}
	p.Peer.Tick(&s.work.step, &p.plan, &w.Scratch)
	p.built.Store(true)
	if then := s.work.peerJobs.then; then != nil && w == s.work.workers[0] {
		then()
	}
}

// buildPeerAt runs the tick of peer i of the peers' phase on worker wi.
func (s *Server) buildPeerAt(wi, i int) { s.buildPeer(s.work.workers[wi], s.work.peerJobs.peers[i]) }

// endPeers ends the tick's Builds of worker wi, which built peers.
func (s *Server) endPeers(wi int) { s.work.workers[wi].Enc.EndTick() }

// sendPeers builds the active peers' ticks on the workers and hands each to
// its connection in client order, as soon as it and those before it are
// built: the caller's goroutine does that between its builds, so the
// hand-over overlaps the other workers' builds (the transport sees the
// same calls in the same order as when everything is handed over after).
// Connections that fail are dropped after.
func (s *Server) sendPeers(now time.Time) {
	for _, p := range s.work.active {
		p.built.Store(false)
	}
	pj := &s.work.peerJobs
	pj.flushed = 0 // s.active[:flushed] are handed over
	if pj.flush == nil {
		pj.flush = s.flushBuilt // (once)
	}
	s.work.failed = s.work.failed[:0]
	s.buildPeers(s.work.active, now, pj.flush)
	s.flushBuilt() // (every peer is built now)
	for _, f := range s.work.failed {
		s.sendFailed(f.p, f.err)
	}
	clear(s.work.failed)
}

// flushBuilt hands the built peers that follow the handed-over ones to
// their connections, in order (on the caller's goroutine).
func (s *Server) flushBuilt() {
	pj, active := &s.work.peerJobs, s.work.active
	for pj.flushed < len(active) && active[pj.flushed].built.Load() {
		if err := s.flush(active[pj.flushed]); err != nil {
			s.work.failed = append(s.work.failed, failedSend{active[pj.flushed], err})
		}
		pj.flushed++
	}
}

// failedSend is a peer whose connection refused what it built.
type failedSend struct {
	p   *remote
	err error
}

// peerJobs is the state of the peers' phase on the workers, kept here so
// that it allocates nothing per tick: the jobs (made once), the peers
// handed out, and how far sendPeers handed the built peers over.
type peerJobs struct {
	build   func(wi, i int) // buildPeerAt
	end     func(wi int)    // endPeers
	then    func()          // buildPeers' then, for this tick
	flush   func()          // flushBuilt
	flushed int
	peers   []*remote
}
