package main

import (
	"fmt"
	"time"

	"github.com/archenet/archenet/replication"
)

// Run runs one load test: the synthetic scene, or a trace replay if
// cfg.Trace is set. A run that completes returns its report even when the
// clients did not converge (Report.Converged); err is for runs that could
// not be carried out.
func Run(cfg Config) (*Report, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if cfg.Trace != nil {
		return runReplay(cfg)
	}
	return runScene(cfg)
}

func runScene(cfg Config) (*Report, error) {
	start := time.Now()
	var interest *replication.Interest
	if cfg.Interest > 0 {
		interest = &replication.Interest{Radius: cfg.Interest}
	}
	r, err := newRig(cfg, interest)
	if err != nil {
		return nil, err
	}
	defer r.close()
	sc := newScene(r)
	r.game = sc.update
	rep := &Report{}
	rep.JoinTicks, err = r.connect(func() bool { return sc.nAvatar == cfg.Clients })
	if err != nil {
		return nil, err
	}

	r.meter = newMeter(r)
	r.startFidelity(cfg.Interest == 0)
	progress := newProgress(cfg, "loadtest")
	for i := 1; i <= cfg.Ticks; i++ {
		r.step()
		progress.tick(i, r)
	}
	rep.fill(r, r.meter, cfg.Entities, cfg.Entities+cfg.Clients)
	rep.Avatars = sc.nAvatar
	r.meter, r.fid = nil, nil

	// Settle: no loss, no movement; then every mirror must match.
	sc.moving = false
	r.calm()
	rep.SettleTicks = cfg.settleTicks()
	for i := 0; i < rep.SettleTicks; i++ {
		r.step()
	}
	if err := r.checkConverged(sc.focus); err != nil {
		rep.ConvergeError = err.Error()
	} else {
		rep.Converged = true
	}
	rep.finish(r, start)
	return rep, nil
}

// progress prints a line every 10% of the measured ticks.
type progress struct {
	cfg   Config
	name  string
	every int
	next  int
}

func newProgress(cfg Config, name string) *progress {
	return &progress{cfg: cfg, name: name, every: max(1, cfg.Ticks/10), next: max(1, cfg.Ticks/10)}
}

func (p *progress) tick(i int, r *rig) {
	if p.cfg.Progress == nil || i < p.next {
		return
	}
	p.next += p.every
	m := r.meter
	down, _, _, _ := m.rates(r)
	n := min(len(m.recv), p.every)
	server := 0.0
	for k := len(m.recv) - n; k < len(m.recv); k++ {
		server += m.recv[k] + m.send[k]
	}
	fmt.Fprintf(p.cfg.Progress, "%s: %3d%%  tick %d/%d  server %.3f ms/tick  down %.2f KB/s/client  %d/%d clients ready\n",
		p.name, i*100/p.cfg.Ticks, i, p.cfg.Ticks, server/float64(max(n, 1)), down, r.ready(), len(r.peers))
}
