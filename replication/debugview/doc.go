// Package debugview is a live network debugger for a replication server: an
// HTTP handler that serves a self-contained HTML page (no external assets)
// plotting, updated live by polling, each client's bandwidth and byte
// budget, RTT and snapshot loss, the records per net tick by kind (delta,
// full, removal), the snapshot bytes per component type, the server's Send
// time (and the game's tick time, when it reports it) and quantization
// clamp counts; and the same data as JSON at /stats.
//
// A [replication.Server] is not safe for concurrent use, so the handler
// never reads it. A [Recorder] samples the server on its own goroutine:
// add [Recorder.System] to the server's scheduler after the server's
// SendSystem (or call [Recorder.Sample] after each Server.Send, or once per
// frame of the loop that runs the server's ticks), and serve
// [Handler] from any goroutine; it reads only the recorder's bounded
// history (Options.Window of samples, one per Options.Interval).
//
//	rec := debugview.NewRecorder(srv, debugview.Options{})
//	sched.AddNetSystem(srv.SendSystem())
//	sched.AddNetSystem(rec.System())
//	go http.ListenAndServe("localhost:8080", debugview.Handler(rec))
//
// Bytes per component type are exact: the recorder turns on the server's
// bit accounting ([replication.Server.SetBitAccounting]), in which the
// snapshot encoder notes the bits of each component's part of every
// record it writes (field masks and residuals of deltas, lanes of full
// records) and counts them as records are copied into datagrams; record
// framing and datagram headers are counted apart. The figures are before
// compression and without each datagram's padding to whole bytes.
// Accounting costs a little per record encoded; Options.NoComponentBits
// leaves it off.
//
// The page is for development: serve it on a loopback or otherwise
// trusted address, as it shows the server's traffic to anyone who can
// reach it.
package debugview
