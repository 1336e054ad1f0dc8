package link

import (
	"strings"
	"testing"
	"time"

	"github.com/archenet/archenet/components"
	"github.com/archenet/archenet/replication/internal/baseline"
	"github.com/archenet/archenet/replication/internal/encode"
	"github.com/archenet/archenet/replication/internal/entity"
	"github.com/archenet/archenet/replication/internal/store"
	"github.com/archenet/archenet/replication/internal/wire"
	"github.com/archenet/archenet/replication/schema"
	"github.com/archenet/archenet/transport"
	"github.com/stretchr/testify/require"
)

// newLink returns a client link over a registry of transforms, past its
// Hello.
func newLink(t *testing.T, tweak func(*Config)) (*Link, *schema.Registry) {
	reg := schema.NewRegistry()
	schema.MustRegister[components.Transform](reg)
	cfg := Config{Registry: reg, MaxEntities: 1 << 10, Token: []byte("tok")}
	if tweak != nil {
		tweak(&cfg)
	}
	l := New(cfg, Counts{})
	h, err := transport.ParseHello(l.Start())
	require.NoError(t, err)
	require.Equal(t, transport.Hello{Version: wire.ProtocolVersion, ProtocolHash: reg.Hash(), Token: []byte("tok")}, h)
	require.Equal(t, Connecting, l.state)
	return l, reg
}

func welcomeMsg(id uint8, info wire.Welcome) []byte {
	return transport.Welcome{ClientID: id, Payload: info.Append(nil)}.Append(nil)
}

// TestLinkHandshakeOutcomes: what each answer to the Hello does to the
// client's link, without a transport.
func TestLinkHandshakeOutcomes(t *testing.T) {
	info := wire.Welcome{TickRate: 60, Depth: 16, Tick: 7, NetDivisor: 2}
	for _, tc := range []struct {
		name  string
		tweak func(*Config)
		msg   func(hash uint64) []byte
		event Event
		state State
		err   string // the returned error (a protocol violation)
		fail  string // the link's error (a refusal)
	}{
		{"welcome", nil, func(uint64) []byte { return welcomeMsg(3, info) }, EventWelcome, Joined, "", ""},
		{"rejected: full", nil, func(h uint64) []byte {
			return transport.Reject{Code: transport.CodeRejected, Version: wire.ProtocolVersion, ProtocolHash: h, Reason: "server full"}.Append(nil)
		},
			EventRejected, Closed, "", "rejected by server: server full"},
		{"rejected: other build", nil, func(h uint64) []byte {
			return transport.Reject{Code: transport.CodeHandshakeFailed, Version: wire.ProtocolVersion + 1, ProtocolHash: h, Reason: "x"}.Append(nil)
		},
			EventRejected, Closed, "", "protocol version mismatch"},
		{"a spawn batch before the welcome", nil, func(uint64) []byte { return []byte{wire.KindSpawns, 0, 0, 0, 0, 0} }, EventNone, Connecting, "before the welcome", ""},
		{"a welcome with a bad payload", nil, func(uint64) []byte { return transport.Welcome{ClientID: 1, Payload: []byte{9}}.Append(nil) }, EventNone, Connecting, "welcome payload", ""},
		{"a welcome with zero depth", nil, func(uint64) []byte { return welcomeMsg(1, wire.Welcome{TickRate: 30, Depth: 0, NetDivisor: 1}) }, EventNone, Connecting, "depth", ""},
		{"compression with another dictionary", func(c *Config) { c.CompressionDictionary = []byte("mine") },
			func(uint64) []byte {
				return welcomeMsg(1, wire.Welcome{TickRate: 30, Depth: 8, NetDivisor: 1, Compression: true, Dictionary: 0x99})
			},
			EventNone, Connecting, "compression dictionary mismatch", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l, reg := newLink(t, tc.tweak)
			ev, err := l.OnMessage(tc.msg(reg.Hash()))
			if tc.err != "" {
				require.ErrorContains(t, err, tc.err)
			} else {
				require.NoError(t, err)
			}
			require.Equal(t, tc.event, ev)
			require.Equal(t, tc.state, l.state)
			if tc.fail != "" {
				require.ErrorContains(t, l.err, tc.fail)
				require.Equal(t, 1, strings.Count(l.err.Error(), "rejected by server")+strings.Count(l.err.Error(), "mismatch"), l.err.Error())
			}
			if ev == EventWelcome {
				require.Equal(t, uint8(3), l.id)
				require.Equal(t, info, l.info)
				require.Equal(t, time.Second/60, l.arrivals.Interval())
			}
		})
	}
}

