package input

import (
	"github.com/archenet/archenet/input/internal/frames"
	"github.com/archenet/archenet/input/internal/inputerr"
	"github.com/archenet/archenet/input/internal/inputlog"
	"github.com/archenet/archenet/replication/schema"
)

// MaxRedundancy is the largest number of frames one input section carries
// (the section's count field is 5 bits wide).
const MaxRedundancy = frames.MaxRedundancy

// Sentinel errors. Decode and log errors wrap one of them; test with
// errors.Is.
var (
	// ErrMalformed: an input section no encoder produces (truncated, a
	// count above the limit, a code outside its lane's range, a residual
	// that leaves the range). Drop the datagram; count it against the client.
	ErrMalformed = inputerr.ErrMalformed
	// ErrInvalidConfig wraps every configuration error.
	ErrInvalidConfig = inputerr.ErrInvalidConfig
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
const DefaultHold = frames.DefaultHold

// MaxLeadLimit is the largest [LogConfig.MaxLead]: far below the ±32767
// ticks the 16-bit tick on the wire can resolve.
const MaxLeadLimit = inputlog.MaxLeadLimit

// LogConfig configures the server's input log of each client (the
// Authority keeps one per client). Its zero value accepts input up to 64 ticks
// ahead and at most 3 datagrams per tick on average with bursts of 30.
type LogConfig struct {
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

// Stats counts what a client's input log saw. All counters only grow.
type Stats struct {
	Datagrams  uint64 // input sections decoded successfully
	Malformed  uint64 // sections rejected as [ErrMalformed]
	NoBaseline uint64 // sections coded against a frame the log no longer holds
	Flooded    uint64 // sections refused by the rate limit
	Frames     uint64 // new frames stored
	Duplicate  uint64 // frames already held (redundant copies)
	Late       uint64 // frames that arrived after their tick was consumed
	Ahead      uint64 // frames rejected for being MaxLead or more ahead
	Consumed   uint64 // ticks consumed
	Received   uint64 // ticks consumed with the client's frame
	Missing    uint64 // ticks consumed without it (last input repeated, or the outage input)
	Outage     uint64 // of those, ticks past Config.Hold (the outage input)
}

// Config, LogConfig and Stats convert to and from frames.Config,
// inputlog.Config and inputlog.Stats (NewPlayer, NewAuthority,
// Authority.ClientStats), which have the same fields: a field added to one
// side only stops those conversions from compiling.
