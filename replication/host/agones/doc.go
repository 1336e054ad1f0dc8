// Package agones drives the Agones game-server sidecar for a host of
// matches over its REST API: Ready, Health, counter-based allocation of
// matches, player tracking and lists, back to Ready when empty, and
// Shutdown.
//
// # Outline
//
// A [Driver] keeps the sidecar (the Agones SDK server beside the game
// server in its pod) in step with a host.Host, from goroutines of its own;
// nothing it does waits on a match's frame, and what a frame reports
// ([Driver.OnPlayer], [Driver.OnMatch]: host.Config hooks that
// [Driver.Configure] sets) goes through a bounded queue:
//
//   - Ready once the host admits players;
//   - Health every period (the GameServer's spec.health.period_seconds, or
//     [Config].HealthPeriod) while host.Host.Live holds: a stalled match is
//     ended by the host (its players get the reason) and the pings go on
//     for the others; only a stalled host loop (or a stalled match with
//     host.Config.KeepStalled) stops them, so Agones replaces the pod;
//   - a watch of /watch/gameserver (reconnected with backoff): when the
//     GameServer is allocated, the match its labels or annotations name
//     ([Config].MatchKey, "match" by default) is opened with
//     [Config].OpenMatch, once per name;
//   - the rooms Counter ([Config].Rooms; Agones Counters and Lists, beta
//     since 1.41): its count is kept at the open matches plus those being
//     opened, so a GameServerAllocation that selects counters.rooms
//     minAvailable 1 among Allocated, then Ready, game servers and
//     increments it places several matches on one pod, and a
//     FleetAutoscaler's Counter policy sizes the fleet by rooms;
//   - the players List ([Config].Players): one value "match/player" per
//     player ([ListValue]); and player tracking (alpha; [Config].Capacity):
//     the capacity at start, then a connect or disconnect per join and
//     leave;
//   - when the last match of an Allocated GameServer ends: Ready again, or
//     Shutdown, or nothing ([Config].WhenEmpty);
//   - at the drain, with [Config].Handoff, each open match handed to
//     another server instead of ended: its checkpoint taken, the game's
//     backend opening it elsewhere, its players told where and resuming
//     their seats there;
//   - Shutdown once the host is done (host.Host.Drain, then every match
//     ended).
//
// The sidecar's address comes from $AGONES_SDK_HTTP_PORT as Agones sets it,
// or [Config].URL. The Go SDK is not needed: the REST contract is small.
// [Driver.Address] gives the GameServer's public address and ports, and
// [Address.Endpoint] the string connect tokens name the server by
// (token.ServerAddress, which the matchmaker calls with the allocation's
// address and port). examples/agones has a Fleet, a FleetAutoscaler and a
// GameServerAllocation to start from. Tests start the real sidecar in
// local mode (package agonestest).
//
// # Tasks
//
//   - Wire a host to the sidecar: [New] first, [Driver.Configure] on the
//     host.Config, host.New, then go [Driver.Run](ctx, h).
//   - Open the allocated matches: [Config].OpenMatch and [Config].MatchKey;
//     count them: a rooms counter in the Fleet (or [Config].Rooms).
//   - Name the server in connect tokens: [Driver.Address], [Address.Endpoint].
//   - Reuse or replace an emptied pod: [Config].WhenEmpty.
//   - Shut down on SIGTERM: h.Drain(...); Run returns after the Shutdown call.
//   - Keep the matches of a pod being replaced: [Config].Handoff.
//   - See what it did: [Driver.State], [Driver.Stats].
package agones
