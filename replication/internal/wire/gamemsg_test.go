package wire

import (
	"errors"
	"slices"
	"testing"

	"github.com/archenet/archenet/components"
	"github.com/archenet/archenet/replication/bitio"
	"github.com/archenet/archenet/replication/schema"
	"github.com/stretchr/testify/require"
)

type msgHit struct {
	Target components.Ref
	Damage int16 `net:"range=0:1000"`
}

type msgChat struct {
	Line [8]uint8
}

type msgPing struct{}

func msgRegistry() *schema.Registry {
	reg := fuzzRegistry()
	schema.MustRegisterMessage[msgHit](reg)
	schema.MustRegisterMessage[msgChat](reg)
	schema.MustRegisterMessage[msgPing](reg)
	return reg
}

// batchOf encodes values (each of a registered message type) as a batch.
func batchOf(t testing.TB, reg *schema.Registry, kind byte, tick uint32, values ...any) []byte {
	var mw MessageWriter
	var w bitio.Writer
	lanes := make([]uint64, 64)
	for _, v := range values {
		var p *schema.Plan
		switch v := v.(type) {
		case *msgHit:
			p = schema.MessageOf[msgHit](reg)
			schema.QuantizeValue(p, v, lanes)
		case *msgChat:
			p = schema.MessageOf[msgChat](reg)
			schema.QuantizeValue(p, v, lanes)
		case *msgPing:
			p = schema.MessageOf[msgPing](reg)
		default:
			t.Fatalf("no message type %T", v)
		}
		w.Reset(nil)
		MessageBody(&w, p, IDBits(len(reg.Messages())), lanes)
		n := w.BitLen()
		mw.Add(w.Bytes(), n)
	}
	return mw.Append(nil, kind, tick)
}

func TestMessageBatchRoundTrip(t *testing.T) {
	reg := msgRegistry()
	hit := msgHit{Target: components.Ref{ID: components.NetID{Handle: components.MakeHandle(3, 1000), Gen: 5}, Set: true}, Damage: 250}
	chat := msgChat{Line: [8]uint8{'h', 'i'}}
	b := batchOf(t, reg, KindMessages, 123456, &hit, &chat, &msgPing{}, &msgHit{Damage: 1})
	var got []any
	tick, n, err := ParseMessages(b, KindMessages, reg.Messages(), nil, func(tick uint32, p *schema.Plan, lanes []uint64) error {
		switch p.Name {
		case "msgHit":
			var v msgHit
			schema.DequantizeValue(p, lanes, &v)
			got = append(got, v)
		case "msgChat":
			var v msgChat
			schema.DequantizeValue(p, lanes, &v)
			got = append(got, v)
		default:
			got = append(got, msgPing{})
		}
		return nil
	})
	require.NoError(t, err)
	require.Equal(t, uint32(123456), tick)
	require.Equal(t, 4, n)
	require.Equal(t, []any{hit, chat, msgPing{}, msgHit{Damage: 1}}, got, "a reference keeps its NetID; none reads as none")

	_, _, err = ParseMessages(b, KindClientMessages, reg.Messages(), nil, nil)
	require.ErrorIs(t, err, ErrMalformed, "the other direction's kind")
	_, _, err = ParseMessages(append(b, 0), KindMessages, reg.Messages(), nil, nil)
	require.ErrorIs(t, err, ErrMalformed, "a byte after the batch")
	_, _, err = ParseMessages(b[:len(b)-1], KindMessages, reg.Messages(), nil, nil)
	require.ErrorIs(t, err, ErrMalformed, "truncated")
	stop := errors.New("stop")
	_, _, err = ParseMessages(b, KindMessages, reg.Messages(), nil, func(uint32, *schema.Plan, []uint64) error { return stop })
	require.ErrorIs(t, err, stop)

	// The count is bounded, whatever the length: signals encode to 2 bits.
	pings := make([]any, MaxBatchMessages+1)
	for i := range pings {
		pings[i] = &msgPing{}
	}
	_, n, err = ParseMessages(batchOf(t, reg, KindMessages, 1, pings[:MaxBatchMessages]...), KindMessages, reg.Messages(), nil, nil)
	require.NoError(t, err)
	require.Equal(t, MaxBatchMessages, n)
	_, _, err = ParseMessages(batchOf(t, reg, KindMessages, 1, pings...), KindMessages, reg.Messages(), nil, nil)
	require.ErrorContains(t, err, "1025 messages")
}

