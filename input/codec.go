package input

import (
	"errors"
	"fmt"
	"math/bits"

	"github.com/archenet/archenet/replication/schema"
)

// MaxRedundancy is the largest number of frames one input section carries
// (the section's count field is 5 bits wide).
const MaxRedundancy = 32

// Sentinel errors. Decode and log errors wrap one of them; test with
// errors.Is.
var (
	// ErrMalformed: an input section no encoder produces (truncated, a
	// count above the limit, a code outside its lane's range, a residual
	// that leaves the range). Drop the datagram; count it against the client.
	ErrMalformed = errors.New("input: malformed input section")
	// errNoBaseline: the section is coded against an acked frame the
	// receiver no longer holds. Drop the datagram; an honest sender falls
	// back to the zero baseline on its own once its ack ages out.
	errNoBaseline = errors.New("input: baseline frame not held")
	// errFlood: the client sends more input datagrams than its rate limit
	// allows ([LogConfig.DatagramsPerTick], [LogConfig.Burst]); the datagram
	// was not decoded. A caller may disconnect a client that keeps flooding.
	errFlood = errors.New("input: client exceeds its input datagram rate")
	// ErrInvalidConfig wraps every configuration error.
	ErrInvalidConfig = errors.New("input: invalid configuration")
)

// Config configures the input codec of a Player or Authority (both sides
// must agree). Its zero value is a codec with its own schema
// registry, 4 frames per datagram and a 32-tick baseline window.
type Config struct {
	// Registry compiles the input type. Nil: a private registry. Passing the
	// game's registry puts the input layout into its protocol hash; if the
	// type is already registered there, its plan is reused.
	Registry *schema.Registry
	// Redundancy is the number of newest frames each input section carries
	// (N). Zero: 4. At most [MaxRedundancy].
	Redundancy int
	// BaselineWindow is how far (in ticks) behind the oldest frame of a
	// section an acked baseline may be and still be used; older acks make the
	// sender code against the zero input. Zero: 32. At most 64.
	BaselineWindow int
	// Hold is how many ticks in a row the server repeats a client's last
	// input when its frames stop arriving (a burst of loss the redundancy
	// did not cover). Past it the client's inputs are taken to be cut off
	// (an outage): the server applies the outage input
	// (AuthorityConfig.Outage), and the client, which sees that from the
	// server's input acks or from snapshots that stopped, samples no input
	// and predicts and sends the outage input too (PlayerConfig.Outage), so
	// that both sides agree on where its entity went. Server and client
	// must use the same value. Zero: 15 (a quarter second at 60 Hz).
	// Negative: forever (the last input is repeated throughout an outage).
	Hold int
}

// DefaultHold is the default of [Config].Hold.
const DefaultHold = 15

// groupKind says how a changed field group is coded.
type groupKind uint8

const (
	groupFlip     groupKind = iota // one bool lane: changed means flipped, 0 bits
	groupResidual                  // fixed/angle lanes: residual or absolute per lane
	groupFull                      // anything else: the group's full schema encoding
)

// Typed pointers go through unsafe.Pointer rather than
// schema.QuantizeValue: the plan's type is I by construction, and the typed
// helpers make their argument escape (it appears in a panic message), which
// would cost an allocation per frame.

// codec encodes and decodes input frames of the game's input type I: plain
// structs with `net` precision tags (see package schema). A codec is
// immutable after newCodec and safe for concurrent use.
type codec[I any] struct {
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

// newCodec compiles input type I. It fails if I cannot be registered (see
// schema.Register) or cfg is out of range (wrapping [ErrInvalidConfig]).
// Cost: reflection once.
func newCodec[I any](cfg Config) (*codec[I], error) {
	if cfg.Redundancy < 0 || cfg.Redundancy > MaxRedundancy {
		return nil, fmt.Errorf("%w: Redundancy %d not in 0..%d", ErrInvalidConfig, cfg.Redundancy, MaxRedundancy)
	}
	if cfg.BaselineWindow < 0 || cfg.BaselineWindow > 64 {
		return nil, fmt.Errorf("%w: BaselineWindow %d not in 0..64", ErrInvalidConfig, cfg.BaselineWindow)
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
	c := &codec[I]{
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
func (c *codec[I]) Plan() *schema.Plan { return c.plan }

// NumLanes returns the number of quantized lanes per frame.
func (c *codec[I]) NumLanes() int { return len(c.lanes) }

// Redundancy returns N, the number of frames per section.
func (c *codec[I]) Redundancy() int { return c.n }

// Hold returns [Config].Hold resolved: ticks of missing input that repeat
// the last one before the outage input applies; negative: forever.
func (c *codec[I]) Hold() int { return c.hold }

// BaselineWindow returns the configured baseline window in ticks.
func (c *codec[I]) BaselineWindow() int { return c.window }

// Quantize converts an input value to lanes (len ≥ NumLanes). Values outside
// a field's range clamp to its ends; NaN becomes 0 (see package quant).
// Allocation-free.
func (c *codec[I]) Quantize(in *I, lanes []uint64) { schema.QuantizeValue(c.plan, in, lanes) }

// Dequantize converts lanes back to an input value. Allocation-free.
func (c *codec[I]) Dequantize(lanes []uint64, out *I) { schema.DequantizeValue(c.plan, lanes, out) }

// Round replaces *in by the value the server will decode: what a client must
// feed its own prediction so it matches the server bit for bit.
func (c *codec[I]) Round(in *I, scratch []uint64) {
	c.Quantize(in, scratch)
	c.Dequantize(scratch, in)
}

// residualOrder is the exp-Golomb order for the next residual of a lane,
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
