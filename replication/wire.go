package replication

import (
	"time"

	"github.com/archenet/archenet/replication/internal/link"
	"github.com/archenet/archenet/replication/internal/wire"
)

// ProtocolVersion is the replication wire version checked at connect.
// 4: a Reject for a protocol hash mismatch carries the server's component
// list (transport.Reject.Protocol). 6: an input section carries each
// frame's view lag (package input's wire layout), for lag compensation, and
// the server tells a client of its predicted spawns that ended before they
// were sent (message kind 0x12).
// 7: the Hello may name a match (transport.Hello.Match, for a host of
// many matches) and the server may send a drain notice (message kind 0x13:
// Server.Drain, Client.Draining).
// 8: game messages — reliable batches (message kinds 0x14 and 0x15) and
// unreliable sections at the end of a snapshot datagram (kind flag 0x40) or
// a client datagram (flag 0x80) — and a relation component's target in a
// spawn entry.
// 9: the server leaves out of the snapshots an entity whose spawn carried
// its state while it does not change; a client takes a spawn's state as
// the entity's first sample (interpolation) and holds it until a change.
// 10: seats: the Welcome carries the seat's resume secret (payload v4), a
// Hello may carry a resume ticket (transport.Hello.Resume), a client
// datagram may say how many reliable messages the client took (kind flag
// 0x40), and a drain notice may name where the match goes on.
const ProtocolVersion = wire.ProtocolVersion

// ErrMalformed wraps decode errors of replication messages.
var ErrMalformed = wire.ErrMalformed

// ErrDictionary is a client's error when the server compresses snapshots
// with a zstd dictionary other than the client's
// (ClientConfig.CompressionDictionary).
var ErrDictionary = link.ErrDictionary

// DrainNotice is what a draining server told its client (Client.Draining):
// why, and when it ends the match at the latest.
type DrainNotice struct {
	// Reason is the server's, e.g. "maintenance" (at most
	// transport.MaxReasonLen bytes).
	Reason string
	// Deadline is when the server ends the match at the latest, on the
	// client's clock (the time the notice arrived plus what the server said
	// was left); the zero time if the server named no deadline.
	Deadline time.Time
	// Left is what the server said was left when it sent the notice (0: no
	// deadline).
	Left time.Duration
	// Address, if not empty, is where the match goes on (Server.DrainTo: a
	// checkpoint of it restored there): dial it and Client.Resume there to
	// keep the seat. A notice without one may come first (a host's drain,
	// before its matches are handed elsewhere: agones.Config.Handoff), and
	// one with an address a moment later: a client need not leave at the
	// first notice.
	Address string
}
