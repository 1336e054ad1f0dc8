// Package input carries player input from clients to the authoritative
// server — delta-coded, redundant input frames stamped with the server tick
// they apply at — and predicts and reconciles the client's own entity.
//
// # Outline
//
// Most games need only the two helpers, which wire everything else:
//
//   - [Player] (client, [NewPlayer]): each frame it reconciles the client's
//     own S entity with the server's newest state, samples the game's input
//     for every input tick due, predicts it with the game's [StepFunc],
//     sends it, and draws the prediction with corrections smoothed.
//
//   - [Authority] (server, [NewAuthority]): [Authority.Configure] sets the
//     replication server's input hooks (one input log per client, acks and
//     feedback in every snapshot); [Authority.System] steps every S entity
//     with a components.Owner with its owner's input each tick, with the same
//     step function; [Authority.RoundSystem] rounds them at the end of the
//     tick.
//
//   - [Projectiles] (client, [NewProjectiles]): the client's own entities
//     that move without input — its shots' projectiles — spawned the tick
//     they are fired ([Projectiles.Spawn], a predicted spawn keyed by that
//     tick) and moved on the Player's timeline with the game's step, from
//     the server's newest state of each once its spawn adopted it.
//
// Inside, they are built from parts in internal packages: a codec
// compiled from the input struct's `net` precision tags (package schema)
// that writes and reads input sections, and a sender on the client that
// keeps the frames not yet acked and writes the newest N into every
// datagram (input/internal/frames); an input log per client on the server
// that stores frames (deduplicated, at most [LogConfig].MaxLead ahead,
// rate-limited), hands out one input per tick (repeating the last one when
// a frame is missing) and tells the client its ack and buffer depth in
// every snapshot (input/internal/inputlog); and a predictor that runs the
// game's [StepFunc], records (tick, input, rounded state) and rewinds and
// replays when the server's state differs, returning a [Correction] for
// smoothing (input/internal/predict). [TickSync] (client) is public: it estimates
// the server tick from snapshot arrivals — best from the client's own
// estimator, shared with its render clock ([SyncConfig].Arrivals =
// replication.Client.Arrivals), else fed by [TickSync.ObserveSnapshot] —
// and the RTT ([TickSync.ObserveRTT]), adapts the lead from server feedback
// ([TickSync.ObserveFeedback]), and [TickSync.Advance] says which input
// ticks to run now. [Authority.ClientStats] and [Player.Stats] report what
// the parts counted.
//
// # Wire layout of an input section
//
// The replication layer frames the datagram; this package writes only the
// input section, LSB-first with package bitio:
//
//	first    16 bits   low bits of the oldest frame's tick (the reader extends it
//	                   to the tick nearest its own, so ticks stay within ±32767)
//	count−1   5 bits   frames in the section, 1..Redundancy (a larger count is an error)
//	based     1 bit    1: the oldest frame is coded against an acked baseline
//	  off    EG0       zigzag(first − baseline − 1), within −33..BaselineWindow−1
//	views     1 bit    1: each frame's view lag follows (quarter ticks its render clock
//	                   trailed the frame's tick, 0..1023: lag compensation)
//	  lag 0  10 bits   the oldest frame's
//	  lag i  EG0       zigzag(lag i − lag i−1) for each later frame
//	frame 0  mask      one bit per field group: fields that differ from the baseline
//	                   (the acked frame, else the zero input)
//	frame i  1 bit     1: same mask as frame i−1; 0: a new mask follows
//	         mask      fields that differ from frame i−1
//	then per set mask bit, in field order:
//	  bool field          nothing (changed means flipped)
//	  fixed/angle lane    ≤ 4 bits wide: the absolute code; else 1 bit:
//	                      0: residual vs the same lane of the previous frame as an
//	                         order-k exp-Golomb code of zigzag(Δ) (−1 for a one-lane
//	                         field, whose Δ ≠ 0), k adapting to that lane's previous
//	                         residual in this section (start 2); 1: the absolute code
//	  other fields        the field's full schema encoding (Plan.WriteGroup)
//
// # Why this survives any loss
//
// Each section decodes on its own: its oldest frame is coded either against
// the zero input or against a frame the server has told the client it holds
// (the ack in its feedback: the newest frame the input log stored; the log's ring keeps
// stored frames, consumed or not, for MaxLead+128 ticks). Later frames are
// coded against earlier frames of the same section. No section depends on
// another section having arrived, so loss, duplication and reordering cost
// only latency; with redundancy N a frame is lost only if N consecutive
// datagrams are. If a baseline is nonetheless gone (only a misbehaving or
// very stale client), decoding fails and nothing is
// guessed; an honest client stops using an ack once it is more than
// BaselineWindow ticks older than its oldest frame.
//
// # Outages
//
// When a client's frames stop arriving, the input log repeats its last input
// for [Config].Hold ticks (a burst of loss); past that the client's inputs
// are taken to be cut off ([Stats].Outage counts those ticks): the
// [Authority] then steps the entity with the outage input
// ([AuthorityConfig].Outage, e.g. keys released; the zero input by
// default). The [Player] sees the same from its side — snapshots that
// stopped for about Hold ticks, or input acks showing the server applies
// the outage input — and predicts and sends the outage input
// ([PlayerConfig].Outage, the same function) instead of sampling the game's
// until the server hears it again ([Player.Stalled]). So during an outage
// both sides move the entity the same way, and when the link returns the
// prediction is where the server put it, instead of seconds of the
// player's input away (a 5 s outage in examples/arena: one correction of
// 0.63 m, against 42.6 m before). The input clock ignores the server's
// buffer-depth feedback meanwhile (it measures the outage, not the
// upstream delay).
//
// # Ticks, lead and feedback
//
// Input frames carry the server tick they will be applied at. The client
// runs ahead of the server by lead = upstream delay + JitterMargin × jitter +
// Safety ticks. The upstream delay is RTT/2 until the server's feedback
// arrives; then it is measured as lead − depth, where depth is the smallest
// number of ticks of input the server held beyond each consumed tick. The
// client tick rate is scaled within ±5% (default) to follow; it jumps only
// beyond ResyncTicks of error, and never emits a tick twice.
//
// # Prediction and rounding
//
// The server must round ([Authority.RoundSystem], schema Plan.Round) every
// predicted entity's state at the end of each tick, and the client's
// predictor rounds its own state after every step the same way; inputs are
// rounded, when sampled, to what the server decodes. With the same deterministic step
// function, the same rounded inputs give bit-identical states, so a
// reconciliation finds an exact match unless the server saw something the
// client did not (another player's push, a missing input): only then does the
// predictor rewind and replay.
//
// # Task → API
//
//	predict an owned entity (both sides)        NewPlayer + NewAuthority (the rest is done)
//	declare the input                           a struct with net tags, the I of both
//	server: step and round owned entities       Authority.System, Authority.RoundSystem
//	client: each frame                          Player.Update (or Player.System)
//	client: draw the own entity                 Player.Visual; Player.State for gameplay
//	client: shots that move without input       NewProjectiles, Projectiles.Spawn
//	client: an input clock of your own          NewTickSync(SyncConfig{Arrivals: client.Arrivals()})
//	lag compensation                            Authority.ViewTick, Authority.Rewinds
//	watch a client's input health               Authority.ClientStats, Player.Stats, TickSync.Lead
//
// # Costs
//
// Measured with go test -bench . ./input/... (AMD EPYC-class VM, 2 cores), a
// shooter input (16-bit keys held, mouse dx/dy at 0.25 px moving every tick,
// 3-bit buttons) in steady state with N = 4 and acks 9 ticks old:
//
//	input section                      11.5 bytes per datagram, 2.9 bytes per frame
//	marginal frame in a section        13.6 bits
//	push + write the section (client)  ≈ 360 ns, 0 allocs
//	receive + consume (server)         ≈ 330 ns, 0 allocs
//	predict                            ≈ 70 ns + the step, 0 allocs
//	Reconcile with a 9-tick replay     ≈ 0.9 µs, 0 allocs
//
// Over transport/sim with 150 ms RTT, ±10 ms jitter and 10% loss each way
// (TestSimLossyLink, 3,420 measured ticks), 100% of ticks had the client's
// input, the lead stayed within 8.0–8.3 ticks, and every correction was
// caused by a server-side push; predicted states matched the server's
// exactly afterwards.
package input
