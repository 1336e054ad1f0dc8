// Package sockets holds archenet's integration tests over real sockets on
// 127.0.0.1, in real time: the core of the suite over QUIC, the isolation
// tests (a slow, silent, dead or hostile peer costs only itself) over QUIC
// and over WebTransport, the server's budget through an impairment proxy
// (transport/netem), and the multi-match host (replication/host). Their
// timing checks compare the server under test with a control measured in the
// same run (tests/internal/loopback). It has no code of its own outside its
// tests.
package sockets
