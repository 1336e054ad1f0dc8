package agones

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/archenet/archenet/replication/host"
)

// Driver keeps the Agones sidecar in step with a [host.Host]: Ready once
// the host admits, Health while every match's frame advances, matches
// opened on allocation, players reported as they join and leave, Shutdown
// once the host is done. All HTTP runs on the driver's goroutines; what a
// match's goroutine does (OnPlayer) is put in a bounded queue and never
// waits.
type Driver struct {
	cfg    Config
	api    *sdk
	events chan host.PlayerEvent
	state  atomic.Pointer[string]
	stats  struct {
		ready, pings, skipped, reconnects, players, dropped, errors, opened atomic.Uint64
		shutdown                                                            atomic.Bool
	}
}

// New returns a driver for cfg; an invalid setting is an error. Give its
// OnPlayer to host.Config.OnPlayer, then call Run with the host.
func New(cfg Config) (*Driver, error) {
	cfg, err := cfg.resolve()
	if err != nil {
		return nil, err
	}
	return &Driver{cfg: cfg, api: newSDK(&cfg), events: make(chan host.PlayerEvent, cfg.Queue)}, nil
}

// OnPlayer queues a join or leave for the sidecar (host.Config.OnPlayer).
// It never blocks: with the queue full the event is dropped and counted.
func (d *Driver) OnPlayer(e host.PlayerEvent) {
	if d.cfg.Capacity == 0 {
		return
	}
	select {
	case d.events <- e:
	default:
		d.stats.dropped.Add(1)
	}
}

// State returns the GameServer's state as the watch last saw it ("" before
// the first), e.g. "Ready", "Allocated", "Shutdown".
func (d *Driver) State() string {
	if s := d.state.Load(); s != nil {
		return *s
	}
	return ""
}

// Stats are the driver's counts since New.
type Stats struct {
	// Ready counts Ready calls that succeeded (one per Run, normally).
	Ready uint64
	// Pings counts health pings sent; Skipped the periods without one
	// because a match was stalled (host.Host.Live).
	Pings, Skipped uint64
	// Reconnects counts watch streams opened again after one ended.
	Reconnects uint64
	// Players counts player connects and disconnects reported;
	// PlayersDropped those lost to a full queue or failing calls.
	Players, PlayersDropped uint64
	// Opened counts matches opened on allocation.
	Opened uint64
	// Errors counts failed calls (each retried, with backoff).
	Errors uint64
	// Shutdown: the Shutdown call succeeded.
	Shutdown bool
}

// Stats returns the driver's counts.
func (d *Driver) Stats() Stats {
	s := &d.stats
	return Stats{Ready: s.ready.Load(), Pings: s.pings.Load(), Skipped: s.skipped.Load(), Reconnects: s.reconnects.Load(),
		Players: s.players.Load(), PlayersDropped: s.dropped.Load(), Opened: s.opened.Load(), Errors: s.errors.Load(),
		Shutdown: s.shutdown.Load()}
}

// Run drives the sidecar for h until h is done (then it reports the
// player events left, calls Shutdown and returns nil) or ctx ends (it
// returns ctx's error). Typically: on SIGTERM call h.Drain; Run returns
// once the matches have ended and the sidecar was told to shut down.
func (d *Driver) Run(ctx context.Context, h *host.Host) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	period := d.healthPeriod(ctx)
	run := func(fn func(context.Context)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			fn(ctx)
		}()
	}
	run(d.watch)
	run(func(ctx context.Context) { d.health(ctx, h, period) })
	players, playersCancel := context.WithCancel(context.Background())
	flush, playersDone := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(playersDone)
		d.players(players, flush)
	}()
	defer playersCancel()
	if h.Admitting() && d.retry(ctx, "ready", d.api.ready) {
		d.stats.ready.Add(1)
		d.cfg.Logger.Info("archenet/agones: ready")
	}
	select {
	case <-ctx.Done():
		cancel()
		wg.Wait()
		return ctx.Err()
	case <-h.Done():
	}
	// The leaves of the ended matches go out before the Shutdown.
	close(flush)
	select {
	case <-playersDone:
	case <-time.After(d.cfg.MaxBackoff * 2):
	}
	if d.retry(ctx, "shutdown", d.api.shutdown) {
		d.stats.shutdown.Store(true)
		d.cfg.Logger.Info("archenet/agones: shutdown")
		// The watch may end before it delivers the new state: read it
		// once so State says what the sidecar holds when Run returns.
		if gs, err := d.api.gameServer(ctx); err == nil && gs.Status.State != "" {
			st := gs.Status.State
			d.state.Store(&st)
		}
	}
	cancel()
	wg.Wait()
	return nil
}

// healthPeriod is Config.HealthPeriod, else the GameServer's, else 5 s.
func (d *Driver) healthPeriod(ctx context.Context) time.Duration {
	if d.cfg.HealthPeriod > 0 {
		return d.cfg.HealthPeriod
	}
	if gs, err := d.api.gameServer(ctx); err == nil && gs.Spec.Health.PeriodSeconds > 0 {
		return time.Duration(gs.Spec.Health.PeriodSeconds) * time.Second
	}
	return 5 * time.Second
}

