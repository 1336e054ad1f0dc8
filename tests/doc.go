// Package tests holds archenet's integration tests: one server world and N
// client worlds stepped tick by tick over the simulated network
// (transport/sim) — spawn, despawn, component changes, late join, reconnect,
// handle reuse and stale references, owner-only fields, interest with
// hysteresis, send-rate divisors, dormancy, budget back-off, interpolation,
// a fault matrix of loss × RTT × jitter × duplication/reordering — the core
// of the suite once over QUIC loopback, the isolation tests (a slow or
// hostile peer costs only itself) over QUIC and over WebTransport, and
// browser players in headless Chromium (browser_test.go,
// browser_hostile_test.go: the page is internal/pageclient, the game
// internal/pagegame). It has no code of its own outside internal/.
package tests
