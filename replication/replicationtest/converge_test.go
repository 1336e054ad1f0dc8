package replicationtest

import (
	"encoding/json"
	"testing"

	"github.com/archenet/archenet/components"
	"github.com/archenet/archenet/replication"
	"github.com/archenet/archenet/replication/schema"
	"github.com/mlange-42/arche/ecs"
	"github.com/stretchr/testify/require"
)

type secret struct {
	HP   int16  `net:"range=0:100"`
	Ammo uint16 `net:"range=0:50,owner"`
}

// pair is a server world and a client world mirroring it by hand.
type pair struct {
	reg    *schema.Registry
	sw, cw *ecs.World
	ids    map[ecs.Entity]components.NetID
	mirror map[ecs.Entity]ecs.Entity
}

func newPair(t *testing.T) *pair {
	reg := schema.NewRegistry()
	schema.MustRegister[components.Transform](reg)
	schema.MustRegister[secret](reg)
	sw, cw := ecs.NewWorld(), ecs.NewWorld()
	return &pair{reg: reg, sw: &sw, cw: &cw, ids: map[ecs.Entity]components.NetID{}, mirror: map[ecs.Entity]ecs.Entity{}}
}

// add makes a server entity at x owned by owner and its exact mirror.
func (p *pair) add(x float64, owner uint8) ecs.Entity {
	rep, tr, sec := ecs.ComponentID[components.Replicated](p.sw), ecs.ComponentID[components.Transform](p.sw), ecs.ComponentID[secret](p.sw)
	e := p.sw.NewEntity(rep, tr, sec)
	(*components.Transform)(p.sw.Get(e, tr)).Pos = components.Vec3{X: x}
	(*components.Transform)(p.sw.Get(e, tr)).Rot = components.QuatIdentity()
	*(*secret)(p.sw.Get(e, sec)) = secret{HP: 40, Ammo: 7}
	id := components.NetID{Handle: uint32(owner)<<24 | uint32(len(p.ids)), Gen: 1}
	p.ids[e] = id
	cn, ctr, csec := ecs.ComponentID[components.NetID](p.cw), ecs.ComponentID[components.Transform](p.cw), ecs.ComponentID[secret](p.cw)
	m := p.cw.NewEntity(cn, ctr, csec)
	*(*components.NetID)(p.cw.Get(m, cn)) = id
	*(*components.Transform)(p.cw.Get(m, ctr)) = *(*components.Transform)(p.sw.Get(e, tr))
	s := secret{HP: 40}
	if owner == 1 {
		s.Ammo = 7
	}
	*(*secret)(p.cw.Get(m, csec)) = s
	p.mirror[e] = m
	return e
}

func (p *pair) check(rel Relevance) error {
	return Converged(Check{Registry: p.reg, Server: p.sw, Client: p.cw, Me: 1, Relevance: rel,
		NetID: func(e ecs.Entity) (components.NetID, bool) { id, ok := p.ids[e]; return id, ok }})
}

// TestConvergedFindsEachDifference: an exact mirror passes; a state off by
// more than its precision, a leaked owner-only field, a missing, extra or
// doubled mirror, and one the client must not have, each fail.
func TestConvergedFindsEachDifference(t *testing.T) {
	p := newPair(t)
	a := p.add(1, 0)
	p.add(2, 1) // the client's own: its owner-only field is shown
	far := p.add(500, 0)
	require.NoError(t, p.check(nil))

	tr := ecs.ComponentID[components.Transform](p.cw)
	pos := &(*components.Transform)(p.cw.Get(p.mirror[a], tr)).Pos
	pos.X += 1e-5 // within the precision: the same quantized state
	require.NoError(t, p.check(nil))
	pos.X += 0.1
	require.ErrorContains(t, p.check(nil), "Transform.Pos.X differs from the server's by 100 steps (client code 1100, server 1000)")
	pos.X = 1

	sec := ecs.ComponentID[secret](p.cw)
	(*secret)(p.cw.Get(p.mirror[a], sec)).Ammo = 7 // not the client's entity
	require.ErrorContains(t, p.check(nil), "secret.Ammo differs from the server's by 7 steps")
	(*secret)(p.cw.Get(p.mirror[a], sec)).Ammo = 0

	// Interest: far is beyond the leave radius of a focus at 0.
	within := Within(p.sw, 1, &replication.Interest{Radius: 100}, components.Vec3{}, true)
	require.ErrorContains(t, p.check(within), "not relevant")
	p.cw.RemoveEntity(p.mirror[far])
	require.NoError(t, p.check(within))
	require.ErrorContains(t, p.check(nil), "2 of the 3")
	// Between the radii either is right.
	(*components.Transform)(p.sw.Get(far, ecs.ComponentID[components.Transform](p.sw))).Pos.X = 110
	require.NoError(t, p.check(within))
	require.NoError(t, p.check(Only(func(e ecs.Entity) bool { return e != far })))

	// A mirror of nothing, and a doubled one.
	extra := p.cw.NewEntity(ecs.ComponentID[components.NetID](p.cw))
	*(*components.NetID)(p.cw.Get(extra, ecs.ComponentID[components.NetID](p.cw))) = components.NetID{Handle: 77, Gen: 1}
	require.ErrorContains(t, p.check(within), "does not have")
	p.cw.RemoveEntity(extra)
	require.NoError(t, p.check(within))
	cn := ecs.ComponentID[components.NetID](p.cw)
	twin := p.cw.NewEntity(cn, tr, sec)
	*(*components.NetID)(p.cw.Get(twin, cn)) = p.ids[a]
	*(*components.Transform)(p.cw.Get(twin, tr)) = *(*components.Transform)(p.cw.Get(p.mirror[a], tr))
	*(*secret)(p.cw.Get(twin, sec)) = *(*secret)(p.cw.Get(p.mirror[a], sec))
	require.ErrorContains(t, p.check(within), "twice")
}

