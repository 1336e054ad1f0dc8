package agones

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/archenet/archenet/replication/host"
)

// Driver keeps the Agones sidecar in step with a [host.Host]: Ready once
// the host admits, Health while the host is live, matches opened on
// allocation and counted in the Rooms counter, players reported as they
// join and leave (player tracking and the Players list), back to Ready (or
// Shutdown) when an allocation's matches have ended, Shutdown once the
// host is done. All HTTP runs on the driver's goroutines; what a match's
// goroutine reports (OnPlayer, OnMatch) goes in a bounded queue and never
// waits.
type Driver struct {
	cfg    Config
	api    *sdk
	events chan host.PlayerEvent
	kick   chan struct{} // a match opened or ended: reconcile the rooms
	ended  atomic.Bool   // a match ended since the rooms loop last looked
	// owed counts the rooms of matches ended (or failed to open) not yet
	// taken off the counter; excessSince is since when the counter has held
	// more rooms than that explains (the rooms loop's).
	owed        atomic.Int64
	excessSince time.Time
	// readied: the driver made the GameServer Ready again (WhenEmpty):
	// readyAsked until the watch shows Ready, then readySeen.
	readied atomic.Int32
	state   atomic.Pointer[string]

	// In use once Run has read the GameServer ("" none).
	rooms, playerList string

	mu      sync.Mutex
	pending map[string]bool // allocations being opened
	stats   struct {
		ready, pings, skipped, reconnects, players, dropped, errors, opened atomic.Uint64
		backToReady, handoffs, handoffsFailed                               atomic.Uint64
		rooms                                                               atomic.Int64
		shutdown                                                            atomic.Bool
	}
}

// New returns a driver for cfg; an invalid setting is an error. Hand it the
// host's config (Configure) before host.New, then call Run with the host.
func New(cfg Config) (*Driver, error) {
	cfg, err := cfg.resolve()
	if err != nil {
		return nil, err
	}
	d := &Driver{cfg: cfg, api: newSDK(&cfg), events: make(chan host.PlayerEvent, cfg.Queue), kick: make(chan struct{}, 1),
		pending: map[string]bool{}}
	d.stats.rooms.Store(-1)
	return d, nil
}

// Configure sets cfg.OnPlayer and cfg.OnMatch to report to the driver
// (after what they did, if set). Call it on the host's config before
// host.New: the driver needs no host until Run.
func (d *Driver) Configure(cfg *host.Config) {
	if prev := cfg.OnPlayer; prev != nil {
		cfg.OnPlayer = func(e host.PlayerEvent) { prev(e); d.OnPlayer(e) }
	} else {
		cfg.OnPlayer = d.OnPlayer
	}
	if prev := cfg.OnMatch; prev != nil {
		cfg.OnMatch = func(e host.MatchEvent) { prev(e); d.OnMatch(e) }
	} else {
		cfg.OnMatch = d.OnMatch
	}
}

// OnMatch notes a match opening or ending (host.Config.OnMatch): the Rooms
// counter follows, and an Allocated GameServer whose last match ended goes
// back to Ready (Config.WhenEmpty). It never blocks.
func (d *Driver) OnMatch(e host.MatchEvent) {
	if !e.Opened {
		d.ended.Store(true)
		d.owed.Add(1)
	}
	select {
	case d.kick <- struct{}{}:
	default:
	}
}

// OnPlayer queues a join or leave for the sidecar (host.Config.OnPlayer).
// It never blocks: with the queue full the event is dropped and counted.
func (d *Driver) OnPlayer(e host.PlayerEvent) {
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
	// Rooms is the Rooms counter's count as the driver last read or set
	// it (-1: no counter in use, or not read yet).
	Rooms int64
	// BackToReady counts the times an Allocated GameServer went back to
	// Ready after its last match ended (Config.WhenEmpty).
	BackToReady uint64
	// Errors counts failed calls (each retried, with backoff).
	Errors uint64
	// Handoffs counts matches moved to another server at the drain
	// (Config.Handoff); HandoffsFailed those whose checkpoint or Handoff
	// failed (they ended there).
	Handoffs, HandoffsFailed uint64
	// Shutdown: the Shutdown call succeeded.
	Shutdown bool
}

