package schema

import (
	"testing"
	"unsafe"

	arche "github.com/mlange-42/arche/ecs"

	"github.com/archenet/archenet/components"
	"github.com/archenet/archenet/replication/bitio"
	"github.com/stretchr/testify/require"
)

type kill struct {
	Killer, Victim components.Ref
	Weapon         uint8 `net:"range=0:15"`
}

type carried struct {
	Holder components.Ref
}

// Message types have ids of their own and join the protocol hash only when
// registered: a registry without them hashes as before.
func TestRegisterMessage(t *testing.T) {
	reg := NewRegistry()
	MustRegister[components.Transform](reg)
	before := reg.Hash()
	p, err := RegisterMessage[kill](reg)
	require.NoError(t, err)
	require.True(t, p.IsMessage())
	require.Equal(t, uint8(0), p.ID)
	require.Equal(t, p, MessageOf[kill](reg))
	require.Nil(t, MessageOf[carried](reg))
	require.Len(t, reg.Plans(), 1, "messages are not components")
	require.NotEqual(t, before, reg.Hash())
	require.Equal(t, []RefField{{Offset: 0, Lane: 0}, {Offset: unsafe.Offsetof(kill{}.Victim), Lane: 1}}, p.Refs())

	_, err = RegisterMessage[kill](reg)
	require.ErrorContains(t, err, "registered twice")
	_, err = RegisterMessage[carried](reg, WithName("kill"))
	require.ErrorContains(t, err, `name "kill" already used`)
	type ownerMsg struct {
		A int8 `net:"owner"`
	}
	_, err = RegisterMessage[ownerMsg](reg)
	require.ErrorContains(t, err, "owner-only fields have no meaning in a message")
	type taggedRef struct {
		R components.Ref `net:"bits=8"`
	}
	_, err = RegisterMessage[taggedRef](reg)
	require.ErrorContains(t, err, "a reference takes no precision tag")

	cp, err := Register[carried](reg)
	require.NoError(t, err, "a component holds references too")
	require.False(t, cp.IsMessage())
	require.Equal(t, []RefField{{Offset: 0, Lane: 0}}, cp.Refs())
	require.Equal(t, []LaneKind{LaneUvarint, LaneUvarint, LaneUvarint}, []LaneKind{cp.Lanes()[0].Kind, cp.Lanes()[1].Kind, cp.Lanes()[2].Kind},
		"index + 1, owner, generation: delta coding keeps an unchanged one at no cost")
	reg = NewRegistry() // (without the component, for what follows)
	MustRegister[components.Transform](reg)
	MustRegisterMessage[kill](reg)

	// The same messages registered alike hash alike; another order does not.
	other := NewRegistry()
	MustRegister[components.Transform](other)
	MustRegisterMessage[kill](other)
	require.Equal(t, reg.Hash(), other.Hash())
	swapped := NewRegistry()
	MustRegister[components.Transform](swapped)
	MustRegisterMessage[carried](swapped)
	MustRegisterMessage[kill](swapped)
	MustRegisterMessage[carried](reg)
	require.NotEqual(t, reg.Hash(), swapped.Hash())
}

// A component's reference round-trips its NetID; its Entity is zeroed
// when the reference changes and kept when it does not.
func TestComponentRef(t *testing.T) {
	reg := NewRegistry()
	p := MustRegister[carried](reg)
	lanes := make([]uint64, p.NumLanes())
	v := carried{Holder: components.Ref{ID: components.NetID{Handle: components.MakeHandle(7, 300), Gen: 9}, Set: true}}
	QuantizeValue(p, &v, lanes)
	require.Equal(t, []uint64{301, 7, 9}, lanes)
	var w bitio.Writer
	p.Write(&w, lanes, true)
	require.Equal(t, 16+8+8, w.BitLen(), "uvarints: index + 1 (301), owner, generation")
	var m carried
	DequantizeValue(p, lanes, &m)
	require.Equal(t, v.Holder.ID, m.Holder.ID)
	require.True(t, m.Holder.Set)
	m.Holder.Entity = *(*arche.Entity)(unsafe.Pointer(&[2]uint32{5, 1})) // (resolved by the receiver)
	DequantizeValue(p, lanes, &m)
	require.False(t, m.Holder.Entity.IsZero(), "the same reference keeps its entity")
	QuantizeValue(p, &carried{}, lanes)
	require.Equal(t, []uint64{0, 0, 0}, lanes)
	DequantizeValue(p, lanes, &m)
	require.Equal(t, components.Ref{}, m.Holder, "none")
}

// A reference round-trips its NetID (the entity is the receiver's to
// resolve), and decoding refuses out-of-range parts.
func TestRefLane(t *testing.T) {
	reg := NewRegistry()
	p := MustRegisterMessage[kill](reg)
	v := kill{Killer: components.Ref{ID: components.NetID{Handle: components.MakeHandle(254, 1<<24-1), Gen: 1<<32 - 1}, Set: true}, Weapon: 3}
	lanes := make([]uint64, p.NumLanes())
	QuantizeValue(p, &v, lanes)
	require.Equal(t, RefNone, lanes[1])
	var w bitio.Writer
	p.Write(&w, lanes, true)
	got := make([]uint64, p.NumLanes())
	require.NoError(t, p.Read(bitio.NewReader(w.Bytes()), got, true))
	var back kill
	back.Victim.Set = true // overwritten
	DequantizeValue(p, got, &back)
	require.Equal(t, v, back)

	for _, bad := range []struct {
		name string
		bits func(w *bitio.Writer)
	}{
		{"index beyond 24 bits", func(w *bitio.Writer) { w.WriteExpGolomb(1<<24+1, 0); w.WriteBits(0, 1); w.WriteExpGolomb(0, 0) }},
		{"owner 0 written long", func(w *bitio.Writer) { w.WriteExpGolomb(1, 0); w.WriteBits(1, 9); w.WriteExpGolomb(0, 0) }},
		{"generation beyond 32 bits", func(w *bitio.Writer) { w.WriteExpGolomb(1, 0); w.WriteBits(0, 1); w.WriteExpGolomb(1<<32, 0) }},
	} {
		var w bitio.Writer
		bad.bits(&w)
		r := bitio.NewReader(w.Bytes())
		ReadLane(r, &p.Lanes()[0])
		require.ErrorIs(t, r.Err(), ErrCorrupt, bad.name)
	}
}

type childOf struct {
	arche.Relation
}

type attachedTo struct {
	arche.Relation
	Slot uint8 `net:"range=0:3"`
}

// A relation component compiles with or without fields of its own; its
// target is not among its lanes.
func TestRelationComponent(t *testing.T) {
	reg := NewRegistry()
	p, err := Register[childOf](reg)
	require.NoError(t, err)
	require.True(t, p.IsRelation())
	require.Zero(t, p.NumLanes())
	a, err := Register[attachedTo](reg)
	require.NoError(t, err)
	require.True(t, a.IsRelation())
	require.Equal(t, 1, a.NumLanes())
	type late struct {
		X int8 `net:"range=0:3"`
		arche.Relation
	}
	_, err = Register[late](reg)
	require.ErrorContains(t, err, "only as its first, embedded field")
	type relMsg struct {
		arche.Relation
	}
	_, err = RegisterMessage[relMsg](reg)
	require.ErrorContains(t, err, "a message cannot be a relation component")
}