// A State captured from the server world, sent as JSON and rebuilt, judges
// the client as the server world does: the exact mirror passes, a
// difference fails, and a State of another registry is refused.
func TestStateRoundTrip(t *testing.T) {
	p := newPair(t)
	a := p.add(1, 0)
	p.add(-2.5, 1)
	p.add(3, 2)
	netID := func(e ecs.Entity) (components.NetID, bool) { id, ok := p.ids[e]; return id, ok }
	s, err := Capture(p.reg, p.sw, netID)
	require.NoError(t, err)
	require.Len(t, s.Entities, 3)
	b, err := json.Marshal(s)
	require.NoError(t, err)
	var got State
	require.NoError(t, json.Unmarshal(b, &got))
	require.Equal(t, s, got)
	w, ids, err := got.World(p.reg)
	require.NoError(t, err)
	check := func() error {
		return Converged(Check{Registry: p.reg, Server: w, NetID: ids, Client: p.cw, Me: 1})
	}
	require.NoError(t, check())
	tr := ecs.ComponentID[components.Transform](p.cw)
	(*components.Transform)(p.cw.Get(p.mirror[a], tr)).Pos.X += 0.1
	require.ErrorContains(t, check(), "Transform.Pos.X differs from the server's by 100 steps")

	_, err = Capture(p.reg, p.sw, func(ecs.Entity) (components.NetID, bool) { return components.NetID{}, false })
	require.ErrorContains(t, err, "has no net id")
	bad := State{Entities: []EntityState{{ID: s.Entities[0].ID, Set: s.Entities[0].Set, Lanes: s.Entities[0].Lanes[1:]}}}
	_, _, err = bad.World(p.reg)
	require.ErrorContains(t, err, "fewer than its components have")
	bad.Entities[0].Lanes = append(s.Entities[0].Lanes, 1)
	_, _, err = bad.World(p.reg)
	require.ErrorContains(t, err, "more than its components have")
	bad.Entities[0].Set = 1 << 9
	_, _, err = bad.World(p.reg)
	require.ErrorContains(t, err, "components the registry lacks")
}

// A predicted entity of the client runs ahead of the server: compared as
// it is it differs; compared at the server's tick (PredictedAt) or skipped
// (SkipPredicted) it passes, and the report says which. Values the server
// holds out of their fields' ranges are reported as clamped.
func TestConvergedPredictedAndClamped(t *testing.T) {
	p := newPair(t)
	p.add(1, 0)
	own := p.add(2, 1)
	sPred, cPred := ecs.ComponentID[components.Predicted](p.sw), ecs.ComponentID[components.Predicted](p.cw)
	p.sw.Add(own, sPred)
	p.cw.Add(p.mirror[own], cPred)
	tr := ecs.ComponentID[components.Transform](p.cw)
	ahead := (*components.Transform)(p.cw.Get(p.mirror[own], tr))
	atServer := *ahead // the prediction for the server's tick
	ahead.Pos.X += 0.5 // the prediction for the client's (later) tick
	check := func(c Check) (Report, error) {
		c.Registry, c.Server, c.Client, c.Me = p.reg, p.sw, p.cw, 1
		c.NetID = func(e ecs.Entity) (components.NetID, bool) { id, ok := p.ids[e]; return id, ok }
		return Compare(c)
	}
	_, err := check(Check{})
	require.ErrorContains(t, err, "Transform.Pos.X differs from the server's by 500 steps")
	r, err := check(Check{PredictedAt: func(m ecs.Entity) (any, bool) { return &atServer, m == p.mirror[own] }})
	require.NoError(t, err)
	require.Equal(t, Report{Compared: 2, Predicted: 1}, r)
	r, err = check(Check{SkipPredicted: true})
	require.NoError(t, err)
	require.Equal(t, 1, r.SkippedPredicted)
	require.Contains(t, r.String(), "2 mirrors compared (0 predicted at the server's tick), 1 predicted skipped")
	r, err = check(Check{PredictedAt: func(ecs.Entity) (any, bool) { return nil, false }})
	require.NoError(t, err)
	require.Equal(t, 1, r.SkippedPredicted, "no prediction for the server's tick: skipped, said in the report")

	// The server holds HP 300 in a 0..100 field: clients see 100.
	ssec := ecs.ComponentID[secret](p.sw)
	for e := range p.ids {
		(*secret)(p.sw.Get(e, ssec)).HP = 300
	}
	csec := ecs.ComponentID[secret](p.cw)
	for _, m := range p.mirror {
		(*secret)(p.cw.Get(m, csec)).HP = 100
	}
	r, err = check(Check{SkipPredicted: true})
	require.NoError(t, err, "the mirrors hold what the clamped value quantizes to")
	require.Len(t, r.ServerClamps, 1)
	require.Equal(t, "secret", r.ServerClamps[0].Type)
	require.Equal(t, "HP", r.ServerClamps[0].Field)
	require.Empty(t, r.ClientClamps)
	require.Contains(t, r.String(), "server values of secret.HP clamped")
}
