package main

import (
	"math"
	"slices"

	"github.com/archenet/archenet/components"
	"github.com/mlange-42/arche/ecs"
)

// fidelity measures what clients show: per sample of (client, entity,
// tick), the error of the client's mirror against the server's state at the
// tick of the client's newest snapshot (so latency itself is not error).
// Every mirror counts, also one no datagram has carried yet; an entity the
// server had at that tick and the client does not mirror (without interest)
// counts as a stale sample of its own. A sample is stale when its error
// exceeds the replicated precision: step/2 on some axis, or the rotation
// codec's worst case.
type fidelity struct {
	posBound, rotBound float64 // m per axis, degrees
	hist               [histDepth]histFrame
	from               uint32 // first server tick sampled (0: not yet)
	peers              int    // how many clients are sampled (the first ones)
	checkMissing       bool   // every server entity must be mirrored (no interest)

	pos, rot []float32 // per sample
	stale    int
	missing  int
}

// histDepth bounds how far behind a client's newest tick may be (ticks).
const histDepth = 128

// histFrame is the server's replicated poses at one tick.
type histFrame struct {
	tick  uint32
	poses map[components.NetID]components.Transform
}

func newFidelity(posStep float64, quatBits int, peers int, checkMissing bool) *fidelity {
	return &fidelity{posBound: posStep/2 + 1e-9, rotBound: quatBound(quatBits), peers: peers, checkMissing: checkMissing}
}

// quatBound is a worst-case rotation error, in degrees, of smallest-three
// with bits per component over ±1/√2: each of the three sent components is
// off by at most e (half a step), the rebuilt largest one by at most 3e
// (it is at least 1/2), so the quaternion by at most √12·e, and the angle
// by 2·asin of that.
func quatBound(bits int) float64 {
	e := math.Sqrt2 / float64(int(1)<<bits-1) / 2
	return 2 * math.Asin(math.Min(1, math.Sqrt(12)*e)) * 180 / math.Pi
}

// record keeps the server's poses of tick (call after the server's Send).
func (f *fidelity) record(r *rig, tick uint32) {
	h := &f.hist[tick%histDepth]
	h.tick = tick
	if h.poses == nil {
		h.poses = map[components.NetID]components.Transform{}
	}
	clear(h.poses)
	q := r.sw.Query(ecs.All(ecs.ComponentID[components.Replicated](r.sw), r.tid))
	for q.Next() {
		if id, ok := r.srv.NetID(q.Entity()); ok {
			h.poses[id] = *(*components.Transform)(q.Get(r.tid))
		}
	}
}

// sample adds the samples of the first f.peers clients (call after the
// clients' step), from server tick f.from on.
func (f *fidelity) sample(r *rig) { f.sampleAt(r, 0) }

// sampleAt is sample against server tick at (0: each client's newest
// snapshot tick).
func (f *fidelity) sampleAt(r *rig, at uint32) {
	for _, p := range r.peers[:min(f.peers, len(r.peers))] {
		T := at
		if T == 0 {
			T = p.c.ServerTick()
		}
		if T == 0 || f.from == 0 || int32(T-f.from) < 0 {
			continue
		}
		h := &f.hist[T%histDepth]
		if h.tick != T {
			continue
		}
		tid := ecs.ComponentID[components.Transform](p.w)
		idNet := ecs.ComponentID[components.NetID](p.w)
		seen := 0
		q := p.w.Query(ecs.All(idNet, tid))
		for q.Next() {
			want, ok := h.poses[*(*components.NetID)(q.Get(idNet))]
			if !ok {
				continue // gone at T, or spawned after it
			}
			seen++
			got := (*components.Transform)(q.Get(tid))
			d := got.Pos.Sub(want.Pos)
			pe := math.Max(math.Abs(d.X), math.Max(math.Abs(d.Y), math.Abs(d.Z)))
			re := got.Rot.AngleTo(want.Rot) * 180 / math.Pi
			f.pos = append(f.pos, float32(pe))
			f.rot = append(f.rot, float32(re))
			if pe > f.posBound || re > f.rotBound {
				f.stale++
			}
		}
		if f.checkMissing && seen < len(h.poses) {
			f.missing += len(h.poses) - seen
		}
	}
}

// FidelityReport is what clients showed over the measured window. Errors
// are per sample of (client, entity, tick) against the server's state at
// the tick of the client's newest snapshot; position error is per axis.
type FidelityReport struct {
	Samples        int     `json:"fidelity_samples"`
	StaleFraction  float64 `json:"stale_fraction"`  // samples beyond the precision bound, missing mirrors included
	MissingMirrors int     `json:"missing_mirrors"` // server entities the client did not mirror (counted as stale)
	PosBoundM      float64 `json:"pos_bound_m"`     // step/2
	RotBoundDeg    float64 `json:"rot_bound_deg"`   // the quaternion width's worst case
	PosErrP50M     float64 `json:"pos_err_p50_m"`
	PosErrP99M     float64 `json:"pos_err_p99_m"`
	PosErrMaxM     float64 `json:"pos_err_max_m"`
	RotErrP50Deg   float64 `json:"rot_err_p50_deg"`
	RotErrP99Deg   float64 `json:"rot_err_p99_deg"`
	RotErrMaxDeg   float64 `json:"rot_err_max_deg"`
}

func (f *fidelity) report() FidelityReport {
	n := len(f.pos) + f.missing
	rep := FidelityReport{Samples: n, MissingMirrors: f.missing, PosBoundM: f.posBound, RotBoundDeg: f.rotBound}
	if n == 0 {
		return rep
	}
	rep.StaleFraction = float64(f.stale+f.missing) / float64(n)
	rep.PosErrP50M, rep.PosErrP99M, rep.PosErrMaxM = spread(f.pos)
	rep.RotErrP50Deg, rep.RotErrP99Deg, rep.RotErrMaxDeg = spread(f.rot)
	return rep
}

// spread returns the median, 99th percentile and maximum of v (sorting it).
func spread(v []float32) (p50, p99, maxV float64) {
	if len(v) == 0 {
		return 0, 0, 0
	}
	slices.Sort(v)
	at := func(q float64) float64 { return float64(v[min(len(v)-1, int(q*float64(len(v))))]) }
	return at(0.5), at(0.99), float64(v[len(v)-1])
}
