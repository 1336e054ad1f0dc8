package frames

import (
	"fmt"
	"math/bits"

	"github.com/archenet/archenet/input/internal/inputerr"
	"github.com/archenet/archenet/replication/bitio"
	"github.com/archenet/archenet/replication/schema"
)

// Baselines gives a decoder the frames the receiver acknowledged, by tick.
// The server's input log implements it; the returned lanes must not be
// modified.
type Baselines interface {
	Baseline(tick uint32) (lanes []uint64, ok bool)
}

// Section is a decoded input section: Count frames for ticks First,
// First+1, …. Reuse one Section per connection: after its first use,
// [Codec.ReadFrames] into it does not allocate.
type Section struct {
	// First is the tick of the oldest frame, extended to 32 bits around the
	// reference tick given to ReadFrames.
	First uint32
	// Count is the number of frames (1..Redundancy).
	Count int
	// Based reports whether the oldest frame was coded against an acked
	// baseline, BaseTick.
	Based    bool
	BaseTick uint32
	// HasView reports whether the frames carry view lags (Section.View).
	HasView bool

	nl    int
	lanes []uint64
	views [MaxRedundancy]uint16
}

// View returns frame i's view lag in quarter ticks: how far behind tick i
// the client's render clock was when it sampled the frame. ok is false if
// the section carried none. Panics if i is not in 0..Count−1.
func (f *Section) View(i int) (quarterTicks uint16, ok bool) {
	if i < 0 || i >= f.Count {
		panic("input: Section.View index out of range")
	}
	return f.views[i], f.HasView
}

// Tick returns the tick of frame i.
func (f *Section) Tick(i int) uint32 { return f.First + uint32(i) }

// Lanes returns the quantized lanes of frame i (valid until the next
// ReadFrames into f). Panics if i is not in 0..Count−1.
func (f *Section) Lanes(i int) []uint64 {
	if i < 0 || i >= f.Count {
		panic("input: Section.Lanes index out of range")
	}
	return f.lanes[i*f.nl : (i+1)*f.nl]
}

// ReadFrames decodes an input section written by [Codec.AppendFrames] from r
// into dst, leaving r just past the section. ref is the receiver's current
// tick: the 16-bit tick on the wire is extended to the tick nearest to ref,
// so ticks must stay within ±32767 of ref (a server rejects frames that far
// off anyway). bases resolves an acked baseline; it may be nil when the peer
// never codes against one.
//
// Errors: truncated or invalid input wraps [inputerr.ErrMalformed] (and
// the underlying bitio or schema error); a count above the codec's
// Redundancy is [inputerr.ErrMalformed]; a baseline bases does not hold is
// [ErrNoBaseline]. Never panics; the count is bounded before anything is
// sized by it, and dst's buffer is sized once for Redundancy frames.
func (c *Codec[I]) ReadFrames(r *bitio.Reader, ref uint32, bases Baselines, dst *Section) error {
	nl := len(c.lanes)
	if dst.nl != nl || cap(dst.lanes) < c.n*nl {
		dst.nl = nl
		dst.lanes = make([]uint64, c.n*nl)
	}
	dst.Count = 0
	low := uint16(r.ReadBits(TickBits))
	count := int(r.ReadBits(countBits)) + 1
	based := r.ReadBool()
	if err := r.Err(); err != nil {
		return fmt.Errorf("%w: header: %w", inputerr.ErrMalformed, err)
	}
	if count > c.n {
		return fmt.Errorf("%w: %d frames, limit %d", inputerr.ErrMalformed, count, c.n)
	}
	first := ref + uint32(int32(int16(low-uint16(ref))))
	base := c.zero
	dst.Based = based
	if based {
		back := bitio.UnZigZag(r.ReadExpGolomb(0))
		if err := r.Err(); err != nil {
			return fmt.Errorf("%w: baseline: %w", inputerr.ErrMalformed, err)
		}
		if back < -MaxRedundancy-1 || back >= int64(c.window) {
			return fmt.Errorf("%w: baseline %d ticks back, window %d", inputerr.ErrMalformed, back+1, c.window)
		}
		dst.BaseTick = first - 1 - uint32(int32(back))
		var ok bool
		if bases != nil {
			base, ok = bases.Baseline(dst.BaseTick)
		}
		if !ok || len(base) < nl {
			return fmt.Errorf("%w: tick %d", ErrNoBaseline, dst.BaseTick)
		}
	}
	dst.First = first
	if err := readViews(r, count, dst); err != nil {
		return err
	}
	var ord [256]uint8
	for i := range ord[:nl] {
		ord[i] = initialOrder
	}
	var mask uint64
	for f := 0; f < count; f++ {
		cur := dst.lanes[f*nl : (f+1)*nl]
		copy(cur, base)
		if f == 0 || !r.ReadBool() {
			mask = r.ReadBits(c.ng)
		}
		for m := mask; m != 0; m &= m - 1 {
			c.readGroup(r, bits.TrailingZeros64(m), base, cur, &ord)
		}
		if err := r.Err(); err != nil {
			return fmt.Errorf("%w: frame %d: %w", inputerr.ErrMalformed, f, err)
		}
		base = cur
	}
	dst.Count = count
	return nil
}

// readViews reads the section's view flag and the frames' view lags.
func readViews(r *bitio.Reader, count int, dst *Section) error {
	dst.HasView = r.ReadBool()
	if !dst.HasView {
		return r.Err()
	}
	v := int64(r.ReadBits(viewBits))
	dst.views[0] = uint16(v)
	for f := 1; f < count; f++ {
		v += bitio.UnZigZag(r.ReadExpGolomb(0))
		if v < 0 || v > MaxViewLag {
			return fmt.Errorf("%w: view lag of frame %d out of 0..%d", inputerr.ErrMalformed, f, MaxViewLag)
		}
		dst.views[f] = uint16(v)
	}
	if err := r.Err(); err != nil {
		return fmt.Errorf("%w: view lags: %w", inputerr.ErrMalformed, err)
	}
	return nil
}

func (c *Codec[I]) readGroup(r *bitio.Reader, g int, base, cur []uint64, ord *[256]uint8) {
	gr := &c.groups[g]
	switch c.kinds[g] {
	case groupFlip:
		cur[gr.First] = base[gr.First] ^ 1
	case groupFull:
		c.plan.ReadGroup(r, g, cur)
	default:
		single := gr.Count == 1
		for i := gr.First; i < gr.First+gr.Count; i++ {
			l := &c.lanes[i]
			if absoluteOnly(l) {
				cur[i] = schema.ReadLane(r, l)
				continue
			}
			k := ord[i]
			if r.ReadBool() {
				cur[i] = schema.ReadLane(r, l)
				z := bitio.ZigZag(l.Delta(base[i], cur[i]))
				ord[i] = nextOrder(z)
				continue
			}
			z := r.ReadExpGolomb(uint(k))
			if r.Err() != nil {
				return
			}
			if single {
				z++
			}
			ord[i] = nextOrder(z)
			v, ok := l.Apply(base[i], bitio.UnZigZag(z))
			if !ok {
				r.SetErr(fmt.Errorf("%w: %s residual leaves the range", schema.ErrCorrupt, gr.Name))
				return
			}
			cur[i] = v
		}
	}
}
