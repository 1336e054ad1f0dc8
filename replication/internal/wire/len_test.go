package wire

import (
	"strings"
	"testing"
	"time"

	"github.com/archenet/archenet/components"
	"github.com/archenet/archenet/replication/internal/entity"
	"github.com/archenet/archenet/replication/schema"
	"github.com/stretchr/testify/require"
)

// Every message's Len is the length its append writes, and every message
// parses back from its own bytes (exact bytes where the layout is fixed).
func TestMessageLengths(t *testing.T) {
	w := Welcome{TickRate: 30, Depth: 32, Tick: 0x01020304, NetDivisor: 2, Compression: true, Dictionary: 9}
	b := w.Append(nil)
	require.Len(t, b, w.Len())
	require.Equal(t, []byte{4, 30, 0, 32, 4, 3, 2, 1, 2, 0, 1, 9, 0, 0, 0, 0, 0, 0, 0}, b)
	got, err := ParseWelcome(b)
	require.NoError(t, err)
	require.Equal(t, w, got)

	for _, w := range []Welcome{
		{TickRate: 30, Depth: 32, NetDivisor: 1, Resumable: true, Secret: [SecretLen]byte{1, 2, 3}, Match: "duel-7"},
		{TickRate: 30, Depth: 32, NetDivisor: 1, Resumable: true, Resumed: true, ClientTaken: 0x01020304},
		{TickRate: 30, Depth: 32, NetDivisor: 1, Resumable: true, Resumed: true, Reset: true, Match: "m"},
	} {
		b := w.Append(nil)
		require.Len(t, b, w.Len())
		got, err := ParseWelcome(b)
		require.NoError(t, err)
		require.Equal(t, w, got)
		_, err = ParseWelcome(append(b, 0))
		require.Error(t, err, "trailing byte")
		_, err = ParseWelcome(b[:len(b)-1])
		require.Error(t, err, "truncated")
	}
	for _, bad := range []Welcome{{TickRate: 30, Depth: 32, NetDivisor: 1, Resumed: true}, {TickRate: 30, Depth: 32, NetDivisor: 1, Resumable: true, Reset: true}} {
		_, err := ParseWelcome(bad.Append(nil))
		require.Error(t, err, "%+v", bad)
	}

	tk := Ticket{Client: 7, Secret: [SecretLen]byte{9, 8, 7}, Taken: 0x0A0B0C0D}
	b = tk.Append(nil)
	require.Len(t, b, TicketLen)
	back, err := ParseTicket(b)
	require.NoError(t, err)
	require.Equal(t, tk, back)
	for _, bad := range [][]byte{b[:TicketLen-1], append(b, 0), (&Ticket{Client: 0}).Append(nil), (&Ticket{Client: 3, Fresh: true, Taken: 1}).Append(nil)} {
		_, err := ParseTicket(bad)
		require.Error(t, err, "%x", bad)
	}

	for _, a := range []Ack{{}, {Newest: 9, Mask: 3}, {Newest: 9, Mask: 1, Partial: 0b10, PartCount: [AckWindow]uint8{0, 5}, Parts: [AckWindow]uint64{0, 0b10011}}} {
		b := AppendClientHeader(nil, &a)
		require.Len(t, b, ClientHeaderLen(&a), "%+v", a)
		back, rest, err := ParseClientHeader(append(b, 0xEE))
		require.NoError(t, err)
		require.Equal(t, []byte{0xEE}, rest)
		require.Equal(t, a.Newest, back.Newest)
		var again Ack
		rest, taken, has, err := ParseClientHeaderTaken(&again, append(AppendClientHeaderTaken(nil, &a, 0x05060708), 0xEE))
		require.NoError(t, err)
		require.True(t, has)
		require.Equal(t, uint32(0x05060708), taken)
		require.Equal(t, []byte{0xEE}, rest)
		require.Equal(t, a.Newest, again.Newest)
	}

	b = AppendReady(nil, 0x0A0B0C0D)
	require.Equal(t, []byte{KindReady, 0x0D, 0x0C, 0x0B, 0x0A}, b)
	require.Len(t, b, ReadyLen)
	tick, err := ParseReady(b)
	require.NoError(t, err)
	require.Equal(t, uint32(0x0A0B0C0D), tick)
	_, err = ParseReady(b[:4])
	require.ErrorIs(t, err, ErrMalformed)

	for _, n := range []int{1, 127, 128, MaxEndedKeys} {
		keys := make([]uint32, n)
		require.Len(t, AppendSpawnsEnded(nil, keys), SpawnsEndedLen(n))
	}

	for _, d := range []Drain{{}, {Left: 3 * time.Second, Reason: "maintenance"}, {Left: time.Microsecond, Reason: strings.Repeat("x", 500)},
		{Reason: "moving", Address: "10.0.0.7:7777"}, {Address: strings.Repeat("a", MaxAddressLen)}} {
		b := AppendDrain(nil, d)
		require.Len(t, b, DrainLen(d))
		back, err := ParseDrain(b)
		require.NoError(t, err)
		require.Equal(t, d.Address, back.Address)
		if d.Address != "" {
			_, err := ParseDrain(b[:len(b)-1])
			require.Error(t, err, "a cut address")
		}
		if d.Left > 0 {
			require.GreaterOrEqual(t, back.Left, time.Millisecond)
		}
	}

	reg := schema.NewRegistry()
	schema.MustRegister[components.Transform](reg)
	cs := ComponentHashes(reg)
	require.Len(t, AppendComponents(nil, cs), ComponentsLen(cs))
	require.Zero(t, ComponentsLen(nil))

	var sw SpawnWriter
	require.Zero(t, sw.Len())
	require.Nil(t, sw.Bytes(1, nil))
	lanes := make([]uint64, reg.Plans()[0].NumLanes())
	for i := range 40 {
		sw.Add(reg.Plans(), SpawnEntry{Slot: uint32(i), Meta: entity.Meta{Gen: uint32(i), Set: 1}, Lanes: lanes}, i%2 == 0)
		require.Len(t, sw.Bytes(7, nil), sw.Len(), "%d entries", i+1)
	}
}
