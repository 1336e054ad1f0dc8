// Package encode turns the server's frames into each client's snapshot
// datagrams: deltas against the view the client acknowledged, within its
// byte budget, each record encoded once per tick for every client that
// needs it.
//
// # Data flow
//
// Each net tick, after the ring's Commit (package store):
// [Group.BeginTick] chooses the tick's residual coding from what the last
// ticks' records showed; with several workers, [Group.BeginPreencode] and
// [Encoder.Preencode] encode the records most clients will need, once.
// Then, per client, [Encoder.Build] writes the tick's datagrams
// ([Packets]): it picks the client's baseline (the newest view it acked,
// from its baseline.Tracker; none → full state against an empty world),
// finds what differs (changed since the baseline, entities entering or
// leaving the client's interest, entities deferred earlier), selects
// records by priority within the client's byte allowance, and packs them
// in slot order into as many datagrams of at most the MTU as they need,
// recording in the tracker what the client will hold. Every datagram is
// decodable on its own against the tick's baseline; losing one loses only
// its records, which stay changed against the baseline.
//
// The Encoder's parts each keep their own state: the record cache
// (cache.go: every record encoded this tick, shared by the clients with
// the same key), the lane coder (lanes.go, pose.go: the kernels that write
// masks and residuals, and the arena they write to), the candidates
// (collect.go), the selection (select.go) and the packer (pack.go); the
// Group's pre-encoded records (pre.go) and coding choice (choice.go).
//
// # Records
//
//   - delta: the field masks of the changed fields and, per changed lane, the
//     zigzag Rice-coded residual against the baseline value — or, for an
//     entity the client's prediction view B2 (the baseline's own baseline,
//     or a view it acked two to four ticks before the baseline) holds with
//     the same Meta, against the extrapolation of the value through B2 and
//     the baseline (exact integer arithmetic, so both sides agree; see
//     package codec). The Rice order of a lane comes from a context both
//     sides hold (the size of the extrapolation's step) through per-tick
//     parameters in the header (wire.Coding), and a predicted record whose
//     masks are the groups that changed from B2 to the baseline sends them
//     as one bit;
//   - full: generation, owner, component set and every field (new entities,
//     a new generation or component set, or a baseline too old to diff);
//   - removal: the entity left the client's view.
//
// Slots are gap-coded with the exp-Golomb order that suits each datagram;
// a delta whose field masks equal the previous delta's in the datagram
// sends two bits instead. When the records exceed the budget (the
// client's byte allowance, and at most wire.MaxParts datagrams) the
// highest-priority ones go now; the rest stay changed against the baseline
// and their per-(client, entity) priority accumulators grow by the
// entity's weight each tick until they are sent.
//
// # Wire format (after the kind byte wire.KindSnapshot, bit 7 = zstd body)
//
//	header          see wire.Header: tick 32 bits, part/parts (1 bit for a
//	                single-datagram tick), baseline distance, prediction view,
//	                record count, gap order, input extension
//	records         count × [gap exp-Golomb(k)][kind and masks][body], where for an
//	                entity of the baseline view the kind code is 1 delta with the
//	                predicted masks | 01 delta, masks repeated | 001 delta, masks
//	                given | 0001 full | 0000 removal, and a record of an entity the
//	                baseline lacks is full with no code
//
// The header of a single-datagram tick without input feedback takes about
// 6 bytes with the kind byte; each further datagram of a tick repeats it
// (about 1 byte more for the part numbers). [Encoder.Compression] zstd-
// compresses a datagram body only when it strictly wins (on steady-state
// deltas it does not; it does on full-state datagrams).
//
// # Costs
//
// Build is O(records needed by the client + interest words) with cached
// records, allocation-free in steady state. See the package's benchmarks.
package encode
