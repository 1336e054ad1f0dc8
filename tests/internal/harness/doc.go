// Package harness is the simulated-network test harness of archenet's
// integration tests: one server world and N client worlds stepped tick by
// tick over transport/sim (Harness), the replicated components they share
// (NewRegistry), a scene of heavy reliable traffic (SpawnChurn), and
// RaceEnabled. The tests of tests/sim use it directly; the real-socket rigs
// of tests/internal/loopback (tests/sockets, tests/browser) build on it.
package harness
