// Package snapshot turns per-tick quantized world state into per-client
// delta datagrams against each client's acknowledged baseline, and decodes
// them on the client.
//
// # Data flow
//
// Server, each net tick: [World.Begin], one [World.Put] per replicated entity
// (slot order), [World.Commit] — one pass that quantizes every component once
// into a [Frame] stored in a ring shared by all clients (default depth 32),
// reusing last tick's lanes when a component's bytes did not change, and
// records which slots changed. Then, per client, [Encoder.Build] writes one
// datagram: it picks the client's baseline (the newest view the client acked,
// see [Client.Ack]; none → full state against an empty world), finds what
// differs (changed since the baseline, entities entering or leaving the
// client's interest, entities deferred earlier), and writes records:
//
//   - delta: the field masks of the changed fields and, per changed lane, the
//     zigzag exp-Golomb residual against the baseline value — or, when the
//     record's prediction bit is set, against the linear extrapolation of the
//     value through view B2 and the baseline (exact integer arithmetic, so
//     both sides agree; the encoder picks whichever is shorter per record);
//   - full: generation, owner, component set and every field (new entities,
//     a new generation or component set, or a baseline too old to diff);
//   - removal: the entity left the client's view.
//
// A record for (entity, baseline tick, owner view) is encoded once per tick
// and bit-copied into every datagram that needs it. Slots are gap-coded with
// the exp-Golomb order that suits the packet; a delta whose field masks equal
// the previous delta's sends one bit instead. When records exceed the budget
// (the MTU, default 1200 bytes, and the client's byte rate, [Client.SetRate])
// the highest-priority ones go now; the rest stay changed against the
// baseline and their per-(client, entity) priority accumulators grow by the
// entity's weight each tick until they are sent.
//
// Client: [Receiver.Decode] decodes a datagram on top of the baseline view it
// names — a missing baseline drops it ([ErrMissingBaseline]), never guessed —
// stores the resulting full quantized view, and updates the ack
// ([Receiver.Ack]: newest tick + 32-bit mask of the ticks before it) that the
// client sends back.
//
// # Wire format (after the kind byte [KindSnapshot], bit 7 = zstd body)
//
//	tick            32 bits
//	baseline        exp-Golomb(0) of tick − baseline tick, 0 = none
//	prediction      if baseline ≠ 0: 1 bit, then exp-Golomb(0) of baseline − B2 − 1,
//	                where B2 is the view the baseline was decoded against
//	count           exp-Golomb(0) number of records
//	gap order k     3 bits
//	extension       1 bit; if 1: input ack, 32 bits (newest input tick applied)
//	records         count × [gap exp-Golomb(k)][kind: 0 delta | 10 full | 11 removal][body]
//
// Bits are LSB-first (see package bitio). Everything an attacker controls is
// bounded: counts by the bits present, slots by [MaxSlots], decompressed size
// by [MaxBody], views by [Receiver.MaxEntities]; decoders never panic.
//
// # Compression
//
// [Compressor] zstd-compresses a datagram body only when it strictly wins.
// On bit-packed steady-state deltas it does not (measured in zstd_test.go);
// it wins on initial full-state datagrams, and a dictionary trained with
// [TrainDictionary] wins on a share of small ones. It is off unless
// [Encoder.Compression] is set; [Receiver.EnableZstd] must match.
//
// # Task index
//
//	build the shared frame            World.Begin / Put / Commit, World.EndTick
//	one client's datagram             Encoder.Build(client, BuildOptions{Relevant, Weights, Budget}, buf)
//	process an ack                    Client.Ack(newest, mask)
//	limit a client's bandwidth        Client.SetRate, Client.Refill
//	decode on the client              Receiver.Decode, Receiver.Latest, Receiver.Ack
//	reconnect                         Client.Reset, Receiver.Reset
//
// # Costs
//
// Commit is O(entities); Build is O(records needed by the client + interest
// words) with cached records, allocation-free in steady state; Decode copies
// the baseline view (O(entities in view)) and allocates nothing in steady
// state. See snapshot_benchmark_test.go for figures.
package snapshot
