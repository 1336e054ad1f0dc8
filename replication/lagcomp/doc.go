// Package lagcomp is server-side lag compensation: a bounded history of
// the replicated state clients are shown (positions, rotations — any
// registered component), and queries of that state "as the client saw it"
// at the render tick it reports with its input.
//
// A client draws remote entities in the past: interpolated between
// snapshots at its render tick, which trails the server by the link's
// one-way delay plus the interpolation delay. When a player aims at a
// target as drawn and fires, the server, judging the shot against where the
// target is now, misses a moving target by its speed × that lag. With a
// [History], the server judges it against the target's state at the
// shooter's render tick, interpolated exactly as the client's renderer
// interpolated it (schema.Plan.Interpolate between the quantized states of
// the net ticks the client received).
//
// # Use
//
// With input.Authority and input.Player the client's view travels with its
// inputs, and the authority bounds it with a [Rewinds]. examples/topdown
// records what each snapshot showed and judges a shot at the shooter's
// view:
//
//	if s.Hist, err = lagcomp.New[Body](&w, reg, lagcomp.Config{}); err != nil {
//	s.Sched.AddNetSystem(s.Hist.System(s.Net.Tick)) // records what each snapshot showed
//	...
//	view, ok := s.Auth.ViewTick(owner)
//	s.Hist.Each(s.Hist.Clamp(view), func(t arche.Entity, tb *Body) bool {
//
// [History.At] gives one entity's state at a view tick (ExampleHistory).
// With a game's own report of its view, report replication.Client.DrawnTick
// (the render tick, held back while the client's snapshots are late and its
// mirrors stand still past the extrapolation limit: a shot judged at the
// render tick then would be judged against where the target went since),
// and bound it with [Rewinds.Judge] and replication.Server.RTT
// (ExampleRewinds).
//
// # Costs
//
// Measured with BenchmarkHistory (go test -bench . ./replication/lagcomp,
// 2-core VM whose timings vary up to 2×) for 2000 transforms (a world
// position and a quaternion: 7 lanes) × 32 ticks: 6.6 MB of heap (lanes,
// entity lists and per-tick indexes); Record 115–200 µs per net tick (one
// quantization and an index insert per entity), 0 allocs; At 120–260 ns;
// Each 160–350 µs for all 2000 (an index lookup and an interpolation per
// entity), 0 allocs.
//
// # Anti-abuse
//
// A client reports its own render tick, so it may lie. [Rewinds.Judge]
// bounds the rewind by what the server measured of that client: its
// round-trip time (at most [Limits].MaxLatency, 250 ms by default, as
// Overwatch limits it), plus the render delay an honest client may have
// ([Limits].InterpDelay) and a margin ([Limits].Margin): a client at 20 ms
// RTT that claims to have seen the world a second ago is judged 270 ms
// back. Each client's claims, how many were clamped, the newest claim and
// bound and the longest claim are in [Rewinds.Stats]. [History.Clamp] then
// bounds the rewind to MaxRewind net ticks behind the newest recorded tick
// (and never ahead of it).
package lagcomp