// Stats returns the driver's counts.
func (d *Driver) Stats() Stats {
	s := &d.stats
	return Stats{Ready: s.ready.Load(), Pings: s.pings.Load(), Skipped: s.skipped.Load(), Reconnects: s.reconnects.Load(),
		Players: s.players.Load(), PlayersDropped: s.dropped.Load(), Opened: s.opened.Load(), Rooms: s.rooms.Load(),
		BackToReady: s.backToReady.Load(), Errors: s.errors.Load(), Shutdown: s.shutdown.Load(),
		Handoffs: s.handoffs.Load(), HandoffsFailed: s.handoffsFailed.Load()}
}

// Run drives the sidecar for h until h is done (then it reports the
// player events left, calls Shutdown and returns nil) or ctx ends (it
// returns ctx's error). Typically: on SIGTERM call h.Drain; Run returns
// once the matches have ended and the sidecar was told to shut down.
func (d *Driver) Run(ctx context.Context, h *host.Host) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	var gs GameServer
	if !d.retry(ctx, "gameserver", func(ctx context.Context) (err error) { gs, err = d.api.gameServer(ctx); return err }) {
		return ctx.Err()
	}
	period := d.healthPeriod(gs)
	d.resources(ctx, gs)
	d.noteState(gs.Status.State) // (the state before Ready, e.g. Scheduled)
	run := func(fn func(context.Context)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			fn(ctx)
		}()
	}
	run(func(ctx context.Context) { d.watch(ctx, h) })
	run(func(ctx context.Context) { d.health(ctx, h, period) })
	run(func(ctx context.Context) { d.roomsLoop(ctx, h, period) })
	if d.cfg.Handoff != nil {
		run(func(ctx context.Context) { d.handoffs(ctx, h) })
	}
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
func (d *Driver) healthPeriod(gs GameServer) time.Duration {
	if d.cfg.HealthPeriod > 0 {
		return d.cfg.HealthPeriod
	}
	if gs.Spec.Health.PeriodSeconds > 0 {
		return time.Duration(gs.Spec.Health.PeriodSeconds) * time.Second
	}
	return 5 * time.Second
}

// resources picks the Rooms counter and Players list the GameServer has,
// and sets the counter's capacity (Config.MatchCapacity).
func (d *Driver) resources(ctx context.Context, gs GameServer) {
	if _, ok := gs.Status.Counters[d.cfg.Rooms]; ok {
		d.rooms = d.cfg.Rooms
	} else if d.cfg.Rooms != DefaultRooms && d.cfg.Rooms != None {
		d.cfg.Logger.Warn("archenet/agones: the GameServer has no such counter: matches are not counted", "rooms", d.cfg.Rooms)
	}
	if _, ok := gs.Status.Lists[d.cfg.Players]; ok {
		d.playerList = d.cfg.Players
	} else if d.cfg.Players != DefaultPlayers && d.cfg.Players != None {
		d.cfg.Logger.Warn("archenet/agones: the GameServer has no such list: players are not listed", "players", d.cfg.Players)
	}
	if d.rooms != "" && d.cfg.MatchCapacity > 0 {
		d.retryN(ctx, "rooms capacity", 5, func(ctx context.Context) error {
			return d.api.setCounterCapacity(ctx, d.rooms, d.cfg.MatchCapacity)
		})
	}
}

