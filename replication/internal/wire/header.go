package wire

import (
	"errors"
	"fmt"

	"github.com/archenet/archenet/replication/bitio"
)

// MaxParts bounds the datagrams of one tick for one client.
const MaxParts = 64

// Bounds of the input feedback a header carries.
const (
	MaxInputLead  = 1 << 16 // |InputHeld − InputAck|
	MaxInputDepth = 1023    // |InputDepth|
)

// Errors of ParseHeader (and of a receiver given such a datagram).
var (
	// ErrNotSnapshot: the datagram is not a snapshot datagram.
	ErrNotSnapshot = errors.New("snapshot: not a snapshot datagram")
	// ErrCompressed: ParseHeader was given a compressed datagram.
	ErrCompressed = errors.New("snapshot: compressed datagram (its header is inside the zstd body)")
)

// Header is the start of every snapshot datagram, after the kind byte: which
// tick and which part of it the datagram carries, the views its records are
// coded against, how they are coded, and the input extension. Each part of a
// tick has a header of its own and is decodable alone.
//
// Wire format (bits, LSB-first; EG(k) is exp-Golomb of order k):
//
//	tick            32
//	multi           1; if 1: part EG(0), parts − 2 EG(0)   (single-part ticks: just the 0)
//	baseline        EG(0) of tick − baseline tick, 0 = none
//	prediction      if baseline ≠ 0: 1 bit; if 1: EG(0) of baseline − B2 − 1, where B2
//	                is the prediction view: the view the baseline was decoded
//	                against, or a newer one the client acked; then 1 bit quad:
//	                positions are extrapolated quadratically through the view
//	                B3 = B2 − (baseline − B2) too
//	count           EG(0) records in this datagram
//	gap order       3
//	coding          if baseline ≠ 0: 1 bit "the baseline view's"; if 0, per lane
//	                class (world, other): 3 bits offset + 4, 4 bits cap, 4 bits
//	                plain order — the residual coding of the records (see [Coding])
//	extension       1; if 1: relative 1, then the input ack: EG(2) of the zigzag step
//	                from the baseline view's input ack if relative, else 32 bits;
//	                feedback 1; if 1: EG(2) zigzag lead (held − ack), EG(2) zigzag depth
type Header struct {
	Tick        uint32
	Part, Parts int    // this datagram is part Part of Parts (0 ≤ Part < Parts ≤ MaxParts)
	Baseline    uint32 // Tick − baseline tick; 0 = coded against an empty world
	Predict     bool   // delta records may be coded against the extrapolation through B2
	PredictGap  uint32 // baseline tick − B2 − 1 (with Predict)
	Quad        bool   // (with Predict) positions extrapolated through B3 = B2 − (baseline − B2) too
	Count       int    // records that follow
	GapOrder    uint8  // exp-Golomb order of the slot gaps (0..7)
	// Coding is the residual coding of the delta records, unless
	// CodingInherited: then it is the baseline view's (the view's tick was
	// coded with it). Without a baseline there are no deltas and no coding
	// on the wire (views decoded so have DefaultCoding).
	Coding          Coding
	CodingInherited bool

	HasInputAck bool
	// InputAckRelative: InputAck is int32(step) from the input ack of the
	// baseline view, not the ack itself.
	InputAckRelative bool
	InputAck         uint32
	HasInputFeedback bool
	InputLead        int64 // held − ack, within ±MaxInputLead
	InputDepth       int64 // within ±MaxInputDepth
}

// maxHeaderCount bounds Count for BitLen's worst case (a datagram cannot
// carry more records than it has bits).
const maxHeaderCount = 1 << 16

// MaxHeaderBits bounds Header.BitLen for every valid header with a
// baseline distance below 128 and Count below 65536.
var MaxHeaderBits = maxHeaderBits()

func maxHeaderBits() int {
	step := int32(-MaxInputLead)
	h := Header{
		Tick: 1 << 31, Part: MaxParts - 1, Parts: MaxParts, Baseline: 127, Predict: true, PredictGap: 127,
		Count: maxHeaderCount - 1, GapOrder: 7, HasInputAck: true, InputAckRelative: true, InputAck: uint32(step),
		HasInputFeedback: true, InputLead: -MaxInputLead, InputDepth: -MaxInputDepth,
	}
	return h.BitLen()
}

