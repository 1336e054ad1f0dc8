package replication

import (
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/archenet/archenet/components"
	"github.com/archenet/archenet/replication/internal/wire"
	"github.com/archenet/archenet/replication/schema"
	"github.com/archenet/archenet/transport/sim"
	arche "github.com/mlange-42/arche/ecs"
	"github.com/stretchr/testify/require"
)

// checkpointOf returns a checkpoint of a server with entities (owned and
// not, one removed: a free slot) and a seat, with its registry.
func checkpointOf(t testing.TB) ([]byte, *schema.Registry) {
	reg := schema.NewRegistry()
	schema.MustRegister[components.Transform](reg)
	schema.MustRegister[components.Velocity](reg)
	net := sim.NewNetwork(1, time.Unix(0, 0))
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	w := arche.NewWorld()
	s, err := NewServer(&w, net.Listen("a"), ServerConfig{Registry: reg, Now: net.Now, Logger: quiet, Match: "duel"})
	require.NoError(t, err)
	idR, idT, idV, idO := arche.ComponentID[components.Replicated](&w), arche.ComponentID[components.Transform](&w), arche.ComponentID[components.Velocity](&w), arche.ComponentID[components.Owner](&w)
	var es []arche.Entity
	for i := range 5 {
		e := w.NewEntity(idR, idT)
		(*components.Transform)(w.Get(e, idT)).Pos.X = float64(i) + 0.123456789
		es = append(es, e)
	}
	mine := w.NewEntity(idR, idT, idV, idO)
	(*components.Owner)(w.Get(mine, idO)).Client = 1
	(*components.Velocity)(w.Get(mine, idV)).Linear.Z = -2.5
	conn, _ := net.Dial("a", sim.Link{})
	cw := arche.NewWorld()
	c, err := NewClient(&cw, conn, ClientConfig{Registry: reg, Now: net.Now, Logger: quiet})
	require.NoError(t, err)
	for range 3 {
		s.Receive()
		s.Send()
		net.Advance(time.Second / 30)
		c.Receive()
		c.Send()
	}
	w.RemoveEntity(es[2])
	s.Receive()
	s.Send()
	cp, err := s.Checkpoint(nil, []byte("game"))
	require.NoError(t, err)
	return cp, reg
}

// A checkpoint restores every entity at full precision under its NetID,
// the free slot's next incarnation gets the next generation, and the seat
// waits suspended.
func TestCheckpointRoundTrip(t *testing.T) {
	cp, reg := checkpointOf(t)
	cp2 := make([]byte, len(cp))
	copy(cp2, cp)
	w := arche.NewWorld()
	net := sim.NewNetwork(1, time.Unix(0, 0))
	s, game, err := Restore(&w, net.Listen("b"), ServerConfig{Registry: reg, Now: net.Now, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, cp)
	require.NoError(t, err)
	require.Equal(t, "game", string(game))
	require.Equal(t, "duel", s.cfg.Match)
	require.Equal(t, []ClientID{1}, s.Suspended())
	idT, idV := arche.ComponentID[components.Transform](&w), arche.ComponentID[components.Velocity](&w)
	for slot, x := range []float64{0.123456789, 1.123456789, -1, 3.123456789, 4.123456789} {
		e, ok := s.Resolve(components.NetID{Handle: components.MakeHandle(0, uint32(slot))})
		if x < 0 {
			require.False(t, ok, "the removed entity's slot is free")
			continue
		}
		require.True(t, ok)
		require.Equal(t, x, (*components.Transform)(w.Get(e, idT)).Pos.X)
	}
	mine, ok := s.Resolve(components.NetID{Handle: components.MakeHandle(1, 5)})
	require.True(t, ok)
	require.Equal(t, -2.5, (*components.Velocity)(w.Get(mine, idV)).Linear.Z)
	e := w.NewEntity(arche.ComponentID[components.Replicated](&w), idT)
	s.Receive()
	s.Send()
	id, _ := s.NetID(e)
	require.Equal(t, components.NetID{Handle: components.MakeHandle(0, 2), Gen: 1}, id, "the free slot, a new generation")

	other := schema.NewRegistry()
	schema.MustRegister[components.Transform](other)
	ow := arche.NewWorld()
	_, _, err = Restore(&ow, nil, ServerConfig{Registry: other}, cp2)
	require.ErrorIs(t, err, ErrCheckpoint, "another registry")
	for _, cut := range []int{0, 4, 20, len(cp2) / 2, len(cp2) - 1} {
		_, err := parseCheckpoint(cp2[:cut], reg.Plans())
		require.ErrorIs(t, err, ErrCheckpoint, "cut at %d", cut)
	}
}

// FuzzCheckpoint: a checkpoint that does not decode is an error, never a
// panic, and nothing is allocated for a count the bytes cannot hold.
func FuzzCheckpoint(f *testing.F) {
	cp, reg := checkpointOf(f)
	f.Add(cp)
	f.Add(cp[:len(cp)/2])
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := parseCheckpoint(b, reg.Plans())
		if err != nil {
			return
		}
		if len(c.slots) > len(b) || len(c.free) > len(c.slots) {
			t.Fatalf("%d slots, %d free from %d bytes", len(c.slots), len(c.free), len(b))
		}
	})
}

