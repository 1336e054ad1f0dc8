// Package loopback is the real-socket test rig of archenet's integration
// tests: a replication server over QUIC or WebTransport (or both, merged) on
// 127.0.0.1, stepped at the net rate in real time with its clients in the
// same loop (Rig, WTRig), recording how long every server tick took and how
// far each client's mirror of a probe entity lags. The isolation tests of
// tests/sockets and the hostile page of tests/browser use it. It does not
// build for js/wasm (it listens).
package loopback
