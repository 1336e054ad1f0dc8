package inputlog

import (
	"fmt"

	"github.com/archenet/archenet/input/internal/frames"
	"github.com/archenet/archenet/input/internal/inputerr"
	"github.com/archenet/archenet/replication/bitio"
)

// MaxFeedbackDepth bounds [Feedback].Depth on the wire; larger magnitudes
// are clamped when written and rejected when read.
const MaxFeedbackDepth = 255

// AppendFeedback writes f: 1 bit HasAck, then the low 16 bits of Ack if set,
// then Depth (clamped to ±MaxFeedbackDepth) as an order-0 exp-Golomb code
// of its zigzag value. Typically 20–26 bits. Allocation-free once w's buffer
// has grown. (The replication layer carries the feedback in its own
// datagram header; these are for input carried over a link of one's own,
// as package input's simulation test does.)
func AppendFeedback(w *bitio.Writer, f Feedback) {
	w.WriteBool(f.HasAck)
	if f.HasAck {
		w.WriteBits(uint64(f.Ack), frames.TickBits)
	}
	d := min(max(f.Depth, -MaxFeedbackDepth), MaxFeedbackDepth)
	w.WriteExpGolomb(bitio.ZigZag(int64(d)), 0)
}

// ReadFeedback reads what [AppendFeedback] wrote. ref is the client's
// newest input tick: the ack is extended to the tick nearest to it. Errors
// wrap inputerr.ErrMalformed. Never panics.
func ReadFeedback(r *bitio.Reader, ref uint32) (Feedback, error) {
	var f Feedback
	f.HasAck = r.ReadBool()
	if f.HasAck {
		low := uint16(r.ReadBits(frames.TickBits))
		f.Ack = ref + uint32(int32(int16(low-uint16(ref))))
	}
	d := bitio.UnZigZag(r.ReadExpGolomb(0))
	if err := r.Err(); err != nil {
		return Feedback{}, fmt.Errorf("%w: feedback: %w", inputerr.ErrMalformed, err)
	}
	if d < -MaxFeedbackDepth || d > MaxFeedbackDepth {
		return Feedback{}, fmt.Errorf("%w: feedback depth %d", inputerr.ErrMalformed, d)
	}
	f.Depth = int(d)
	return f, nil
}
