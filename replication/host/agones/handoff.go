package agones

import (
	"context"
	"sync"
	"time"

	"github.com/archenet/archenet/replication/host"
)

// handoffPoll is how often the driver looks whether the host drains, for
// Config.Handoff.
const handoffPoll = 50 * time.Millisecond

// handoffs waits for the host to drain, then hands every open match to
// another server (Config.Handoff), each on a goroutine of its own.
func (d *Driver) handoffs(ctx context.Context, h *host.Host) {
	t := time.NewTicker(handoffPoll)
	defer t.Stop()
	for !h.Draining() {
		select {
		case <-ctx.Done():
			return
		case <-h.Done():
			return
		case <-t.C:
		}
	}
	var wg sync.WaitGroup
	for _, m := range h.Matches() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d.handoff(ctx, m)
		}()
	}
	wg.Wait()
}

// handoff moves match m to the server Config.Handoff names.
func (d *Driver) handoff(ctx context.Context, m *host.Match) {
	start := time.Now()
	cp, err := m.Checkpoint(ctx)
	if err != nil {
		d.stats.handoffsFailed.Add(1)
		d.cfg.Logger.Error("archenet/agones: handoff: no checkpoint: the match ends here", "match", m.Name(), "err", err)
		return
	}
	addr, err := d.cfg.Handoff(ctx, m.Name(), cp)
	if err != nil || addr == "" {
		d.stats.handoffsFailed.Add(1)
		d.cfg.Logger.Error("archenet/agones: handoff failed: the match ends here", "match", m.Name(), "err", err)
		return
	}
	m.MoveTo(addr, "the match moves to another server", time.Time{})
	d.stats.handoffs.Add(1)
	d.cfg.Logger.Info("archenet/agones: match handed off", "match", m.Name(), "to", addr, "checkpoint", len(cp), "took", time.Since(start))
}