// AppendBits writes h to w. It does not check h (see [Header.Check]).
func (h *Header) AppendBits(w *bitio.Writer) {
	w.WriteBits(uint64(h.Tick), 32)
	if h.Parts > 1 {
		w.WriteBits(1, 1)
		w.WriteExpGolomb(uint64(h.Part), 0)
		w.WriteExpGolomb(uint64(h.Parts-2), 0)
	} else {
		w.WriteBits(0, 1)
	}
	w.WriteExpGolomb(uint64(h.Baseline), 0)
	if h.Baseline != 0 {
		w.WriteBool(h.Predict)
		if h.Predict {
			w.WriteExpGolomb(uint64(h.PredictGap), 0)
			w.WriteBool(h.Quad)
		}
	}
	w.WriteExpGolomb(uint64(h.Count), 0)
	w.WriteBits(uint64(h.GapOrder), 3)
	if h.Baseline != 0 {
		w.WriteBool(h.CodingInherited)
		if !h.CodingInherited {
			h.Coding.AppendBits(w)
		}
	}
	w.WriteBool(h.HasInputAck)
	if !h.HasInputAck {
		return
	}
	w.WriteBool(h.InputAckRelative)
	if h.InputAckRelative {
		w.WriteExpGolomb(bitio.ZigZag(int64(int32(h.InputAck))), 2)
	} else {
		w.WriteBits(uint64(h.InputAck), 32)
	}
	w.WriteBool(h.HasInputFeedback)
	if h.HasInputFeedback {
		w.WriteExpGolomb(bitio.ZigZag(h.InputLead), 2)
		w.WriteExpGolomb(bitio.ZigZag(h.InputDepth), 2)
	}
}

// BitLen returns the exact number of bits AppendBits writes for h.
func (h *Header) BitLen() int {
	n := 32 + 1 + 3 + 1 + bitio.ExpGolombLen(uint64(h.Baseline), 0) + bitio.ExpGolombLen(uint64(h.Count), 0)
	if h.Baseline != 0 {
		n++
		if !h.CodingInherited {
			n += CodingBits
		}
	}
	if h.Parts > 1 {
		n += bitio.ExpGolombLen(uint64(h.Part), 0) + bitio.ExpGolombLen(uint64(h.Parts-2), 0)
	}
	if h.Baseline != 0 {
		n++
		if h.Predict {
			n += bitio.ExpGolombLen(uint64(h.PredictGap), 0) + 1
		}
	}
	if h.HasInputAck {
		n += 2
		if h.InputAckRelative {
			n += bitio.ExpGolombLen(bitio.ZigZag(int64(int32(h.InputAck))), 2)
		} else {
			n += 32
		}
		if h.HasInputFeedback {
			n += bitio.ExpGolombLen(bitio.ZigZag(h.InputLead), 2) + bitio.ExpGolombLen(bitio.ZigZag(h.InputDepth), 2)
		}
	}
	return n
}

// Check reports whether h is a header a decoder accepts (apart from the
// receiver's own limits: ring depth and the views it holds).
func (h *Header) Check() error {
	switch {
	case h.Tick == 0:
		return fmt.Errorf("%w: tick 0", ErrCorrupt)
	case h.Parts < 1 || h.Parts > MaxParts || h.Part < 0 || h.Part >= h.Parts:
		return fmt.Errorf("%w: part %d of %d", ErrCorrupt, h.Part, h.Parts)
	case h.Baseline >= h.Tick:
		return fmt.Errorf("%w: tick %d baseline distance %d", ErrCorrupt, h.Tick, h.Baseline)
	case h.Predict && (h.Baseline == 0 || uint64(h.Baseline)+uint64(h.PredictGap)+1 >= uint64(h.Tick)):
		return fmt.Errorf("%w: prediction view distance %d", ErrCorrupt, uint64(h.Baseline)+uint64(h.PredictGap)+1)
	case h.Quad && (!h.Predict || uint64(h.Baseline)+2*(uint64(h.PredictGap)+1) >= uint64(h.Tick)):
		return fmt.Errorf("%w: quadratic prediction view distance %d", ErrCorrupt, uint64(h.Baseline)+2*(uint64(h.PredictGap)+1))
	case h.GapOrder > 7:
		return fmt.Errorf("%w: gap order %d", ErrCorrupt, h.GapOrder)
	case h.CodingInherited && h.Baseline == 0:
		return fmt.Errorf("%w: coding inherited from no baseline", ErrCorrupt)
	case !h.Coding.Valid():
		return fmt.Errorf("%w: residual coding %v", ErrCorrupt, h.Coding)
	case h.InputAckRelative && (!h.HasInputAck || h.Baseline == 0):
		return fmt.Errorf("%w: input ack relative to no baseline", ErrCorrupt)
	case h.InputAckRelative && (int32(h.InputAck) < -MaxInputLead || int32(h.InputAck) > MaxInputLead):
		return fmt.Errorf("%w: input ack step %d", ErrCorrupt, int32(h.InputAck))
	case h.InputLead < -MaxInputLead || h.InputLead > MaxInputLead || h.InputDepth < -MaxInputDepth || h.InputDepth > MaxInputDepth:
		return fmt.Errorf("%w: input feedback lead %d depth %d", ErrCorrupt, h.InputLead, h.InputDepth)
	}
	return nil
}

