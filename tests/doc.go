// Package tests holds archenet's integration tests: one server world and N
// client worlds stepped tick by tick over the simulated network
// (transport/sim) — spawn, despawn, component changes, late join, reconnect,
// handle reuse and stale references, owner-only fields, interest with
// hysteresis, send-rate divisors, dormancy, budget back-off, interpolation,
// a fault matrix of loss × RTT × jitter × duplication/reordering — and the
// core of the suite once over QUIC loopback. It has no code of its own.
package tests
