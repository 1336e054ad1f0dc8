package main

import (
	"math"
	"slices"
	"time"

	"github.com/archenet/archenet/components"
	"github.com/archenet/archenet/replication"
	"github.com/mlange-42/arche/ecs"
)

// replayer drives the server world from a trace: bodies spawn at their
// first appearance, follow the trace's poses, and despawn when they vanish.
type replayer struct {
	r     *rig
	t     *Trace
	cur   int                      // frame index being played
	ents  map[int]ecs.Entity       // trace id → server entity
	ids   map[components.NetID]int // server net id → trace id
	fresh []int                    // ids spawned this tick, net id not known yet
	frame map[uint32]int           // server tick → frame index
	idRep ecs.ID

	measure bool
	errs    errStats
	settled errStats
	scratch []int
}

type errStats struct {
	n                         int
	posSum, posMax, posEuclid float64
	rotSum, rotMax            float64
}

func (e *errStats) add(mirror components.Transform, want TraceBody) {
	d := mirror.Pos.Sub(want.Pos)
	axis := math.Max(math.Abs(d.X), math.Max(math.Abs(d.Y), math.Abs(d.Z)))
	rot := mirror.Rot.AngleTo(want.Rot) * 180 / math.Pi
	e.n++
	e.posSum += axis
	e.posMax = math.Max(e.posMax, axis)
	e.posEuclid = math.Max(e.posEuclid, d.Len())
	e.rotSum += rot
	e.rotMax = math.Max(e.rotMax, rot)
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
			rp.fresh = append(rp.fresh, b.ID)
		}
		tr := (*components.Transform)(sw.Get(e, rp.r.tid))
		tr.Pos, tr.Rot = b.Pos, b.Rot
	}
}

// after runs once per tick after the clients' step.
func (rp *replayer) after() {
	for _, id := range rp.fresh {
		if e, ok := rp.ents[id]; ok {
			if nid, ok := rp.r.srv.NetID(e); ok {
				rp.ids[nid] = id
			}
		}
	}
	rp.fresh = rp.fresh[:0]
	rp.frame[rp.r.srv.Tick()] = rp.cur
	if rp.measure {
		for _, p := range rp.r.peers {
			rp.compare(p, &rp.errs, -1)
		}
	}
}

// compare adds the error of every mirror in p's newest view against the
// trace frame of that view's tick (or frame k if k ≥ 0).
func (rp *replayer) compare(p *peer, into *errStats, k int) {
	v := p.c.Receiver().Latest()
	if v == nil {
		return
	}
	if k < 0 {
		var ok bool
		if k, ok = rp.frame[v.Tick]; !ok {
			return
		}
	}
	f := &rp.t.Frames[k]
	tid := ecs.ComponentID[components.Transform](p.w)
	for i, slot := range v.Slots {
		nid := components.NetID{Handle: components.MakeHandle(v.Metas[i].Owner, slot), Gen: v.Metas[i].Gen}
		e, ok := p.c.Entity(nid)
		if !ok || !p.w.Has(e, tid) {
			continue
		}
		id, ok := rp.ids[nid]
		if !ok {
			continue
		}
		want, ok := f.Body(id)
		if !ok {
			continue
		}
		into.add(*(*components.Transform)(p.w.Get(e, tid)), want)
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
	rp := &replayer{
		r: r, t: t, ents: map[int]ecs.Entity{}, ids: map[components.NetID]int{}, frame: map[uint32]int{},
		idRep: ecs.ComponentID[components.Replicated](r.sw),
	}
	r.game = func() { rp.apply(rp.cur) }
	r.after = rp.after
	rep := &Report{}
	rep.JoinTicks, err = r.connect(nil)
	if err != nil {
		return nil, err
	}

	r.meter = newMeter(r)
	rp.measure = true
	progress := newProgress(cfg, "replay")
	for k := 1; k < len(t.Frames); k++ {
		rp.cur = k
		r.step()
		progress.tick(k, r)
	}
	rep.fill(r, r.meter, t.MaxBodies(), t.MaxBodies())
	r.meter = nil
	rp.measure = false

	rep.SettleTicks = cfg.settleTicks()
	for i := 0; i < rep.SettleTicks; i++ {
		r.step()
	}
	for _, p := range r.peers {
		rp.compare(p, &rp.settled, len(t.Frames)-1)
	}
	if err := r.checkConverged(func(*peer) (components.Vec3, bool) { return focus, cfg.Interest > 0 }); err != nil {
		rep.ConvergeError = err.Error()
	} else {
		rep.Converged = true
	}
	rep.finish(r, start)
	tr := &TraceReport{
		Trace: cfg.TraceName, TraceRateHz: t.Rate, TraceFrames: len(t.Frames), DownKbitPerS: rep.DownKBpsMean * 8,
		Samples: rp.errs.n, PosErrMaxM: rp.errs.posMax, PosErrMaxEuclidM: rp.errs.posEuclid, RotErrMaxDeg: rp.errs.rotMax,
		SettledPosErrMaxM: rp.settled.posMax, SettledRotErrMax: rp.settled.rotMax,
	}
	if rp.errs.n > 0 {
		tr.PosErrMeanM, tr.RotErrMeanDeg = rp.errs.posSum/float64(rp.errs.n), rp.errs.rotSum/float64(rp.errs.n)
	}
	rep.TraceReport = tr
	return rep, nil
}
