// Package sim holds archenet's integration tests over the simulated
// network (transport/sim): one server world and N client worlds stepped tick
// by tick in simulated time (tests/internal/harness) — spawn, despawn,
// component changes, late join, reconnect, handle reuse and stale
// references, owner-only fields, interest with hysteresis, send-rate
// divisors, dormancy, budget back-off, interpolation, lag compensation,
// predicted spawns, liveness, misconfiguration, hostile and slow peers, and a
// fault matrix of loss × RTT × jitter × duplication/reordering, in
// simulated time with seeded randomness (the few hooks that answer from
// goroutines, an Authenticator or a hanging close, are waited for by
// stepping, not by sleeping). It has no code of its own outside its tests.
package sim
