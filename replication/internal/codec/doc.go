// Package codec is the coding of a snapshot record's body that both ends
// share: full records (generation, owner, component set, every field),
// field masks, the extrapolation a delta's residuals are coded against
// (linear through the prediction view, quadratic through a third), the
// Rice orders of the residuals, and zstd for whole datagram bodies.
//
// The server's encoder (package encode) writes records with kernels of its
// own that produce exactly these bits; the client's receiver (package
// receive) reads them with the functions here. Readers bound what they
// read and report errors wrapping wire.ErrCorrupt; none panics.
package codec