// A message's cost: its id (2 bits among 3 types) and its fields; a
// reference to a server entity of a small slot and generation is a few
// bits; the batch adds its kind, tick and count.
func TestMessageBytes(t *testing.T) {
	reg := msgRegistry()
	var w bitio.Writer
	lanes := make([]uint64, 8)
	p := schema.MessageOf[msgHit](reg)
	v := msgHit{Target: components.Ref{ID: components.NetID{Handle: components.MakeHandle(0, 12), Gen: 1}, Set: true}, Damage: 10}
	schema.QuantizeValue(p, &v, lanes)
	MessageBody(&w, p, 2, lanes)
	require.Equal(t, 2+(7+1+3)+10, w.BitLen(), "id, reference (EG(13), owner 0, EG(1)), damage")
	v.Target = components.Ref{}
	schema.QuantizeValue(p, &v, lanes)
	w.Reset(nil)
	MessageBody(&w, p, 2, lanes)
	require.Equal(t, 2+1+10, w.BitLen(), "a reference to none is one bit")
	b := batchOf(t, reg, KindMessages, 1<<20, &msgChat{Line: [8]uint8{1, 2, 3, 4, 5, 6, 7, 8}})
	require.Len(t, b, 1+3+1+9, "kind, tick, count, then 2 + 64 bits")
}

// FuzzGameMessages feeds arbitrary bytes to the game-message batch decoder
// (both directions): it never panics, never takes more than
// MaxBatchMessages, and what it accepts re-encodes to a batch it accepts
// alike.
func FuzzGameMessages(f *testing.F) {
	reg := msgRegistry()
	hit := msgHit{Target: components.Ref{ID: components.NetID{Handle: components.MakeHandle(3, 1000), Gen: 5}, Set: true}, Damage: 250}
	f.Add(batchOf(f, reg, KindMessages, 9, &hit, &msgChat{Line: [8]uint8{'g', 'g'}}, &msgPing{}))
	f.Add(batchOf(f, reg, KindClientMessages, 1<<31, &msgHit{Damage: 3}))
	f.Add(batchOf(f, reg, KindClientMessages, 0, &msgPing{}, &msgPing{}, &msgPing{}))
	var sw SectionWriter
	var w bitio.Writer
	lanes := make([]uint64, 8)
	p := schema.MessageOf[msgHit](reg)
	schema.QuantizeValue(p, &hit, lanes)
	MessageBody(&w, p, IDBits(3), lanes)
	nb := w.BitLen()
	sw.Add(w.Bytes(), nb)
	f.Add(sw.Append([]byte{KindSnapshot | FlagMessages, 0, 0}, false, 0))
	f.Add(sw.Append([]byte{KindClientDatagram | FlagClientMessages, 0, 0}, true, 7))
	plans := reg.Messages()
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, flag := range []byte{FlagMessages, FlagClientMessages} {
			body, sec, err := SplitSection(b, flag)
			if err != nil {
				continue
			}
			if len(body)+len(sec) > len(b) || (sec != nil && (len(sec) == 0 || len(sec) > MaxSectionLen)) {
				t.Fatalf("split %d bytes into %d + %d", len(b), len(body), len(sec))
			}
			for _, seq := range []bool{false, true} {
				_, n, err := ParseSection(sec, seq, plans, nil, func(*schema.Plan, []uint64) error { return nil })
				if err == nil && (n < 1 || n > MaxBatchMessages) {
					t.Fatalf("section of %d messages accepted", n)
				}
			}
		}
		for _, kind := range []byte{KindMessages, KindClientMessages} {
			var types []uint8
			var all [][]uint64
			tick, n, err := ParseMessages(b, kind, plans, nil, func(_ uint32, p *schema.Plan, lanes []uint64) error {
				types = append(types, p.ID)
				all = append(all, append([]uint64(nil), lanes...))
				return nil
			})
			if err != nil {
				continue
			}
			if n > MaxBatchMessages || n != len(types) {
				t.Fatalf("%d messages accepted, %d delivered", n, len(types))
			}
			var mw MessageWriter
			var w bitio.Writer
			for i, id := range types {
				w.Reset(nil)
				MessageBody(&w, plans[id], IDBits(len(plans)), all[i])
				nb := w.BitLen()
				mw.Add(w.Bytes(), nb)
			}
			again := mw.Append(nil, kind, tick)
			k := 0
			if _, _, err := ParseMessages(again, kind, plans, nil, func(_ uint32, p *schema.Plan, lanes []uint64) error {
				if p.ID != types[k] || !slices.Equal(lanes, all[k]) {
					t.Fatalf("message %d decodes differently after re-encoding", k)
				}
				k++
				return nil
			}); err != nil {
				t.Fatalf("re-encoded batch refused: %v", err)
			}
		}
	})
}

