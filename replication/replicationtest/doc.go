// Package replicationtest holds the checks archenet's own tests and load
// test use to judge replication, for games' tests to use too: [Converged]
// compares a client's mirrors with the server's replicated entities at the
// quantized level, with the relevance rules of the server's interest
// management ([Within]) or a test's own ([Only]). A client in another
// process (a page) is judged against a [State] of the server: [Capture]
// takes it, it travels as JSON, and [State.World] rebuilds it there.
package replicationtest
