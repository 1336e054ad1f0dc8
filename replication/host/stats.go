package host

import (
	"slices"
	"sync/atomic"
	"time"
)

// refusal is a kind of routing refusal.
type refusal uint8

const (
	refuseMalformed refusal = iota
	refuseVersion
	refuseDraining
	refuseUnknownMatch
	refuseMatchBusy
	refuseBusy
	refuseHelloTimeout
	refuseTokenMalformed
	refuseTokenWrongKey
	refuseTokenExpired
	refuseTokenWrongServer
	refuseTokenReplayed
	refuseTokenBusy
	numRefusals
)

// The keys of Stats.Refused: why the host refused connections.
const (
	RefusedMalformedHello   = "malformed hello"    // a first message that is not a Hello
	RefusedProtocolVersion  = "protocol version"   // another ProtocolVersion
	RefusedDraining         = "draining"           // the host is draining (Host.Drain)
	RefusedUnknownMatch     = "unknown match"      // no open match of the name (or the token's)
	RefusedMatchBusy        = "match busy"         // the match's handoff queue is full
	RefusedHostBusy         = "host busy"          // Config.MaxHandshakes connections in the handshake
	RefusedHelloTimeout     = "no hello in time"   // no Hello within the handshake timeout
	RefusedTokenMalformed   = "token malformed"    // token.ErrMalformed
	RefusedTokenWrongKey    = "token wrong key"    // token.ErrWrongKey
	RefusedTokenExpired     = "token expired"      // token.ErrExpired
	RefusedTokenWrongServer = "token wrong server" // token.ErrWrongServer
	RefusedTokenReplayed    = "token replayed"     // token.ErrReplayed
	RefusedTokenCacheFull   = "token cache full"   // token.ErrBusy
)

var refusalNames = [numRefusals]string{RefusedMalformedHello, RefusedProtocolVersion, RefusedDraining, RefusedUnknownMatch,
	RefusedMatchBusy, RefusedHostBusy, RefusedHelloTimeout, RefusedTokenMalformed, RefusedTokenWrongKey, RefusedTokenExpired,
	RefusedTokenWrongServer, RefusedTokenReplayed, RefusedTokenCacheFull}

func (r refusal) String() string { return refusalNames[r] }

// counters are the host's cumulative counts, updated from any goroutine.
type counters struct {
	accepted, routed, opened atomic.Uint64
	ended, crashed, stalled  atomic.Uint64
	released                 atomic.Uint64
	closesDropped            atomic.Uint64
	refused                  [numRefusals]atomic.Uint64
}

// Stats are the host's counts since New, and its matches now.
type Stats struct {
	// Accepted counts connections the listener produced; Routed those
	// handed to a match (whose server may still refuse them).
	Accepted, Routed uint64
	// Refused counts the connections the host refused, by reason: the
	// Refused* constants (RefusedUnknownMatch, ...; only those that happened).
	Refused map[string]uint64
	// Opened, Ended, Crashed and Stalled count matches opened, ended (any
	// way), ended by a panic in their frame, and ended because they stalled
	// (Config.StallAfter).
	Opened, Ended, Crashed, Stalled uint64
	// TokensReleased counts connect tokens given back because their
	// connection did not join (the match was busy or ended, its server
	// refused it, or the client gave up before its Welcome).
	TokensReleased uint64
	// ClosesDropped counts refused connections whose close was not run
	// (thousands of closes queued behind a transport whose closes hang):
	// they end by its idle
	// timeout.
	ClosesDropped uint64
	// Matches are the open matches' stats, by name.
	Matches []MatchStats
	// Clients is the sum of the matches' clients.
	Clients int
}

// Stats returns the host's counts and its open matches' stats.
func (h *Host) Stats() Stats {
	s := Stats{Accepted: h.stats.accepted.Load(), Routed: h.stats.routed.Load(), Opened: h.stats.opened.Load(),
		Ended: h.stats.ended.Load(), Crashed: h.stats.crashed.Load(), Stalled: h.stats.stalled.Load(),
		TokensReleased: h.stats.released.Load(), ClosesDropped: h.stats.closesDropped.Load(),
		Refused: map[string]uint64{}}
	for i := range numRefusals {
		if n := h.stats.refused[i].Load(); n > 0 {
			s.Refused[refusal(i).String()] = n
		}
	}
	for _, m := range h.Matches() {
		ms := m.Stats()
		s.Clients += ms.Clients
		s.Matches = append(s.Matches, ms)
	}
	return s
}

// MatchStats are one match's figures.
type MatchStats struct {
	Name string
	// Clients is the number of clients connected to the match's server;
	// Suspended the seats it keeps for clients whose connection was lost,
	// and Resumed and SeatsExpired count its resumes and the seats that
	// expired (replication.ServerStats).
	Clients, Suspended, Resumed, SeatsExpired int
	// Frames counts the frames run; Late those that started more than a
	// frame period after they were due (the match, or the machine, was
	// behind).
	Frames, Late uint64
	// FrameMean, FrameP99 and FrameWorst are the wall time of Game.Frame
	// over the last tickWindowLen frames (0 before the first).
	FrameMean, FrameP99, FrameWorst time.Duration
	// Routed counts connections the host handed to the match.
	Routed uint64
	// BytesDown counts the snapshot and spawn bytes the match's server sent
	// (replication.ServerStats.SnapshotBytes + SpawnBytes).
	BytesDown uint64
	// Ending is why the match is ending, once it is ("" before).
	Ending string
}

// tickWindowLen is how many of a match's latest frames its frame-time
// figures cover.
const tickWindowLen = 1024

// frameWindow is a ring of a match's latest frame times.
type frameWindow struct {
	d    [tickWindowLen]time.Duration
	n    int // frames recorded (capped at tickWindowLen)
	next int
}

func (w *frameWindow) add(d time.Duration) {
	w.d[w.next] = d
	w.next = (w.next + 1) % tickWindowLen
	w.n = min(w.n+1, tickWindowLen)
}

// figures returns the window's mean, 99th percentile and worst.
func (w *frameWindow) figures() (mean, p99, worst time.Duration) {
	if w.n == 0 {
		return 0, 0, 0
	}
	s := slices.Clone(w.d[:w.n])
	slices.Sort(s)
	var sum time.Duration
	for _, d := range s {
		sum += d
	}
	return sum / time.Duration(len(s)), s[(len(s)*99+99)/100-1], s[len(s)-1]
}