// A protocol mismatch in the message types names the message.
func TestDiffNamesMessages(t *testing.T) {
	server := msgRegistry()
	client := fuzzRegistry()
	schema.MustRegisterMessage[msgHit](client)
	schema.MustRegisterMessage[msgChat](client, schema.WithTag("Line", "range=0:127"))
	list, err := ParseComponents(AppendComponents(nil, ComponentHashes(server)))
	require.NoError(t, err)
	require.Equal(t, `client lacks message "msgPing" (server message 2); message 1 differs: "msgChat" has the same fields (Line[0],Line[1],Line[2],Line[3],Line[4],Line[5],Line[6],Line[7]) on both sides but other precision or field types`,
		DiffComponents(list, ComponentHashes(client)))
}

// BenchmarkMessageSection encodes and decodes an unreliable section of one
// message of 8 bytes of payload, as a snapshot datagram carries it; the
// figure is the bytes it adds beyond the payload (count, id, padding and the
// length byte).
func BenchmarkMessageSection(b *testing.B) {
	reg := msgRegistry()
	p := schema.MessageOf[msgChat](reg)
	lanes := make([]uint64, p.NumLanes())
	schema.QuantizeValue(p, &msgChat{Line: [8]uint8{1, 2, 3, 4, 5, 6, 7, 8}}, lanes)
	var w bitio.Writer
	var sw SectionWriter
	dg := make([]byte, 0, 64)
	plans := reg.Messages()
	scratch := make([]uint64, MaxMessageLanes(plans))
	deliver := func(*schema.Plan, []uint64) error { return nil }
	b.ReportAllocs()
	for range b.N {
		w.Reset(w.Bytes()[:0])
		MessageBody(&w, p, IDBits(len(plans)), lanes)
		sw.Reset()
		nb := w.BitLen() // (before Bytes pads it)
		sw.Add(w.Bytes(), nb)
		dg = sw.Append(append(dg[:0], KindSnapshot|FlagMessages), false, 0)
		_, sec, _ := SplitSection(dg, FlagMessages)
		if _, _, err := ParseSection(sec, false, plans, scratch, deliver); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(len(dg)-1-8), "overhead-B/msg")
}

// BenchmarkMessageBatch is the same message sent reliably: a batch of one
// on the stream (kind, tick, count, id, padding).
func BenchmarkMessageBatch(b *testing.B) {
	reg := msgRegistry()
	p := schema.MessageOf[msgChat](reg)
	lanes := make([]uint64, p.NumLanes())
	schema.QuantizeValue(p, &msgChat{Line: [8]uint8{1, 2, 3, 4, 5, 6, 7, 8}}, lanes)
	var w bitio.Writer
	var mw MessageWriter
	msg := make([]byte, 0, 64)
	plans := reg.Messages()
	scratch := make([]uint64, MaxMessageLanes(plans))
	deliver := func(uint32, *schema.Plan, []uint64) error { return nil }
	b.ReportAllocs()
	for range b.N {
		w.Reset(w.Bytes()[:0])
		MessageBody(&w, p, IDBits(len(plans)), lanes)
		mw.Reset()
		nb := w.BitLen()
		mw.Add(w.Bytes(), nb)
		msg = mw.Append(msg[:0], KindMessages, 1<<20)
		if _, _, err := ParseMessages(msg, KindMessages, plans, scratch, deliver); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(len(msg)-8), "overhead-B/msg")
}
