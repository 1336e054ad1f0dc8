package inputlog

import (
	"errors"
	"fmt"
	"math"
	"math/bits"

	"github.com/archenet/archenet/input/internal/frames"
	"github.com/archenet/archenet/input/internal/inputerr"
	"github.com/archenet/archenet/replication/bitio"
)

// MaxLeadLimit is the largest [Config].MaxLead: far below the ±32767
// ticks the 16-bit tick on the wire can resolve.
const MaxLeadLimit = 1024

// ErrFlood: the client sends more input datagrams than its rate limit
// allows ([Config].DatagramsPerTick, [Config].Burst); the datagram was not
// decoded. A caller may disconnect a client that keeps flooding.
var ErrFlood = errors.New("input: client exceeds its input datagram rate")

// Config configures a client's [Log]. Its fields are input.LogConfig's,
// which converts to it. Its zero value accepts input up to 64 ticks ahead
// and at most 3 datagrams per tick on average with bursts of 30.
type Config struct {
	// MaxLead is how far ahead of the next consumed tick a frame may be:
	// frames for ticks ≥ next+MaxLead are rejected (counted in
	// [Stats].Ahead). Zero: 64 (about 1 s at 60 Hz). At most [MaxLeadLimit].
	MaxLead int
	// DatagramsPerTick is the sustained rate of input datagrams a client may
	// send, per consumed server tick; the log refuses sections above
	// it. Zero: 3.
	DatagramsPerTick float64
	// Burst is how many datagrams above the sustained rate a client may send
	// at once (the token bucket's size). Zero: 30.
	Burst int
}

// Status says where the input [Log.Consume] returned came from.
type Status uint8

const (
	// None: no input has been received yet; the zero input.
	None Status = iota
	// Received: the client's own frame for this tick.
	Received
	// Missing: the frame did not arrive in time; the last applied input is
	// repeated (predicted-missing). The client predicted with its real
	// input, so expect a correction if the two differ.
	Missing
	// Outage: no frame arrived for more than the codec's Hold ticks
	// (frames.Config.Hold) since the last applied one: the client's inputs
	// are cut off. Consume returns the last applied input; the caller
	// applies the outage input made from it, which the client predicts
	// too.
	Outage
)

// String names the status.
func (s Status) String() string {
	switch s {
	case None:
		return "none"
	case Received:
		return "received"
	case Missing:
		return "missing"
	case Outage:
		return "outage"
	}
	return fmt.Sprintf("Status(%d)", uint8(s))
}

// Stats counts what a client's input log saw. All counters only grow. Its
// fields are input.Stats's, which it converts to.
type Stats struct {
	Datagrams  uint64 // input sections decoded successfully
	Malformed  uint64 // sections rejected as malformed (inputerr.ErrMalformed)
	NoBaseline uint64 // sections coded against a frame the log no longer holds
	Flooded    uint64 // sections refused by the rate limit
	Frames     uint64 // new frames stored
	Duplicate  uint64 // frames already held (redundant copies)
	Late       uint64 // frames that arrived after their tick was consumed
	Ahead      uint64 // frames rejected for being MaxLead or more ahead
	Consumed   uint64 // ticks consumed
	Received   uint64 // ticks consumed with the client's frame
	Missing    uint64 // ticks consumed without it (last input repeated, or the outage input)
	Outage     uint64 // of those, ticks past the codec's Hold (the outage input)
}

// Feedback is what the server tells a client about its inputs, in each
// snapshot datagram: what the client's frames.Sender.Ack and
// input.TickSync.ObserveFeedback take. [AppendFeedback] writes it.
type Feedback struct {
	// Ack is the newest tick whose frame the server holds, valid if HasAck.
	Ack    uint32
	HasAck bool
	// Depth is the smallest number of ticks of input that were buffered
	// beyond the consumed tick (newest held − consumed) over the ticks
	// consumed since the previous Feedback; negative when inputs arrive late.
	Depth int
}

