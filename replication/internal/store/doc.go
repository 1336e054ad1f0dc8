// Package store keeps the server's ring of frames: each net tick, one pass
// over the replicated entities quantizes their components into a [Frame]
// shared by every client, reusing last tick's lanes where a component's raw
// bytes did not change, and records per slot when its value and when its
// layout last changed ([Ring.ChangedSince]: what a client acked at a tick
// must be told).
//
// A tick: [Ring.Begin], one [Ring.Put] (or [Ring.Keep]) per entity in
// increasing slot order, [Ring.Commit]. When the frame holds exactly the
// previous frame's entities, several goroutines may fill it
// ([Ring.Aligned], [Ring.StartAligned], [AlignedPut.PutAt],
// [Ring.EndAligned]). Frames are read-only once committed; the encoders of
// all clients read them concurrently.
//
// Costs: Put compares a component's raw bytes with last tick's (a few
// words) and quantizes only when they differ; Commit is O(despawns); a
// steady state allocates nothing. Misuse (slots out of order, Put outside
// Begin/Commit) panics.
package store
