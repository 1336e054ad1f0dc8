// Package archenet replicates an arche ECS world from an authoritative
// server to many clients over QUIC: reliable spawns and despawns, unreliable
// quantized delta snapshots against each client's acknowledged baseline,
// input frames with client-side prediction, and snapshot interpolation.
//
// This root package holds no code; it is the map of the module:
//
//	replication            Server and Client: the ECS systems users add to their worlds
//	replication/bitio      bit writer/reader (LSB-first, fail-closed)
//	replication/schema     `net` struct tags → compiled field plans, registry, protocol hash
//	replication/internal/...       (internal) the server's tick: capture (world → slot table and frame),
//	                               store (frame ring), encode and lanes (per-client delta datagrams), peer,
//	                               baseline and congestion (a client's state, acks, budget), grid (interest),
//	                               admit (handshakes), gang (workers), closing, clampwatch; the client's
//	                               link, receive, mirror and watch; both ends' codec, wire, entity, slots
//	replication/internal/quant     (internal) bounded scalars, angles, smallest-three quaternions, grid-origin positions
//	replication/lagcomp    lag compensation: the state each client was shown, rewound within the measured RTT
//	replication/timing     the server's tick schedule as a client estimates it (render and input clocks)
//	replication/debugview  live network debugger page: bandwidth, budget, RTT, loss, bytes per component
//	replication/replicationtest  convergence checks for a game's own tests
//	replication/host       many matches behind one listener: routing by Hello, isolation, drain, probes
//	replication/host/token connect tokens: minted by a matchmaker, checked by servers (AEAD, expiry, replay)
//	replication/host/agones the Agones sidecar over REST: Ready, Health, allocation, players, Shutdown
//	transport              Conn/Listener interfaces, handshake messages, close codes
//	transport/quic         QUIC (quic-go) datagrams + one reliable stream, dev certificates
//	transport/webtransport browser sessions (WebTransport): server Listener, native and js/wasm Dial, pinned certificates
//	transport/websocket    the fallback over one WebSocket (networks without UDP, browsers without WebTransport)
//	transport/sim          deterministic in-memory network: latency, jitter, loss, bandwidth, outages
//	transport/netem        UDP impairment proxy for tests over real sockets
//	transport/internal/... (internal) connio, quicnet, frame, selfsigned, queue, admission, ratelimit: what the transports share
//	ecs                    fixed-step scheduler, tick clock, listener fan-out for arche
//	components             Vec3/Quat, Transform, Velocity, NetID, Owner, Replicated, markers, Visual
//	input                  input frames, redundancy, server input log, tick sync, prediction
//	input/internal/...     (internal) frames (codec), inputlog (server log), predict (history, reconcile), inputerr
//	interp                 snapshot interpolation buffers, render clock, correction smoothing
//	examples/topdown       the README's tour: a complete 2D game in about 250 lines
//	examples/arena         a small game: server + bot clients over QUIC, browser players (-web), Agones (-agones)
//	examples/arenaview     the arena's Ebitengine client, native and in the browser (a module of its own)
//	examples/loadtest      scale report over the simulated network or QUIC
//	tests                  integration tests: sim/ (tick by tick), sockets/, browser/ (Chromium), docs/
package archenet