// ReadHeader reads a header from r (after the kind byte) and checks it. Every count it reads is
// bounded before use; it never panics.
func ReadHeader(r *bitio.Reader) (Header, error) {
	var h Header
	h.Tick = uint32(r.ReadBits(32))
	h.Parts = 1
	if r.ReadBool() {
		p, n := r.ReadExpGolomb(0), r.ReadExpGolomb(0)
		if p >= MaxParts || n > MaxParts-2 {
			return h, fmt.Errorf("%w: part %d of %d", ErrCorrupt, p, n+2)
		}
		h.Part, h.Parts = int(p), int(n)+2
	}
	d := r.ReadExpGolomb(0)
	if d >= 1<<32 {
		return h, fmt.Errorf("%w: baseline distance %d", ErrCorrupt, d)
	}
	h.Baseline = uint32(d)
	if h.Baseline != 0 {
		if h.Predict = r.ReadBool(); h.Predict {
			g := r.ReadExpGolomb(0)
			if g >= 1<<32 {
				return h, fmt.Errorf("%w: prediction view distance %d", ErrCorrupt, g)
			}
			h.PredictGap = uint32(g)
			h.Quad = r.ReadBool()
		}
	}
	count := r.ReadExpGolomb(0)
	h.GapOrder = uint8(r.ReadBits(3))
	if h.Baseline != 0 {
		if h.CodingInherited = r.ReadBool(); !h.CodingInherited {
			h.Coding.ReadBits(r)
		}
	} else {
		h.Coding = DefaultCoding
	}
	if h.HasInputAck = r.ReadBool(); h.HasInputAck {
		if h.InputAckRelative = r.ReadBool(); h.InputAckRelative {
			step := bitio.UnZigZag(r.ReadExpGolomb(2))
			if step < -MaxInputLead || step > MaxInputLead {
				return h, fmt.Errorf("%w: input ack step %d", ErrCorrupt, step)
			}
			h.InputAck = uint32(int32(step))
		} else {
			h.InputAck = uint32(r.ReadBits(32))
		}
		if h.HasInputFeedback = r.ReadBool(); h.HasInputFeedback {
			h.InputLead = bitio.UnZigZag(r.ReadExpGolomb(2))
			h.InputDepth = bitio.UnZigZag(r.ReadExpGolomb(2))
		}
	}
	if err := r.Err(); err != nil {
		return h, err
	}
	if count > uint64(r.BitsLeft()) {
		return h, fmt.Errorf("%w: %d records in %d bits", ErrCorrupt, count, r.BitsLeft())
	}
	h.Count = int(count)
	return h, h.Check()
}

// ParseHeader reads the header of the snapshot datagram b (its kind byte included):
// which tick and part it carries and the views its records are coded against, for
// tools and tests that compare what clients were sent. A compressed datagram's
// header is inside its zstd body: ParseHeader fails with [ErrCompressed] for one.
// Other errors match [ErrNotSnapshot] or [ErrCorrupt]; it never panics.
func ParseHeader(b []byte) (Header, error) {
	if len(b) < 1 || b[0]&^(FlagCompressed|FlagMessages) != KindSnapshot {
		return Header{}, ErrNotSnapshot
	}
	if b[0]&FlagCompressed != 0 {
		return Header{}, ErrCompressed
	}
	var r bitio.Reader
	r.Reset(b[1:])
	return ReadHeader(&r)
}
