package input

import (
	"fmt"

	"github.com/archenet/archenet/replication/bitio"
)

// maxFeedbackDepth bounds feedback.Depth on the wire; larger magnitudes
// are clamped when written and rejected when read.
const maxFeedbackDepth = 255

// appendFeedback writes f: 1 bit HasAck, then the low 16 bits of Ack if set,
// then Depth (clamped to ±maxFeedbackDepth) as an order-0 exp-Golomb code
// of its zigzag value. Typically 20–26 bits. Allocation-free once w's buffer
// has grown.
func appendFeedback(w *bitio.Writer, f feedback) {
	w.WriteBool(f.HasAck)
	if f.HasAck {
		w.WriteBits(uint64(f.Ack), tickBits)
	}
	d := min(max(f.Depth, -maxFeedbackDepth), maxFeedbackDepth)
	w.WriteExpGolomb(bitio.ZigZag(int64(d)), 0)
}

// readFeedback reads what appendFeedback wrote. ref is the client's newest
// input tick: the ack is extended to the tick nearest to it. Errors wrap
// [ErrMalformed]. Never panics.
func readFeedback(r *bitio.Reader, ref uint32) (feedback, error) {
	var f feedback
	f.HasAck = r.ReadBool()
	if f.HasAck {
		low := uint16(r.ReadBits(tickBits))
		f.Ack = ref + uint32(int32(int16(low-uint16(ref))))
	}
	d := bitio.UnZigZag(r.ReadExpGolomb(0))
	if err := r.Err(); err != nil {
		return feedback{}, fmt.Errorf("%w: feedback: %w", ErrMalformed, err)
	}
	if d < -maxFeedbackDepth || d > maxFeedbackDepth {
		return feedback{}, fmt.Errorf("%w: feedback depth %d", ErrMalformed, d)
	}
	f.Depth = int(d)
	return f, nil
}
