// Package predict is client-side prediction of one entity the client owns:
// a [Predictor] steps it with the game's step function and each tick's
// input, rounds the result as the server does, records (tick, input,
// rounded state), and on a server state that differs from its prediction
// for that tick rewinds to it and replays the later ticks.
//
// The server rounds the authoritative state of every predicted entity at
// the end of each tick with a [Rounder], the rounding the predictor
// applies after every step; with a deterministic step and the same rounded
// inputs, the two stay bit-identical and a reconciliation finds an exact
// [Match] unless the server saw something the client did not. Predict and
// Reconcile are allocation-free.
package predict
