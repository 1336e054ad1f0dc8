package frames

import "github.com/archenet/archenet/replication/bitio"

// senderRing is the number of frames a sender remembers: the newest
// MaxRedundancy frames plus a baseline up to 64 ticks older, rounded up to a
// power of two.
const senderRing = 128

// Sender is the client side of input frames: it keeps the newest frames the
// client produced, and the newest tick the server acknowledged holding, and
// writes input sections for outgoing datagrams. Not safe for concurrent use.
type Sender[I any] struct {
	c      *Codec[I]
	nl     int
	lanes  []uint64 // senderRing frames
	has    bool
	newest uint32
	count  int // frames held (≤ senderRing)
	acked  uint32
	hasAck bool
	out    []uint64 // scratch: the frames of one section, back to back
	views  [senderRing]uint16
	viewed [senderRing]bool
	outV   [MaxRedundancy]uint16
}

// NewSender returns a Sender for codec c. Allocates its history once.
func NewSender[I any](c *Codec[I]) *Sender[I] {
	nl := c.NumLanes()
	return &Sender[I]{c: c, nl: nl, lanes: make([]uint64, senderRing*nl), out: make([]uint64, MaxRedundancy*nl)}
}

func (s *Sender[I]) slot(tick uint32) []uint64 {
	i := int(tick%senderRing) * s.nl
	return s.lanes[i : i+s.nl]
}

// Push records the input for tick (normally the tick input.TickSync.Advance
// stamped) and rounds *in in place to the value the server will decode, so
// the client predicts with exactly what the server applies. Ticks must
// increase; a tick not after the newest is ignored and Push returns false.
// A gap (ticks skipped after a clock resync) is filled with copies of the
// previous input, so sections always hold consecutive ticks.
// Allocation-free, O(NumLanes).
func (s *Sender[I]) Push(tick uint32, in *I) bool { return s.push(tick, in, 0, false) }

// PushView is Push with the frame's view lag: how far behind tick, in
// quarter ticks, the client's render clock was when it sampled in (at most
// MaxViewLag), for the server's lag compensation (the input log's View). A section
// carries view lags when every frame in it has one.
func (s *Sender[I]) PushView(tick uint32, in *I, quarterTicks uint16) bool {
	return s.push(tick, in, min(quarterTicks, MaxViewLag), true)
}

func (s *Sender[I]) push(tick uint32, in *I, view uint16, viewed bool) bool {
	if s.has && int32(tick-s.newest) <= 0 {
		return false
	}
	if s.has {
		prev := s.slot(s.newest)
		pv, pok := s.views[s.newest%senderRing], s.viewed[s.newest%senderRing]
		gap := min(int(tick-s.newest)-1, MaxRedundancy)
		for t := tick - uint32(gap); t != tick; t++ {
			copy(s.slot(t), prev)
			s.views[t%senderRing], s.viewed[t%senderRing] = pv, pok
		}
		s.count = min(s.count+int(tick-s.newest), senderRing)
	} else {
		s.count = 1
	}
	cur := s.slot(tick)
	s.c.Quantize(in, cur)
	s.c.Dequantize(cur, in)
	s.views[tick%senderRing], s.viewed[tick%senderRing] = view, viewed
	s.newest, s.has = tick, true
	return true
}

// Newest returns the newest pushed tick; ok is false before the first Push.
func (s *Sender[I]) Newest() (tick uint32, ok bool) { return s.newest, s.has }

// Ack records that the server holds the frame of tick (the Ack of its input
// feedback). Older and duplicate acks are ignored. Sections then code
// their oldest frame against that frame while it is within the baseline
// window. O(1).
func (s *Sender[I]) Ack(tick uint32) {
	if !s.has || int32(tick-s.newest) > 0 {
		return // acks a tick never sent: ignore
	}
	if s.hasAck && int32(tick-s.acked) <= 0 {
		return
	}
	s.acked, s.hasAck = tick, true
}

// AppendFrames writes an input section with the newest min(N, frames held)
// frames to w and returns how many it wrote (0, writing nothing, before the
// first Push). Allocation-free once w's buffer has grown; O(N·NumLanes).
func (s *Sender[I]) AppendFrames(w *bitio.Writer) int {
	if !s.has {
		return 0
	}
	n := min(s.c.Redundancy(), s.count)
	first := s.newest - uint32(n) + 1
	viewed := true // (every frame has a view lag, or the section carries none)
	for i := 0; i < n; i++ {
		t := first + uint32(i)
		copy(s.out[i*s.nl:(i+1)*s.nl], s.slot(t))
		s.outV[i], viewed = s.views[t%senderRing], viewed && s.viewed[t%senderRing]
	}
	var views []uint16
	if viewed {
		views = s.outV[:n]
	}
	var base []uint64
	var baseTick uint32
	if s.hasAck {
		back := int64(int32(first - s.acked))
		// The frame must still be in our ring, and within the window.
		if back >= -MaxRedundancy && back <= int64(s.c.BaselineWindow()) && int(int32(s.newest-s.acked)) < s.count {
			base, baseTick = s.slot(s.acked), s.acked
		}
	}
	s.c.AppendFrames(w, first, s.out[:n*s.nl], views, baseTick, base)
	return n
}
