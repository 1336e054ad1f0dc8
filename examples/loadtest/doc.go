// Command loadtest runs an archenet server and many clients in one process
// and reports what replication costs at scale: bandwidth per client, server
// time per net tick, bytes per entity update, memory, and whether every
// client's mirror converged to the server's quantized state.
//
// # Synthetic scene (default)
//
//	go run ./examples/loadtest -clients 128 -entities 2000 -ticks 900 -json
//
// Entities are scattered over a -world square (x/z plane); a -moving
// fraction of them wander every tick, and each client owns one wandering
// avatar, so the server's interest (radius -interest, 0 = everything)
// follows it; with -owner-fields each avatar also carries a PlayerState
// whose fields only its owner gets, changing every tick (a player's own
// state, as a game's avatars do: each client's records of its own avatar
// differ from everyone else's). Transport is the in-memory network of package transport/sim
// in simulated time (deterministic for a -seed; -loss, -latency, -jitter
// apply to each direction), or QUIC on 127.0.0.1 in real time
// (-transport quic). Clients connect first (not measured); then -ticks net
// ticks are measured; then loss and movement stop for the settle ticks and
// every client's mirrors are checked against the server (see
// checkConverged). The exit status is 1 if they did not converge, 2 on
// errors.
//
// Server time is the wall time of srv.Receive plus srv.Send only: game
// logic and the clients' work, which run in the same process, are outside
// it. The snapshot build (one pass over the entities) and the per-client
// work (interest, spawn messages, delta datagrams) are split with
// replication.ServerStats. Server CPU time is that wall time (the caller's
// goroutine never blocks in them) plus the worker helpers' awake time
// (ServerStats.HelperTime): process CPU clocks lag for a thread that is
// running on another core when they are read. With -cpuprofile the
// server's work carries the pprof label side=server:
//
//	go run ./examples/loadtest -clients 128 -cpuprofile cpu.out
//	go tool pprof -tagfocus side=server -top cpu.out
//
// # Trace replay
//
//	go run ./examples/loadtest -trace examples/loadtest/testdata/falling.trace.gz -json
//
// replicates a recorded "transform trace v1" (see trace.go for the format)
// at the trace's rate to one client (-clients) that sees everything unless
// -interest is set (then around the first frame's centroid), and adds the
// error of the client's mirrors against the trace's float values at the
// tick of the client's newest snapshot, and kbit/s per client.
// testdata/falling.trace.gz is made by GenerateTrace (go generate, or
// -gen-trace FILE): 50 cubes falling, bouncing and tumbling for 5 s at 60 Hz.
//
// # Output
//
// A text report on stdout; with -json also one JSON object as the last
// line (see [Report] for the keys; units are in the key names, KB = 1000
// bytes). Progress goes to stderr every 10% (-q: none).
package main