// TestLinkSpawnsAndReady: a spawn batch is validated whole before the
// client sees any of it; ready comes once, after the welcome.
func TestLinkSpawnsAndReady(t *testing.T) {
	l, _ := newLink(t, nil)
	_, err := l.OnMessage(welcomeMsg(1, wire.Welcome{TickRate: 30, Depth: 8, NetDivisor: 1}))
	require.NoError(t, err)
	var sw wire.SpawnWriter
	lanes := make([]uint64, l.plans[0].NumLanes())
	sw.Add(l.plans, wire.SpawnEntry{Slot: 4, Meta: entity.Meta{Gen: 2, Set: 1}, Lanes: lanes}, false)
	sw.Add(l.plans, wire.SpawnEntry{Despawn: true, Slot: 9, Meta: entity.Meta{Gen: 1}}, false)
	batch := sw.Bytes(5, nil)
	ev, err := l.OnMessage(batch)
	require.NoError(t, err)
	require.Equal(t, EventSpawns, ev)
	var got []wire.SpawnEntry
	require.NoError(t, l.Spawns(batch, func(tick uint32, e wire.SpawnEntry) {
		require.Equal(t, uint32(5), tick)
		e.Lanes = nil
		got = append(got, e)
	}))
	require.Equal(t, []wire.SpawnEntry{{Slot: 4, Meta: entity.Meta{Gen: 2, Set: 1}}, {Despawn: true, Slot: 9, Meta: entity.Meta{Gen: 1}}}, got)
	// A batch cut short is refused whole.
	_, err = l.OnMessage(batch[:len(batch)-3])
	require.ErrorIs(t, err, wire.ErrMalformed)

	ev, err = l.OnMessage(wire.AppendReady(nil, 5))
	require.NoError(t, err)
	require.Equal(t, EventReady, ev)
	require.Equal(t, Ready, l.state)
	ev, err = l.OnMessage(wire.AppendReady(nil, 6))
	require.NoError(t, err)
	require.Equal(t, EventNone, ev, "ready once")
	for _, m := range [][]byte{{}, {0x7f}, {wire.KindReady, 1}} {
		_, err = l.OnMessage(m)
		require.ErrorIs(t, err, wire.ErrMalformed, "%x", m)
	}

	// A drain notice: its deadline is on the client's clock, from when it
	// was heard; every prefix and a reason that is not UTF-8 are refused.
	at := time.Unix(500, 0)
	l.Hear(at)
	drain := wire.AppendDrain(nil, wire.Drain{Left: 30 * time.Second, Reason: "maintenance"})
	ev, err = l.OnMessage(drain)
	require.NoError(t, err)
	require.Equal(t, EventDrain, ev)
	require.Equal(t, Drain{Reason: "maintenance", Left: 30 * time.Second, Deadline: at.Add(30 * time.Second)}, l.drain)
	for i := range len(drain) {
		_, err = l.OnMessage(drain[:i])
		require.ErrorIs(t, err, wire.ErrMalformed, "prefix %d", i)
	}
	_, err = l.OnMessage(append(wire.AppendDrain(nil, wire.Drain{Left: time.Second, Reason: ""}), 0))
	require.ErrorIs(t, err, wire.ErrMalformed, "trailing byte")
	bad := wire.AppendDrain(nil, wire.Drain{Left: time.Second, Reason: "ab"})
	bad[len(bad)-1] = 0xff
	_, err = l.OnMessage(bad)
	require.ErrorIs(t, err, wire.ErrMalformed, "not UTF-8")
}

// TestLinkDatagramsAndAcks: snapshot datagrams decode into views, the
// ticks that gained datagrams come out oldest first, the first datagram of
// a tick feeds the arrival estimator, junk is counted and dropped, and the
// datagram to send carries the ack of what was decoded.
func TestLinkDatagramsAndAcks(t *testing.T) {
	l, reg := newLink(t, nil)
	appendInput := func(dst []byte) []byte { return append(dst, 0xAB) }
	_, err := l.OnMessage(welcomeMsg(1, wire.Welcome{TickRate: 30, Depth: 8, NetDivisor: 1}))
	require.NoError(t, err)
	w := store.New(reg, 8)
	enc := encode.NewGroup(w).NewEncoder()
	sc := baseline.NewTracker(1, 8)
	var pkts [3]encode.Packets
	for tick := uint32(1); tick <= 3; tick++ {
		w.Begin(tick)
		w.PutLanes(0, entity.Meta{Set: 1}, []uint64{uint64(tick), 0, 0, 0, 0, 0, 0})
		w.Commit()
		enc.Build(sc, encode.BuildOptions{Budget: 1200}, &pkts[tick-1])
		w.EndTick()
	}
	now := time.Unix(100, 0)
	// Ticks 3 and 1 arrive (2 is lost), then a duplicate and junk.
	S, first, _ := l.OnDatagram(pkts[2].At(0), now)
	require.Equal(t, uint32(3), S)
	require.True(t, first)
	S, first, _ = l.OnDatagram(pkts[0].At(0), now.Add(time.Millisecond))
	require.Equal(t, uint32(1), S)
	require.True(t, first)
	_, first, _ = l.OnDatagram(pkts[0].At(0), now)
	require.False(t, first)
	l.OnDatagram([]byte{0x01, 0xff, 0xff}, now)
	require.Equal(t, uint64(2), *l.count.Datagrams)
	require.Equal(t, uint64(2), *l.count.DatagramsDropped)
	require.Equal(t, []uint32{1, 3}, l.Fresh())
	require.Empty(t, l.Fresh(), "each tick once")
	require.True(t, l.arrivals.Observed())
	require.Equal(t, []uint64{3, 0, 0, 0, 0, 0, 0}, l.rcv.View(3).EntityLanes(0))

	d := l.Datagram(appendInput)
	ack, input, err := wire.ParseClientHeader(d)
	require.NoError(t, err)
	require.Equal(t, []byte{0xAB}, input)
	require.Equal(t, uint32(3), ack.Newest)
	require.Equal(t, uint32(0b10), ack.Mask, "tick 1 held, tick 2 missing")
}
