// Package lanes writes what a snapshot record's bits are made of on the
// server: full records, and delta records as each component's field masks
// and, per changed lane, the Rice-coded residual against the baseline or
// its extrapolation (package codec's rules, which the receiver reads back),
// from compact per-plan tables; and it counts the residuals the coding of
// the next ticks is chosen from (Hist, Stats).
package lanes
