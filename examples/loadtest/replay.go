package main

import (
	"slices"
	"time"

	"github.com/archenet/archenet/components"
	"github.com/archenet/archenet/replication"
	"github.com/mlange-42/arche/ecs"
)

// replayer drives the server world from a trace: bodies spawn at their
// first appearance, follow the trace's poses, and despawn when they vanish.
type replayer struct {
	r       *rig
	t       *Trace
	cur     int                // frame index being played
	ents    map[int]ecs.Entity // trace id → server entity
	idRep   ecs.ID
	scratch []int
}

// apply makes the server world match frame k.
func (rp *replayer) apply(k int) {
	f := &rp.t.Frames[k]
	sw := rp.r.sw
	rp.scratch = rp.scratch[:0]
	for id := range rp.ents {
		if _, ok := f.Body(id); !ok {
			rp.scratch = append(rp.scratch, id)
		}
	}
	slices.Sort(rp.scratch) // map order must not decide the order of removals
	for _, id := range rp.scratch {
		sw.RemoveEntity(rp.ents[id])
		delete(rp.ents, id)
	}
	for _, b := range f.Bodies {
		e, ok := rp.ents[b.ID]
		if !ok {
			e = sw.NewEntity(rp.idRep, rp.r.tid)
			rp.ents[b.ID] = e
		}
		tr := (*components.Transform)(sw.Get(e, rp.r.tid))
		tr.Pos, tr.Rot = b.Pos, b.Rot
	}
}

// runReplay replays cfg.Trace. The net rate is the trace's; cfg.Ticks and
// the scene flags are ignored.
func runReplay(cfg Config) (*Report, error) {
	start := time.Now()
	t := cfg.Trace
	cfg.Rate = t.Rate
	cfg.Ticks = len(t.Frames) - 1
	var interest *replication.Interest
	var focus components.Vec3
	if cfg.Interest > 0 {
		for _, b := range t.Frames[0].Bodies {
			focus = focus.Add(b.Pos)
		}
		focus = focus.Scale(1 / float64(len(t.Frames[0].Bodies)))
		interest = &replication.Interest{Radius: cfg.Interest, Focus: func(replication.ClientID) (components.Vec3, bool) { return focus, true }}
	}
	r, err := newRig(cfg, interest)
	if err != nil {
		return nil, err
	}
	defer r.close()
	rp := &replayer{r: r, t: t, ents: map[int]ecs.Entity{}, idRep: ecs.ComponentID[components.Replicated](r.sw)}
	r.game = func() { rp.apply(rp.cur) }
	rep := &Report{}
	rep.JoinTicks, err = r.connect(nil)
	if err != nil {
		return nil, err
	}

	r.meter = newMeter(r)
	r.startFidelity(cfg.Interest == 0)
	progress := newProgress(cfg, "replay")
	for k := 1; k < len(t.Frames); k++ {
		rp.cur = k
		r.step()
		progress.tick(k, r)
	}
	rep.fill(r, r.meter, t.MaxBodies(), t.MaxBodies())
	r.meter, r.fid = nil, nil

	rep.SettleTicks = cfg.settleTicks()
	for i := 0; i < rep.SettleTicks; i++ {
		r.step()
	}
	// Settled: every mirror against the last frame, which the server holds.
	settled := newFidelity(cfg.posStep(), cfg.quatBits(), len(r.peers), cfg.Interest == 0)
	settled.record(r, r.srv.Tick())
	settled.from = r.srv.Tick()
	settled.sampleAt(r, r.srv.Tick())
	sr := settled.report()
	if err := r.checkConverged(func(*peer) (components.Vec3, bool) { return focus, cfg.Interest > 0 }); err != nil {
		rep.ConvergeError = err.Error()
	} else {
		rep.Converged = true
	}
	rep.finish(r, start)
	rep.TraceReport = &TraceReport{
		Trace: cfg.TraceName, TraceRateHz: t.Rate, TraceFrames: len(t.Frames), DownKbitPerS: rep.DownKBpsMean * 8,
		SettledPosErrMaxM: sr.PosErrMaxM, SettledRotErrMax: sr.RotErrMaxDeg,
	}
	return rep, nil
}