// health pings every period while h is live; a stalled match stops the
// pings (so Agones marks the server Unhealthy and replaces it).
func (d *Driver) health(ctx context.Context, h *host.Host, period time.Duration) {
	t := time.NewTicker(period)
	defer t.Stop()
	stalled := false
	for {
		if err := h.Live(); err != nil {
			d.stats.skipped.Add(1)
			if !stalled {
				d.cfg.Logger.Error("archenet/agones: health pings stop: a match is stalled", "err", err)
			}
			stalled = true
		} else if err := d.api.health(ctx); err != nil {
			if ctx.Err() != nil {
				return
			}
			d.stats.errors.Add(1)
			d.cfg.Logger.Warn("archenet/agones: health ping failed", "err", err)
		} else {
			d.stats.pings.Add(1)
			if stalled {
				d.cfg.Logger.Info("archenet/agones: health pings resume")
			}
			stalled = false
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// watch follows the GameServer, reconnecting with backoff, and opens the
// match an allocation names.
func (d *Driver) watch(ctx context.Context) {
	opened := map[string]bool{}
	wait := d.cfg.MinBackoff
	for {
		got := false
		err := d.api.watchStream(ctx, func(gs GameServer) {
			got = true
			d.onGameServer(gs, opened)
		})
		if ctx.Err() != nil {
			return
		}
		d.stats.reconnects.Add(1)
		if got {
			wait = d.cfg.MinBackoff
		}
		d.cfg.Logger.Warn("archenet/agones: watch ended; reconnecting", "err", err, "in", wait)
		if !sleep(ctx, wait) {
			return
		}
		wait = min(wait*2, d.cfg.MaxBackoff)
	}
}

// onGameServer notes the state and, on an allocation that names a match
// not opened yet, opens it.
func (d *Driver) onGameServer(gs GameServer, opened map[string]bool) {
	st := gs.Status.State
	if old := d.State(); old != st {
		d.cfg.Logger.Info("archenet/agones: game server state", "state", st, "was", old)
	}
	d.state.Store(&st)
	if st != "Allocated" || d.cfg.Open == nil {
		return
	}
	name := d.matchOf(gs)
	if name == "" || opened[name] {
		return
	}
	opened[name] = true
	if err := d.cfg.Open(name); err != nil {
		d.cfg.Logger.Error("archenet/agones: opening the allocated match", "match", name, "err", err)
		return
	}
	d.stats.opened.Add(1)
	d.cfg.Logger.Info("archenet/agones: allocated: match open", "match", name)
}

// matchOf is the match an allocated GameServer names, or DefaultMatch.
func (d *Driver) matchOf(gs GameServer) string {
	for _, key := range []string{d.cfg.MatchKey, "agones.dev/sdk-" + d.cfg.MatchKey} {
		if v := gs.ObjectMeta.Labels[key]; v != "" {
			return v
		}
		if v := gs.ObjectMeta.Annotations[key]; v != "" {
			return v
		}
	}
	return d.cfg.DefaultMatch
}

// players sets the capacity, then reports every queued join and leave, in
// order, until ctx ends, or flush closes and the queue is empty.
func (d *Driver) players(ctx context.Context, flush <-chan struct{}) {
	if d.cfg.Capacity == 0 {
		return
	}
	d.retry(ctx, "player capacity", func(ctx context.Context) error { return d.api.setCapacity(ctx, d.cfg.Capacity) })
	for {
		var e host.PlayerEvent
		select {
		case e = <-d.events:
		case <-ctx.Done():
			return
		case <-flush:
			select {
			case e = <-d.events:
			default:
				return
			}
		}
		ok := d.retryN(ctx, "player", 5, func(ctx context.Context) error { return d.api.player(ctx, e.Player.ID, e.Joined) })
		if ok {
			d.stats.players.Add(1)
		} else {
			d.stats.dropped.Add(1)
		}
	}
}

// retry calls fn until it succeeds (true) or ctx ends (false), with backoff.
func (d *Driver) retry(ctx context.Context, what string, fn func(context.Context) error) bool {
	return d.retryN(ctx, what, 0, fn)
}

// retryN is retry with at most n attempts (0: unbounded).
func (d *Driver) retryN(ctx context.Context, what string, n int, fn func(context.Context) error) bool {
	wait := d.cfg.MinBackoff
	for i := 1; ; i++ {
		err := fn(ctx)
		if err == nil {
			return true
		}
		if ctx.Err() != nil || errors.Is(err, context.Canceled) {
			return false
		}
		d.stats.errors.Add(1)
		d.cfg.Logger.Warn("archenet/agones: call failed", "call", what, "attempt", i, "err", err)
		if n > 0 && i >= n {
			return false
		}
		if !sleep(ctx, wait) {
			return false
		}
		wait = min(wait*2, d.cfg.MaxBackoff)
	}
}

// sleep waits d or until ctx ends (false).
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
