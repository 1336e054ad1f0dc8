package encode

import (
	"github.com/archenet/archenet/replication/internal/lanes"
	"github.com/archenet/archenet/replication/internal/wire"
)

// codeShard counts, for one encoder, the residuals of the delta records it
// sent (each as often as it was sent: the count is the same whichever
// encoder sends a client's datagrams, so the choice is too). A send only
// bumps its cache entry's count (listed in pending on its first); the
// entry's residuals are counted, times its sends, when it is evicted or at
// the next choice.
type codeShard struct {
	enc      *Encoder
	pending  []uint32 // indexes in enc.cache.entries (slot·2 + way) of entries with sends
	hist     lanes.Hist
	quadGain int
	quadN    int
}

// countN counts the residuals of a record sent n times.
func (s *codeShard) countN(st *lanes.Stats, n uint32) {
	s.hist.Count(st, n)
	s.quadGain += int(st.QuadGain) * int(n)
	s.quadN += int(st.QuadN) * int(n)
}

// flush counts the sends of the pending cache entries and pre-encoded
// records.
func (s *codeShard) flush() {
	e := s.enc
	e.retireShare() // (its repeats' sends first)
	for _, slot := range e.pre.pending {
		s.countN(&e.g.pre.entries[slot].stats, e.pre.sends[slot])
		e.pre.sends[slot] = 0
	}
	e.pre.pending = e.pre.pending[:0]
	for _, k := range s.pending {
		ce := &e.cache.entries[k]
		if ce.sends != 0 {
			s.countN(&ce.stats, ce.sends)
			ce.sends = 0
		}
	}
	s.pending = s.pending[:0]
}

// codeState is a Group's residual coding: the coding and quad choice for
// the tick, and the encoders' counts they are chosen from at each
// BeginTick.
type codeState struct {
	coding wire.Coding
	quad   bool
	shards []*codeShard
	sum    codeShard
}

func (c *codeState) newShard(e *Encoder) *codeShard {
	s := &codeShard{enc: e}
	c.shards = append(c.shards, s)
	return s
}

// choose gathers the encoders' counts (between ticks: no Build runs) and,
// once there are enough, chooses the next ticks' coding and quad.
func (c *codeState) choose() {
	for _, s := range c.shards {
		s.flush()
		c.sum.hist.Merge(&s.hist)
		c.sum.quadGain += s.quadGain
		c.sum.quadN += s.quadN
		s.hist.Reset()
		s.quadGain, s.quadN = 0, 0
	}
	if c.sum.quadN >= lanes.MinSamples {
		c.quad = c.sum.quadGain > c.sum.quadN/32
		c.sum.quadGain, c.sum.quadN = 0, 0
	}
	if c.sum.hist.Total() >= lanes.MinSamples {
		// A new coding costs its bits in the next datagram of every
		// client: switch only when it saves more (the saving lasts).
		next, b, cur := c.sum.hist.Best(&c.coding)
		if b+b/256+wire.CodingBits < cur {
			c.coding = next
		}
		c.sum.hist.Reset()
	}
}
