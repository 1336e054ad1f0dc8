package lagcomp

import (
	"fmt"
	"math"
	"time"
)

// Limits bound how far back a client's claim may rewind the world, by what
// the server measured of that client rather than by what it claims: an
// honest client sees remote entities about one round trip plus its render
// (interpolation) delay in the past. Zero fields have documented defaults;
// negative ones are errors.
type Limits struct {
	// NetRate is the number of net ticks per second (replication's
	// ServerConfig.NetRate), to turn rewinds in time into net ticks.
	// Zero: 30.
	NetRate int
	// MaxLatency is the most round-trip time compensated: a client whose
	// measured RTT is longer is judged as if it were this long, so players
	// on very slow links must lead their targets, and nobody can shoot
	// further into the past by delaying their acks. Zero: 250 ms (the
	// limit Overwatch uses).
	MaxLatency time.Duration
	// InterpDelay is the render delay an honest client may draw remote
	// entities with, on top of the round trip (interp.Clock's target: one
	// net tick plus jitter and loss allowances). Zero: 100 ms.
	InterpDelay time.Duration
	// Margin covers what the round trip does not: the input clock's lead
	// beyond the upstream delay (its safety ticks and jitter margin: about
	// 35-70 ms), the render clock while it settles, and up to a net tick of
	// waiting on each side. Zero: 150 ms.
	Margin time.Duration
}

// Defaults of [Limits].
const (
	DefaultMaxLatency  = 250 * time.Millisecond
	DefaultInterpDelay = 100 * time.Millisecond
	DefaultMargin      = 150 * time.Millisecond
)

func (l Limits) resolve() (Limits, error) {
	if l.NetRate < 0 || l.MaxLatency < 0 || l.InterpDelay < 0 || l.Margin < 0 {
		return l, fmt.Errorf("%w: negative field in %+v", ErrInvalidConfig, l)
	}
	if l.NetRate == 0 {
		l.NetRate = 30
	}
	if l.MaxLatency == 0 {
		l.MaxLatency = DefaultMaxLatency
	}
	if l.InterpDelay == 0 {
		l.InterpDelay = DefaultInterpDelay
	}
	if l.Margin == 0 {
		l.Margin = DefaultMargin
	}
	return l, nil
}

// RewindStats are one client's counts of judged claims.
type RewindStats struct {
	Claims  uint64 // claims judged
	Clamped uint64 // claims that reached back further than their bound
	// LastClaim and LastBound are the rewind the newest claim asked for
	// and the bound it was judged against; MaxClaim is the longest rewind
	// any claim asked for.
	LastClaim, LastBound, MaxClaim time.Duration
}

// Rewinds judges clients' claimed view ticks against bounds made of what
// the server measured (each client's round-trip time) and keeps each
// client's statistics. One Rewinds serves any number of histories. Not
// safe for concurrent use: use it on the simulation goroutine.
type Rewinds struct {
	cfg   Limits
	stats [256]RewindStats
}

// NewRewinds returns a judge of rewinds; it fails with [ErrInvalidConfig].
func NewRewinds(cfg Limits) (*Rewinds, error) {
	cfg, err := cfg.resolve()
	if err != nil {
		return nil, err
	}
	return &Rewinds{cfg: cfg}, nil
}

// Limits returns the resolved limits.
func (r *Rewinds) Limits() Limits { return r.cfg }

// Bound returns the longest rewind a client whose round trip the server
// measured as rtt may have: min(rtt, MaxLatency) + InterpDelay + Margin.
func (r *Rewinds) Bound(rtt time.Duration) time.Duration {
	return min(max(rtt, 0), r.cfg.MaxLatency) + r.cfg.InterpDelay + r.cfg.Margin
}

// Judge returns the net tick at which to judge client's claim that, at net
// tick at (the present its action is judged in, e.g. the tick its input
// applies at), it saw the world of net tick view: view itself if that is
// no further back than [Rewinds.Bound](rtt), else at − the bound; never
// after at (NaN and infinite claims give at − the bound). The claim and
// its bound are counted in the client's [RewindStats]. Clamp the result to
// the history with [History.Clamp]. O(1), allocation-free.
func (r *Rewinds) Judge(client uint8, at, view float64, rtt time.Duration) float64 {
	bound := r.Bound(rtt)
	limit := bound.Seconds() * float64(r.cfg.NetRate)
	back := math.Remainder(at-view, 1<<32) // (ticks wrap at 2³²)
	s := &r.stats[client]
	s.Claims++
	s.LastBound = bound
	switch {
	case back != back || back > limit: // (NaN too)
		s.Clamped++
		back = limit
		s.LastClaim = r.claimed(at - view)
	case back < 0:
		back = 0
		s.LastClaim = 0
	default:
		s.LastClaim = r.duration(back)
	}
	s.MaxClaim = max(s.MaxClaim, s.LastClaim)
	return at - back
}

// claimed converts an over-long claim to a duration for the statistics
// (NaN and infinite claims count as a day).
func (r *Rewinds) claimed(ticks float64) time.Duration {
	ticks = math.Remainder(ticks, 1<<32)
	if ticks != ticks || ticks > 86400*float64(r.cfg.NetRate) {
		return 24 * time.Hour
	}
	return r.duration(ticks)
}

// duration converts net ticks to time, to the nearest microsecond.
func (r *Rewinds) duration(ticks float64) time.Duration {
	return time.Duration(math.Round(ticks*1e6/float64(r.cfg.NetRate))) * time.Microsecond
}

// Stats returns client's counts.
func (r *Rewinds) Stats(client uint8) RewindStats { return r.stats[client] }

// Reset forgets client's counts (when its slot is given to a new client).
func (r *Rewinds) Reset(client uint8) { r.stats[client] = RewindStats{} }