// Log is the server's input log of one client: a ring of received frames,
// indexed by tick. [Log.Receive] stores the frames of an input section
// (deduplicated, bounded lead, rate-limited); [Log.Consume] returns the
// input for a tick exactly once, or repeats the last input when it is
// missing. Not safe for concurrent use.
type Log[I any] struct {
	c      *frames.Codec[I]
	cfg    Config
	nl     int
	mask   uint32 // ring size − 1
	ticks  []uint32
	held   []bool
	lanes  []uint64
	views  []uint16 // per slot: the frame's view lag (viewed: it had one)
	viewed []bool
	batch  frames.Section

	view    uint16 // the view lag of the frame the last Consume returned
	hasView bool

	hasNewest bool
	newest    uint32

	hasLast  bool
	last     []uint64
	lastTick uint32

	tokens   float64
	minDepth int
	hasDepth bool
	depth    int

	stats Stats
}

// New returns an empty log for codec c. It fails with
// inputerr.ErrInvalidConfig. Allocates its ring once: (MaxLead+128 rounded up to a
// power of two) × NumLanes × 8 bytes.
func New[I any](c *frames.Codec[I], cfg Config) (*Log[I], error) {
	if cfg.MaxLead < 0 || cfg.MaxLead > MaxLeadLimit {
		return nil, fmt.Errorf("%w: MaxLead %d not in 0..%d", inputerr.ErrInvalidConfig, cfg.MaxLead, MaxLeadLimit)
	}
	if cfg.DatagramsPerTick < 0 || math.IsNaN(cfg.DatagramsPerTick) || math.IsInf(cfg.DatagramsPerTick, 0) {
		return nil, fmt.Errorf("%w: DatagramsPerTick %v", inputerr.ErrInvalidConfig, cfg.DatagramsPerTick)
	}
	if cfg.Burst < 0 {
		return nil, fmt.Errorf("%w: Burst %d is negative", inputerr.ErrInvalidConfig, cfg.Burst)
	}
	if cfg.MaxLead == 0 {
		cfg.MaxLead = 64
	}
	if cfg.DatagramsPerTick == 0 {
		cfg.DatagramsPerTick = 3
	}
	if cfg.Burst == 0 {
		cfg.Burst = 30
	}
	// Room for MaxLead ahead plus baselines and late copies behind.
	size := 1 << bits.Len(uint(cfg.MaxLead+128-1))
	nl := c.NumLanes()
	return &Log[I]{
		c: c, cfg: cfg, nl: nl, mask: uint32(size - 1),
		ticks:  make([]uint32, size),
		held:   make([]bool, size),
		views:  make([]uint16, size),
		viewed: make([]bool, size),
		lanes:  make([]uint64, size*nl),
		last:   make([]uint64, nl),
		tokens: float64(cfg.Burst),
	}, nil
}

// Config returns the configuration with defaults filled in.
func (l *Log[I]) Config() Config { return l.cfg }

// Stats returns the counters.
func (l *Log[I]) Stats() Stats { return l.stats }

func (l *Log[I]) slot(tick uint32) int { return int(tick & l.mask) }

// Baseline returns the held frame of tick, implementing frames.Baselines.
func (l *Log[I]) Baseline(tick uint32) ([]uint64, bool) {
	i := l.slot(tick)
	if !l.held[i] || l.ticks[i] != tick {
		return nil, false
	}
	return l.lanes[i*l.nl : (i+1)*l.nl], true
}

