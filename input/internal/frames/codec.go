package frames

import (
	"errors"
	"fmt"
	"math/bits"

	"github.com/archenet/archenet/input/internal/inputerr"
	"github.com/archenet/archenet/replication/schema"
)

// MaxRedundancy is the largest number of frames one input section carries
// (the section's count field is 5 bits wide).
const MaxRedundancy = 32

// DefaultHold is the default of [Config].Hold.
const DefaultHold = 15

// ErrNoBaseline: the section is coded against an acked frame the receiver
// no longer holds. Drop the datagram; an honest sender falls back to the
// zero baseline on its own once its ack ages out.
var ErrNoBaseline = errors.New("input: baseline frame not held")

// Config configures a [Codec] (both sides must agree). Its fields are
// input.Config's, which converts to it. Its zero value is a codec with its
// own schema registry, 4 frames per datagram, a 32-tick baseline window and
// a hold of [DefaultHold] ticks.
type Config struct {
	// Registry compiles the input type. Nil: a private registry. If the
	// type is already registered there, its plan is reused.
	Registry *schema.Registry
	// Redundancy is the number of newest frames each input section carries
	// (N). Zero: 4. At most [MaxRedundancy].
	Redundancy int
	// BaselineWindow is how far (in ticks) behind the oldest frame of a
	// section an acked baseline may be and still be used; older acks make
	// the sender code against the zero input. Zero: 32. At most 64.
	BaselineWindow int
	// Hold is how many ticks in a row the server's input log repeats a
	// client's last input when its frames stop arriving, before it reports
	// an outage. Zero: [DefaultHold]. Negative: forever.
	Hold int
}

// groupKind says how a changed field group is coded.
type groupKind uint8

const (
	groupFlip     groupKind = iota // one bool lane: changed means flipped, 0 bits
	groupResidual                  // fixed/angle lanes: residual or absolute per lane
	groupFull                      // anything else: the group's full schema encoding
)

// Codec encodes and decodes input frames of the game's input type I: plain
// structs with `net` precision tags (see package schema). A Codec is
// immutable after New and safe for concurrent use.
type Codec[I any] struct {
	plan   *schema.Plan
	lanes  []schema.Lane
	groups []schema.Group
	kinds  []groupKind
	zero   []uint64 // the quantized zero value of I: the baseline of a first frame
	n      int      // redundancy
	window int
	hold   int // Config.Hold (negative: forever)
	ng     uint
}

// New compiles input type I. It fails if I cannot be registered (see
// schema.Register) or cfg is out of range (wrapping
// inputerr.ErrInvalidConfig). Cost: reflection once.
func New[I any](cfg Config) (*Codec[I], error) {
	if cfg.Redundancy < 0 || cfg.Redundancy > MaxRedundancy {
		return nil, fmt.Errorf("%w: Redundancy %d not in 0..%d", inputerr.ErrInvalidConfig, cfg.Redundancy, MaxRedundancy)
	}
	if cfg.BaselineWindow < 0 || cfg.BaselineWindow > 64 {
		return nil, fmt.Errorf("%w: BaselineWindow %d not in 0..64", inputerr.ErrInvalidConfig, cfg.BaselineWindow)
	}
	if cfg.Redundancy == 0 {
		cfg.Redundancy = 4
	}
	if cfg.BaselineWindow == 0 {
		cfg.BaselineWindow = 32
	}
	if cfg.Hold == 0 {
		cfg.Hold = DefaultHold
	}
	reg := cfg.Registry
	if reg == nil {
		reg = schema.NewRegistry()
	}
	plan := schema.PlanOf[I](reg)
	if plan == nil {
		var err error
		if plan, err = schema.Register[I](reg); err != nil {
			return nil, err
		}
	}
	c := &Codec[I]{
		plan:   plan,
		lanes:  plan.Lanes(),
		groups: plan.Groups(),
		n:      cfg.Redundancy,
		window: cfg.BaselineWindow,
		hold:   cfg.Hold,
		ng:     uint(len(plan.Groups())),
	}
	c.kinds = make([]groupKind, len(c.groups))
	for g, gr := range c.groups {
		k := groupResidual
		for i := gr.First; i < gr.First+gr.Count; i++ {
			switch c.lanes[i].Kind {
			case schema.LaneFixed, schema.LaneAngle:
			case schema.LaneBool:
				if gr.Count == 1 {
					k = groupFlip
				} else {
					k = groupFull
				}
			default:
				k = groupFull
			}
		}
		c.kinds[g] = k
	}
	var zero I
	c.zero = make([]uint64, plan.NumLanes())
	schema.QuantizeValue(plan, &zero, c.zero)
	return c, nil
}

// Plan returns the compiled schema plan of I.
func (c *Codec[I]) Plan() *schema.Plan { return c.plan }

// NumLanes returns the number of quantized lanes per frame.
func (c *Codec[I]) NumLanes() int { return len(c.lanes) }

// Redundancy returns N, the number of frames per section.
func (c *Codec[I]) Redundancy() int { return c.n }

// Hold returns [Config].Hold resolved: ticks of missing input that repeat
// the last one before the outage input applies; negative: forever.
func (c *Codec[I]) Hold() int { return c.hold }

// BaselineWindow returns the configured baseline window in ticks.
func (c *Codec[I]) BaselineWindow() int { return c.window }

// Quantize converts an input value to lanes (len ≥ NumLanes). Values outside
// a field's range clamp to its ends; NaN becomes 0 (see package quant).
// Allocation-free.
func (c *Codec[I]) Quantize(in *I, lanes []uint64) { schema.QuantizeValue(c.plan, in, lanes) }

// Dequantize converts lanes back to an input value. Allocation-free.
func (c *Codec[I]) Dequantize(lanes []uint64, out *I) { schema.DequantizeValue(c.plan, lanes, out) }

// Round replaces *in by the value the server will decode: what a client must
// feed its own prediction so it matches the server bit for bit.
func (c *Codec[I]) Round(in *I, scratch []uint64) {
	c.Quantize(in, scratch)
	c.Dequantize(scratch, in)
}

// nextOrder is the exp-Golomb order for the next residual of a lane,
// adapted from the previous residual of the same lane in the same section
// (both ends see the same sequence, so they agree).
func nextOrder(z uint64) uint8 {
	k := bits.Len64(z)
	if k > 0 {
		k--
	}
	return uint8(min(k, 16))
}

// initialOrder is the exp-Golomb order of a lane's first residual in a
// section.
const initialOrder = 2

// absoluteOnly reports whether a lane is so narrow that a residual never
// pays for its flag bit.
func absoluteOnly(l *schema.Lane) bool { return l.Bits <= 4 }
