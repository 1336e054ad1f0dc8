package replication

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/archenet/archenet/replication/snapshot"
)

// worker is one goroutine's scratch for building peers' ticks: its own
// snapshot encoder (and compressor), with its own record cache (a record's bytes depend only
// on the entity, the baseline and the client's view, so which worker encodes
// it does not change them), and its own spawn-batch writer.
type worker struct {
	enc    *snapshot.Encoder
	spawns spawnWriter
}

func newWorkers(cfg *ServerConfig, w *snapshot.World) ([]*worker, error) {
	ws := make([]*worker, cfg.Workers)
	for i := range ws {
		ws[i] = &worker{enc: snapshot.NewEncoder(w)}
		if cfg.Compression {
			c, err := snapshot.NewCompressor(cfg.CompressionDictionary)
			if err != nil {
				return nil, err
			}
			ws[i].enc.Compression = c
		}
	}
	return ws, nil
}

// buildPeers runs every peer's tick, spread over the workers. What a peer
// builds does not depend on which worker built it or in what order, so the
// bytes every client gets are the same for any number of workers.
func (s *Server) buildPeers(peers []*peer, now time.Time) {
	s.eachPeer(peers, func(w *worker, p *peer) { p.tick(s, w, now) })
}

// eachPeer runs fn for every peer, spread over the workers: each worker
// takes the next peer not yet taken, on a goroutine of its own (the first
// on the caller's). fn must only touch the peer, the worker and state that
// is read-only for the duration.
func (s *Server) eachPeer(peers []*peer, fn func(w *worker, p *peer)) {
	n := min(len(s.workers), len(peers))
	if n <= 1 {
		for _, p := range peers {
			fn(s.workers[0], p)
		}
		return
	}
	var next atomic.Int64
	run := func(w *worker) {
		for {
			i := int(next.Add(1)) - 1
			if i >= len(peers) {
				return
			}
			fn(w, peers[i])
		}
	}
	var wg sync.WaitGroup
	for _, w := range s.workers[1:n] {
		wg.Add(1)
		go func() {
			defer wg.Done()
			run(w)
		}()
	}
	run(s.workers[0])
	wg.Wait()
}
