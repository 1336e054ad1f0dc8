// Package agones drives the Agones game-server sidecar for a host of
// matches over its REST API: Ready, Health, allocation, player tracking
// and Shutdown.
//
// # Outline
//
// A [Driver] keeps the sidecar (the Agones SDK server beside the game
// server in its pod) in step with a host.Host, from goroutines of its own;
// nothing it does waits on a match's frame, and what a frame reports
// ([Driver.OnPlayer], host.Config.OnPlayer) goes through a bounded queue:
//
//   - Ready once the host admits players;
//   - Health every period (the GameServer's spec.health.period_seconds, or
//     [Config].HealthPeriod) only while host.Host.Live reports every match's
//     frame advancing: a stalled match stops the pings, so Agones marks the
//     GameServer Unhealthy and replaces the pod;
//   - a watch of /watch/gameserver (reconnected with backoff): when the
//     state becomes Allocated, the match its labels or annotations name
//     ([Config].MatchKey, "match" by default) is opened with [Config].Open;
//   - player tracking (alpha; [Config].Capacity): the capacity at start,
//     then a connect or disconnect per join and leave;
//   - Shutdown once the host is done (host.Host.Drain, then every match
//     ended).
//
// The sidecar's address comes from $AGONES_SDK_HTTP_PORT as Agones sets it,
// or [Config].URL. The Go SDK is not needed: the REST contract is small.
// Tests start the real sidecar in local mode (package agonestest).
//
// # Tasks
//
//   - Wire a host to the sidecar: [New], host.Config.OnPlayer = driver.OnPlayer, go [Driver.Run](ctx, h).
//   - Open the allocated match: [Config].Open and [Config].MatchKey.
//   - Shut down on SIGTERM: h.Drain(...); Run returns after the Shutdown call.
//   - See what it did: [Driver.State], [Driver.Stats].
package agones
