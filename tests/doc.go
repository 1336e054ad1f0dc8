// Package tests is the map of archenet's integration tests, one kind to a
// folder:
//
//	sim       over the simulated network (transport/sim), tick by tick in simulated time
//	sockets   over real sockets on 127.0.0.1: QUIC, WebTransport, the impairment proxy, the host
//	browser   players in headless Chromium (WebTransport, js/wasm)
//	docs      checks on README.md and the doc comments
//	internal  the code they share: harness (simulated network), loopback
//	          (real-socket rig), pagegame and pageclient (the browser game and its page)
//
// It has no code of its own.
package tests
