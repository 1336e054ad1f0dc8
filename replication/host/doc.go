// Package host runs many matches in one process behind one listener:
// routing by handshake, connect tokens, isolation, drain and probes.
//
// # Outline
//
// A [Host] accepts on one transport.Listener (QUIC on one UDP port; or
// transport.MergeListeners of QUIC and WebTransport listeners, for native
// and browser players). For each new connection it reads the client's Hello off every
// match's tick (at most [Config].MaxHandshakes at once, each within
// HandshakeTimeout) and routes the connection by it:
//
//   - with connect tokens ([Config].Tokens, package token) the token names
//     the match; the host admits only valid, unexpired, unreplayed tokens for
//     this server and a match it hosts, and refuses the rest saying why;
//   - without them, the Hello's match name (replication.ClientConfig.Match),
//     or [Config].DefaultMatch.
//
// A routed connection goes to its match's replication.Server with its Hello
// (the match's [Match.Listener] is a transport.HelloListener), which runs
// the rest of the handshake as usual: protocol hash, slots, Authenticator.
//
// Each match ([Host.Open], [MatchConfig]) is a [Game] — its own arche world,
// its own Server, made with the match's listener and [Match.Configure] — run
// on its own goroutine at its FrameRate. A slow frame delays only its own
// match; a frame that panics ends only its own match (its clients are told
// "match crashed: ..."; [Stats].Crashed); a frame stuck for
// [Config].StallAfter ends only its own match, from the host's goroutine
// (its players are disconnected with "match stalled: ..."; [Stats].Stalled)
// while the host stays live for the others; a hostile client costs only its
// own match's server. Matches are opened and closed ([Match.Close]) at run
// time; [Config].OnMatch and [Config].OnPlayer report them and their
// players as they come and go.
//
// A connect token admits one player: it is spent once its player
// acknowledged its first snapshot; a connection that gets no further (the
// client's join timed out, or the server dropped it for its JoinTimeout)
// gives it back ([Stats].TokensReleased), so the client may retry with
// it.
//
// The worker pool is the host's goroutines: [Match.Configure] gives each
// match's server one worker (ServerConfig.Workers = 1) and Go's scheduler
// spreads the matches' goroutines over GOMAXPROCS threads, rather than every
// match's Send waking GOMAXPROCS helpers of its own (with 32 matches on two
// cores those would spin against each other). Measured with 32 matches of 8
// clients and 500 entities on two cores (BENCHMARKS.md, "Hosting"): equal
// to two workers per match on a quiet machine, better on a loaded one.
//
// [Host.Drain] stops admitting (new clients are refused with
// transport.CodeDraining), tells connected clients (a drain notice:
// replication.Client.Draining), ends each match when its game closes it, its
// last client leaves or the deadline comes, and closes [Host.Done] when no
// match is left. [Host.Handler] serves /healthz (the host's loop
// running: [Host.Live]), /readyz (admitting) and /stats for Kubernetes
// probes; package agones drives the Agones sidecar from the same state.
//
// A player whose connection is lost keeps its seat for a while
// (replication.ServerLimits.SeatWindow) and is the same [Player] when it
// resumes (a host routes its resume by match name, tokens or not). A match
// can move to another host: [Match.Checkpoint] there, [MatchConfig].Checkpoint
// and [Match.NewServer] here, then [Match.MoveTo] sends its players.
//
// # Tasks
//
//   - Host matches: [New], [Host.Open] with a [MatchConfig] whose Start builds the [Game].
//   - Build a match's server: [Match.NewServer] (or replication.NewServer(world, m.Listener(), cfg) after [Match.Configure]).
//   - Move a match to another host: [Match.Checkpoint], [MatchConfig].Checkpoint there, [Match.MoveTo].
//   - Admit only placed players: [Config].Tokens = token.NewVerifier(...); see package token.
//   - Know who a client is: [Match.Player]; follow joins and leaves: [Config].OnPlayer;
//     matches opening and ending: [Config].OnMatch.
//   - End a match: [Match.Close]; see it end: [Match.Ended].
//   - Shut down gracefully: [Host.Drain], then wait for [Host.Done].
//   - Probes and figures: [Host.Handler], [Host.Live], [Host.Admitting], [Host.Stats].
//   - Deterministic tests: [Config].Manual and [Host.Step] over transport/sim.
package host
