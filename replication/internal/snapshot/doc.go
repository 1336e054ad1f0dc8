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
// records which slots changed. Then, per client, [Encoder.Build] writes the
// tick's datagrams ([Packets]): it picks the client's baseline (the newest
// view the client acked, see [Client.Ack]; none → full state against an
// empty world), finds what differs (changed since the baseline, entities
// entering or leaving the client's interest, entities deferred earlier),
// selects records by priority within the client's byte budget, and packs
// them in slot order into as many datagrams of at most the MTU as they need.
// The Encoder's parts each keep their own state: the record cache
// (cache.go: every record encoded this tick, shared by the clients with the
// same key), the candidates (collect.go), and the selection and packer
// (pack.go); the delta bodies are coded in delta.go and delta_pose.go.
// Every datagram is decodable on its own against the tick's baseline;
// losing one loses only its records, which stay changed against the
// baseline. Records are:
//
//   - delta: the field masks of the changed fields and, per changed lane, the
//     zigzag Rice-coded residual against the baseline value — or, for an
//     entity the client's prediction view B2 (the baseline's own baseline,
//     or a view it acked two to four ticks before the baseline) holds with
//     the same Meta,
//     against the linear extrapolation of the value through B2 and the
//     baseline (exact integer arithmetic, so both sides agree). The Rice
//     order of a lane comes from a context both sides hold (the size of the
//     extrapolation's step) through per-tick parameters in the header (see
//     Coding), and a predicted record whose masks are the groups that
//     changed from B2 to the baseline sends them as one bit;
//   - full: generation, owner, component set and every field (new entities,
//     a new generation or component set, or a baseline too old to diff);
//   - removal: the entity left the client's view.
//
// A record for (entity, baseline tick, owner view) is encoded once per tick
// and bit-copied into every datagram that needs it. A server with several
// workers (one Encoder each) also pre-encodes, right after the frame, the
// records of the key most clients coded against last tick, a tick on
// (pre.go: [World.BeginPreencode], [Encoder.Preencode],
// [World.EndPreencode]): each once, for every worker's clients. Slots are gap-coded with
// the exp-Golomb order that suits each datagram; a delta whose field masks
// equal the previous delta's in the datagram sends two bits instead. When the
// records exceed the budget (the client's byte rate, [Client.SetRate], and
// at most [MaxParts] datagrams) the highest-priority ones go now; the rest
// stay changed against the baseline and their per-(client, entity) priority
// accumulators grow by the entity's weight each tick until they are sent.
//
// Client: [Receiver.Decode] decodes each datagram the moment it arrives, on
// top of the baseline view it names — a missing baseline drops it
// ([ErrMissingBaseline]), never guessed: a tick's first datagram makes its
// view from the baseline view, later ones merge their records in.
// [Receiver.Ack] reports which datagrams of which ticks the client holds
// ([Ack]: newest tick, a mask of the 32 before it, the parts of any tick
// that lacks some) and seals the views it names, so the server, which undoes
// the records of the parts the client lacks, knows each acked view exactly.
// A datagram that arrives after its tick was sealed is decoded and shown
// ([Receiver.View]) but never merged; the server sends its records again.
//
// # Wire format (after the kind byte [KindSnapshot], bit 7 = zstd body)
//
//	header          see [Header]: tick 32 bits, part/parts (1 bit for a
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
// (about 1 byte more for the part numbers). The ack travels in the client's
// datagrams ([Ack.Append]: 9 bytes while nothing is missing).
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
//	one client's datagrams            Encoder.Build(client, BuildOptions{Relevant, Weights, Budget}, &packets)
//	process an ack                    Client.Ack(&ack); ParseAck / Ack.Append on the wire
//	limit a client's bandwidth        Client.SetRate, Client.Refill
//	decode on the client              Receiver.Decode (each datagram), Receiver.Latest, Receiver.Ack
//	reconnect                         Client.Reset, Receiver.Reset
//
// # Costs
//
// Commit is O(entities); Build is O(records needed by the client + interest
// words) with cached records, allocation-free in steady state; Decode copies
// the baseline view (O(entities in view)) and allocates nothing in steady
// state. See snapshot_benchmark_test.go for figures.
package snapshot
