// Package sim is an in-memory network for deterministic tests of archenet over
// simulated latency, jitter, loss, duplication, reordering, bandwidth limits and outages.
//
// # Outline
//
// A [Network] owns a clock and a seeded random source. [Network.Listen] returns a
// [Listener]; [Network.Dial] connects a client at once and returns its [Conn], while the
// server end waits in [Listener.PollAccept] and [Listener.Accept]. Both ends implement
// transport.Conn. Nothing moves until [Network.Advance] or [Network.AdvanceTo]: then every
// packet due is delivered in time order, ties in send order. There are no wall-clock
// sleeps or timers, so a run is a pure function of the seed and the sequence of calls.
//
// Each direction of a connection has its own [Conditions]: latency, uniform jitter,
// independent loss, bursty [GilbertElliott] loss, duplication, reordering, a bandwidth cap
// with a tail-dropping queue, and an MTU. [Conn.SetConditions] changes them at run time;
// [Conn.SetLinkDown] models an outage that ends in a timeout after [Link].IdleTimeout.
//
// Reliable messages arrive exactly once and in order. Each simulated loss of a
// transmission delays the message by one retransmission timeout, max(2 × base RTT,
// 20 ms), and blocks the messages behind it. As with the real transports, the server's
// end reads nothing past the client's first message (its Hello) until it has sent a
// transport.Welcome; the messages held arrive then.
//
// # Tasks
//
//   - Connect a client: [Network.Dial], then [Listener.PollAccept] on the server side.
//   - Let time pass: [Network.Advance], [Network.AdvanceTo], [Network.NextEvent].
//   - Degrade the link: [Link], [Conditions], [Conn.SetConditions], [Conn.SetLinkDown].
//   - Count what the link did: [Conn.LinkStats]; what the endpoint saw: [Conn.Stats].
//   - Compare runs: [Network.SetTrace].
package sim