// A seat's log keeps what was sent and not taken, lets go of the oldest
// beyond its bound (a client that had not taken them cannot continue from
// it), and of a large batch's memory once it is taken.
func TestSeatLog(t *testing.T) {
	l := seatLog{max: 100}
	l.reset()
	for i := range 5 {
		l.add([]byte{byte(i), byte(i), byte(i), byte(i), byte(i), byte(i), byte(i), byte(i), byte(i), byte(i)}) // 10 bytes each
	}
	require.True(t, l.holds(0))
	require.NoError(t, l.take(2))
	require.False(t, l.holds(1), "taken already")
	require.True(t, l.holds(2))
	var got []byte
	require.NoError(t, l.each(3, func(m []byte) error { got = append(got, m[0]); return nil }))
	require.Equal(t, []byte{3, 4}, got)
	require.Error(t, l.take(6), "more than were sent")
	l.add(make([]byte, 95)) // (over the bound: the oldest go)
	require.False(t, l.holds(2), "messages 3..5 were let go of")
	require.True(t, l.holds(5))
	require.Equal(t, uint32(6), l.sent)
	l.add(make([]byte, 101)) // (beyond the bound alone: nothing is kept)
	require.False(t, l.holds(6))
	require.True(t, l.holds(7))

	big := seatLog{}
	big.reset()
	big.add(make([]byte, 200<<10))
	require.NoError(t, big.take(1))
	require.Zero(t, big.memoryBytes(), "a large batch's memory goes once taken")
}

// A client datagram that says it took more reliable messages than were sent
// drops the client with a reason that says so.
func TestTakenBeyondSent(t *testing.T) {
	reg := schema.NewRegistry()
	schema.MustRegister[components.Transform](reg)
	net := sim.NewNetwork(1, time.Unix(0, 0))
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	w := arche.NewWorld()
	var why error
	s, err := NewServer(&w, net.Listen("a"), ServerConfig{Registry: reg, Now: net.Now, Logger: quiet,
		OnDisconnect: func(_ ClientID, err error) { why = err }})
	require.NoError(t, err)
	conn, _ := net.Dial("a", sim.Link{})
	cw := arche.NewWorld()
	c, err := NewClient(&cw, conn, ClientConfig{Registry: reg, Now: net.Now, Logger: quiet})
	require.NoError(t, err)
	step := func() {
		s.Receive()
		s.Send()
		net.Advance(time.Second / 30)
		c.Receive()
		c.Send()
	}
	for range 5 {
		step()
	}
	require.Len(t, s.Clients(), 1)
	var a wire.Ack
	require.NoError(t, conn.SendDatagram(wire.AppendClientHeaderTaken(nil, &a, 1<<20)))
	step()
	step()
	require.Empty(t, s.Clients())
	require.Empty(t, s.Suspended(), "a protocol violation is no lost connection")
	require.ErrorContains(t, why, "the client says it took 1048576 reliable messages")
}

// A checkpoint is taken right after Send: a structural change since is
// refused (the net handle table would not hold it).
func TestCheckpointAfterSendOnly(t *testing.T) {
	reg := schema.NewRegistry()
	schema.MustRegister[components.Transform](reg)
	net := sim.NewNetwork(1, time.Unix(0, 0))
	w := arche.NewWorld()
	s, err := NewServer(&w, net.Listen("a"), ServerConfig{Registry: reg, Now: net.Now, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	require.NoError(t, err)
	s.Receive()
	s.Send()
	_, err = s.Checkpoint(nil, nil)
	require.NoError(t, err)
	w.NewEntity(arche.ComponentID[components.Replicated](&w), arche.ComponentID[components.Transform](&w))
	_, err = s.Checkpoint(nil, nil)
	require.ErrorIs(t, err, ErrCheckpoint)
	require.ErrorContains(t, err, "right after Send")
	s.Receive()
	s.Send()
	cp, err := s.Checkpoint(nil, nil)
	require.NoError(t, err)
	require.NotEmpty(t, cp)
}