// Receive decodes one input section from r (positioned at it, e.g. after the
// datagram header the replication layer reads) and stores its new frames.
// now is the next tick the server will consume. Frames for ticks before now
// are late (counted, dropped), frames at now+MaxLead or beyond are rejected
// (counted in Ahead), frames already held are duplicates (the first copy
// wins). It returns the number of new frames stored.
//
// Errors: [ErrFlood] when the client is over its datagram rate (nothing was
// decoded; the caller may disconnect a client that keeps doing this);
// inputerr.ErrMalformed or frames.ErrNoBaseline from decoding (drop the
// datagram). Quantized
// codes are validated while decoding, so every stored value is in range.
// Never panics; allocation-free on success.
func (l *Log[I]) Receive(r *bitio.Reader, now uint32) (int, error) {
	if l.tokens < 1 {
		l.stats.Flooded++
		return 0, ErrFlood
	}
	l.tokens--
	if err := l.c.ReadFrames(r, now, l, &l.batch); err != nil {
		if errors.Is(err, frames.ErrNoBaseline) {
			l.stats.NoBaseline++
		} else {
			l.stats.Malformed++
		}
		return 0, err
	}
	l.stats.Datagrams++
	stored := 0
	b := &l.batch
	for i := 0; i < b.Count; i++ {
		t := b.Tick(i)
		d := int32(t - now)
		s := l.slot(t)
		switch {
		case d >= int32(l.cfg.MaxLead):
			l.stats.Ahead++
		case l.held[s] && l.ticks[s] == t:
			l.stats.Duplicate++
		case d < 0:
			l.stats.Late++
		default:
			copy(l.lanes[s*l.nl:(s+1)*l.nl], b.Lanes(i))
			l.ticks[s], l.held[s] = t, true
			l.views[s], l.viewed[s] = b.View(i)
			if !l.hasNewest || int32(t-l.newest) > 0 {
				l.newest, l.hasNewest = t, true
			}
			l.stats.Frames++
			stored++
		}
	}
	return stored, nil
}

// Consume returns in *dst the input to apply at tick: the client's frame if
// held, else the last applied input repeated ([Missing], or [Outage] past
// the codec's Hold), else the zero input ([None]). Call it once per server
// tick with increasing ticks; it also refills the flood budget and
// measures the input buffer depth for [Log.Feedback]. Allocation-free,
// O(NumLanes).
func (l *Log[I]) Consume(tick uint32, dst *I) Status {
	l.tokens = min(l.tokens+l.cfg.DatagramsPerTick, float64(l.cfg.Burst))
	l.stats.Consumed++
	if l.hasNewest {
		d := int(int32(l.newest - tick))
		l.depth = d
		if !l.hasDepth || d < l.minDepth {
			l.minDepth, l.hasDepth = d, true
		}
	}
	if lanes, ok := l.Baseline(tick); ok {
		copy(l.last, lanes)
		l.hasLast, l.lastTick = true, tick
		l.c.Dequantize(l.last, dst)
		l.stats.Received++
		s := l.slot(tick)
		l.view, l.hasView = l.views[s], l.viewed[s]
		return Received
	}
	l.hasView = false
	if l.hasLast {
		l.c.Dequantize(l.last, dst)
		l.stats.Missing++
		if h := l.c.Hold(); h >= 0 && int32(tick-l.lastTick) > int32(h) {
			l.stats.Outage++
			return Outage
		}
		return Missing
	}
	var zero I
	*dst = zero
	return None
}

// View returns the view lag the client reported with the frame the last
// [Log.Consume] returned: how far behind that tick, in quarter ticks, its
// render clock was when it sampled the input (what it saw when it acted,
// for lag compensation). ok is false if that Consume did not return the
// client's own frame for the tick, or the frame carried no view lag.
func (l *Log[I]) View() (quarterTicks uint16, ok bool) { return l.view, l.hasView }

// LastApplied returns the tick of the client frame whose values the last
// [Log.Consume] returned (older than the consumed tick when the frame was
// missing); ok is false before the first received frame. The server sends it
// with the predicted entity's state (see predict.Predictor.Reconcile).
func (l *Log[I]) LastApplied() (tick uint32, ok bool) { return l.lastTick, l.hasLast }

// Feedback returns the client's feedback and starts a new depth window.
func (l *Log[I]) Feedback() Feedback {
	f := Feedback{Ack: l.newest, HasAck: l.hasNewest, Depth: l.depth}
	if l.hasDepth {
		f.Depth = l.minDepth
	}
	l.hasDepth = false
	return f
}