// health pings every period while h is live: a stalled match is ended by
// the host (host.Config.StallAfter) and does not stop the pings; a stalled
// host loop, or a stalled match with host.Config.KeepStalled, does (so
// Agones marks the server Unhealthy and replaces it).
func (d *Driver) health(ctx context.Context, h *host.Host, period time.Duration) {
	t := time.NewTicker(period)
	defer t.Stop()
	stalled := false
	for {
		if err := h.Live(); err != nil {
			d.stats.skipped.Add(1)
			if !stalled {
				d.cfg.Logger.Error("archenet/agones: health pings stop: the host is not live", "err", err)
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

// roomsLoop keeps the Rooms counter at the open matches plus the
// allocations being opened, and applies Config.WhenEmpty, after every
// match opened or ended and every period.
func (d *Driver) roomsLoop(ctx context.Context, h *host.Host, period time.Duration) {
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		// One count of the matches for both (taken before the counter is
		// read): the GameServer goes Ready only after a sync that counted
		// no match; a match that ends meanwhile wakes the loop again.
		n := d.rooms0(h)
		d.syncRooms(ctx, n, period)
		d.whenEmpty(h, n)
		select {
		case <-ctx.Done():
			return
		case <-d.kick:
		case <-t.C:
		}
	}
}

// The stages of Driver.readied.
const (
	readyAsked = 1
	readySeen  = 2
)

// busy reports whether a match is open or being opened.
func (d *Driver) busy(h *host.Host) bool { return d.rooms0(h) > 0 }

// rooms0 is how many matches are open or being opened (a match being
// opened is in the host's table before its allocation stops pending:
// counted once).
func (d *Driver) rooms0(h *host.Host) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	n := len(h.Matches())
	for name := range d.pending {
		if _, open := h.Match(name); !open {
			n++
		}
	}
	return n
}

// syncRooms sets the Rooms counter's count to open, the open matches plus
// the allocations being opened (within its capacity), by a difference: an
// allocation's increment racing with it is kept, and one whose match the
// watch has not named yet is left for grace.
func (d *Driver) syncRooms(ctx context.Context, open int, grace time.Duration) {
	if d.rooms == "" {
		return
	}
	// open, the matches, was counted before the counter is read: an
	// allocation that the watch names in between is in the count read, not
	// in want (a room more than the matches, kept for grace), rather than
	// counted twice.
	want := int64(open)
	c, err := d.api.counter(ctx, d.rooms)
	if err != nil {
		if ctx.Err() == nil {
			d.stats.errors.Add(1)
			d.cfg.Logger.Warn("archenet/agones: reading the rooms counter", "err", err)
		}
		return
	}
	want = min(want, c.Capacity)
	diff := want - c.Count
	if diff < 0 {
		// Rooms above the matches: those of ended matches go at once; any
		// more may be an allocation whose label the watch has not brought
		// yet, and go only if they are still there a period later.
		owed := d.owed.Load()
		if -diff > owed {
			if d.excessSince.IsZero() {
				d.excessSince = time.Now()
			}
			if time.Since(d.excessSince) < grace {
				diff = -owed
			}
		}
	}
	if diff != 0 {
		if err := d.api.addCount(ctx, d.rooms, diff); err != nil {
			if ctx.Err() == nil {
				d.stats.errors.Add(1)
				d.cfg.Logger.Warn("archenet/agones: setting the rooms counter", "err", err, "want", want)
			}
			return
		}
		for diff < 0 { // (OnMatch adds concurrently)
			o := d.owed.Load()
			if d.owed.CompareAndSwap(o, max(0, o+diff)) {
				break
			}
		}
	}
	if c.Count+diff <= want {
		d.excessSince = time.Time{}
	}
	if c.Count < want {
		d.owed.Store(0) // (no room of an ended match was left to take)
	}
	d.stats.rooms.Store(c.Count + diff)
}

// whenEmpty applies Config.WhenEmpty once a match has ended and the
// Allocated GameServer has none open and none being opened. If an
// allocation raced with the Ready (a match open in a Ready GameServer the
// driver made Ready), it marks the GameServer Allocated again, so the fleet
// does not scale down a pod with a match in it.
func (d *Driver) whenEmpty(h *host.Host, open int) {
	switch st := d.State(); {
	case d.readied.Load() == readyAsked && st == "Ready":
		d.readied.Store(readySeen)
	case d.readied.Load() == readySeen && st != "Ready":
		d.readied.Store(0) // (allocated, or shut down, since)
	}
	if d.readied.Load() != 0 && d.State() == "Ready" && d.busy(h) {
		d.readied.Store(0)
		d.cfg.Logger.Warn("archenet/agones: a match opened as the GameServer went Ready: Allocated again")
		d.retryN(context.Background(), "allocate", 5, d.api.allocate)
	}
	if !d.ended.Load() {
		return
	}
	if open > 0 || d.rooms0(h) > 0 || d.State() != "Allocated" || !h.Admitting() {
		return
	}
	d.ended.Store(false)
	switch d.cfg.WhenEmpty {
	case BackToReady:
		if d.retryN(context.Background(), "ready", 5, d.api.ready) {
			d.readied.Store(readyAsked)
			d.stats.backToReady.Add(1)
			d.cfg.Logger.Info("archenet/agones: the last match ended: Ready again")
		}
	case ShutdownWhenEmpty:
		d.cfg.Logger.Info("archenet/agones: the last match ended: shutting down")
		h.Drain("no match left (agones.ShutdownWhenEmpty)", time.Now())
	}
}

// watch follows the GameServer, reconnecting with backoff, and opens the
// match an allocation names.
func (d *Driver) watch(ctx context.Context, h *host.Host) {
	opened := map[string]bool{}
	wait := d.cfg.MinBackoff
	for {
		got := false
		err := d.api.watchStream(ctx, func(gs GameServer) {
			got = true
			d.onGameServer(h, gs, opened)
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

// noteState records the GameServer's state st and reports a change (the
// watch's goroutine, or Run's before it starts).
func (d *Driver) noteState(st string) {
	old := d.State()
	if old == st || st == "" {
		return
	}
	d.mu.Lock()
	d.state.Store(&st)
	d.mu.Unlock()
	d.cfg.Logger.Info("archenet/agones: game server state", "state", st, "was", old)
	if d.cfg.OnState != nil {
		d.cfg.OnState(st)
	}
	select { // (the rooms loop looks at the new state)
	case d.kick <- struct{}{}:
	default:
	}
}

// maxOpened bounds the allocated match names the watch remembers (so that
// a GameServer still labelled with an ended match does not reopen it).
const maxOpened = 4096

// onGameServer notes the state and, on an allocation that names a match
// not opened yet, opens it (counted in the Rooms counter meanwhile).
func (d *Driver) onGameServer(h *host.Host, gs GameServer, opened map[string]bool) {
	st := gs.Status.State
	name := ""
	if st == "Allocated" && d.cfg.OpenMatch != nil {
		name = d.matchOf(gs)
	}
	open := name != "" && !opened[name]
	if open {
		d.mu.Lock()
		d.pending[name] = true
		d.mu.Unlock()
	}
	d.noteState(st) // (after the allocation is pending: whenEmpty sees it)
	if !open {
		return
	}
	if len(opened) >= maxOpened {
		clear(opened)
	}
	opened[name] = true
	err := d.cfg.OpenMatch(h, name)
	d.mu.Lock()
	delete(d.pending, name)
	d.mu.Unlock()
	if err != nil {
		d.cfg.Logger.Error("archenet/agones: opening the allocated match", "match", name, "err", err)
		d.OnMatch(host.MatchEvent{Match: name}) // (the rooms counter drops the allocation)
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
// order (player tracking and the Players list), until ctx ends, or flush
// closes and the queue is empty.
func (d *Driver) players(ctx context.Context, flush <-chan struct{}) {
	if d.cfg.Capacity > 0 {
		d.retry(ctx, "player capacity", func(ctx context.Context) error { return d.api.setCapacity(ctx, d.cfg.Capacity) })
	}
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
		if d.cfg.Capacity == 0 && d.playerList == "" {
			continue
		}
		ok := d.retryN(ctx, "player", 5, func(ctx context.Context) error {
			if d.cfg.Capacity > 0 {
				if err := d.api.player(ctx, e.Player.ID, e.Joined); err != nil {
					return err
				}
			}
			if d.playerList != "" {
				return d.api.listValue(ctx, d.playerList, ListValue(e), e.Joined)
			}
			return nil
		})
		if ok {
			d.stats.players.Add(1)
		} else {
			d.stats.dropped.Add(1)
		}
	}
}

// ListValue is the value of player e in the Players list: "match/id", the
// match's name and the player's ID (host.Player.ID, already in that form
// without connect tokens: "duel-7/3"; with them "duel-7/77" for client id
// 77 of the token).
func ListValue(e host.PlayerEvent) string {
	if strings.HasPrefix(e.Player.ID, e.Match+"/") {
		return e.Player.ID
	}
	return e.Match + "/" + e.Player.ID
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
