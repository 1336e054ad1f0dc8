package replicationtest

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/archenet/archenet/components"
	"github.com/archenet/archenet/replication/schema"
	"github.com/mlange-42/arche/ecs"
)

// ClientCapture is a client's mirrors as a live check needs them ([CaptureClient]),
// to be checked by [History.CheckCapture] where the server's history is: in a
// test or program beside the server while the client runs in a page, say.
type ClientCapture struct {
	Me      uint8 // the client's id
	Mirrors []CapturedMirror
}

// CapturedMirror is one mirror: its net id, the tick of the state it shows,
// whether it is predicted, its component set and its quantized values
// (Quantized, as its client sees them).
type CapturedMirror struct {
	ID        components.NetID
	Tick      uint32
	Predicted bool
	Set       uint64
	Lanes     []uint64
}

// CaptureClient captures the mirrors of client world w (client id me) that
// have a state tick (stateTick: replication.Client.StateTick; provisional
// entities have none). Allocates.
func CaptureClient(reg *schema.Registry, w *ecs.World, me uint8, stateTick func(components.NetID) (uint32, bool)) ClientCapture {
	c := ClientCapture{Me: me}
	idNet := ecs.ComponentID[components.NetID](w)
	idPred := ecs.ComponentID[components.Predicted](w)
	q := w.Query(ecs.All(idNet))
	for q.Next() {
		m := q.Entity()
		id := *(*components.NetID)(q.Get(idNet))
		tick, ok := stateTick(id)
		if !ok {
			continue
		}
		set, lanes := Quantized(reg, w, m, true, false)
		c.Mirrors = append(c.Mirrors, CapturedMirror{ID: id, Tick: tick, Predicted: w.Has(m, idPred), Set: set, Lanes: lanes})
	}
	return c
}

// Bounds of [ClientCapture.UnmarshalBinary].
const (
	maxCapturedMirrors = 1 << 20
	maxCapturedLanes   = 1 << 12
)

// AppendBinary appends c's encoding (uvarints: me, the mirror count, then
// each mirror's handle, generation, tick, predicted, set, lane count and
// lanes) to b.
func (c ClientCapture) AppendBinary(b []byte) ([]byte, error) {
	b = binary.AppendUvarint(b, uint64(c.Me))
	b = binary.AppendUvarint(b, uint64(len(c.Mirrors)))
	for _, m := range c.Mirrors {
		pred := uint64(0)
		if m.Predicted {
			pred = 1
		}
		for _, v := range []uint64{uint64(m.ID.Handle), uint64(m.ID.Gen), uint64(m.Tick), pred, m.Set, uint64(len(m.Lanes))} {
			b = binary.AppendUvarint(b, v)
		}
		for _, v := range m.Lanes {
			b = binary.AppendUvarint(b, v)
		}
	}
	return b, nil
}

// UnmarshalBinary decodes what AppendBinary encoded, refusing counts past its
// bounds, values that do not fit, truncation and trailing bytes.
func (c *ClientCapture) UnmarshalBinary(b []byte) error {
	next := func(limit uint64, what string) (uint64, error) {
		v, n := binary.Uvarint(b)
		if n <= 0 {
			return 0, fmt.Errorf("replicationtest: capture truncated at %s", what)
		}
		if v > limit {
			return 0, fmt.Errorf("replicationtest: capture's %s %d is over %d", what, v, limit)
		}
		b = b[n:]
		return v, nil
	}
	me, err := next(255, "client id")
	if err != nil {
		return err
	}
	n, err := next(maxCapturedMirrors, "mirror count")
	if err != nil {
		return err
	}
	out := ClientCapture{Me: uint8(me)}
	for range n {
		var v [6]uint64
		limits := [6]uint64{1<<32 - 1, 1<<32 - 1, 1<<32 - 1, 1, 1<<64 - 1, maxCapturedLanes}
		names := [6]string{"handle", "generation", "tick", "predicted", "set", "lane count"}
		for i := range v {
			if v[i], err = next(limits[i], names[i]); err != nil {
				return err
			}
		}
		m := CapturedMirror{ID: components.NetID{Handle: uint32(v[0]), Gen: uint32(v[1])}, Tick: uint32(v[2]), Predicted: v[3] == 1, Set: v[4]}
		for range v[5] {
			lane, err := next(1<<64-1, "lane")
			if err != nil {
				return err
			}
			m.Lanes = append(m.Lanes, lane)
		}
		out.Mirrors = append(out.Mirrors, m)
	}
	if len(b) != 0 {
		return errors.New("replicationtest: trailing bytes after the capture")
	}
	*c = out
	return nil
}
