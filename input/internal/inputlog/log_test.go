package inputlog

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/archenet/archenet/input/internal/frames"
	"github.com/archenet/archenet/input/internal/inputerr"
	"github.com/archenet/archenet/replication/bitio"
)

// section encodes frames for ticks first.. with keys values ks.
func section(t *testing.T, c *frames.Codec[shooterInput], first uint32, ks ...uint16) []byte {
	t.Helper()
	nl := c.NumLanes()
	frames := make([]uint64, len(ks)*nl)
	for i, k := range ks {
		in := shooterInput{Keys: k}
		c.Quantize(&in, frames[i*nl:])
	}
	var w bitio.Writer
	c.AppendFrames(&w, first, frames, nil, 0, nil)
	return w.Bytes()
}

func TestLogStoreAndConsume(t *testing.T) {
	c := newShooterCodec(t, frames.Config{})
	l, err := New(c, Config{MaxLead: 8})
	require.NoError(t, err)
	var in shooterInput

	require.Equal(t, None, l.Consume(9, &in))
	require.Equal(t, shooterInput{}, in)

	n, err := l.Receive(bitio.NewReader(section(t, c, 10, 1, 2, 3, 4)), 10)
	require.NoError(t, err)
	require.Equal(t, 4, n)
	// Redundant copy overlapping by three frames: one new frame.
	n, err = l.Receive(bitio.NewReader(section(t, c, 11, 2, 3, 4, 5)), 10)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	// Too far ahead: ticks 18.. are ≥ 10+MaxLead.
	n, err = l.Receive(bitio.NewReader(section(t, c, 16, 7, 8, 9)), 10)
	require.NoError(t, err)
	require.Equal(t, 2, n)

	for tick := uint32(10); tick <= 14; tick++ {
		require.Equal(t, Received, l.Consume(tick, &in))
		require.Equal(t, uint16(tick-9), in.Keys)
		last, ok := l.LastApplied()
		require.True(t, ok)
		require.Equal(t, tick, last)
	}
	// 15 missing: the input of 14 repeats.
	require.Equal(t, Missing, l.Consume(15, &in))
	require.Equal(t, uint16(5), in.Keys)
	last, _ := l.LastApplied()
	require.Equal(t, uint32(14), last)
	require.Equal(t, Received, l.Consume(16, &in))
	require.Equal(t, uint16(7), in.Keys)

	// A frame for 15 now is late; 16 is a duplicate.
	n, err = l.Receive(bitio.NewReader(section(t, c, 15, 6, 7)), 17)
	require.NoError(t, err)
	require.Equal(t, 0, n)

	st := l.Stats()
	require.Equal(t, uint64(4), st.Datagrams)
	require.Equal(t, uint64(7), st.Frames)
	require.Equal(t, uint64(4), st.Duplicate) // 3 + 1
	require.Equal(t, uint64(1), st.Ahead)
	require.Equal(t, uint64(1), st.Late)
	require.Equal(t, uint64(8), st.Consumed) // including tick 9 before any input
	require.Equal(t, uint64(6), st.Received)
	require.Equal(t, uint64(1), st.Missing)

	// Feedback: newest held 17; depth min over the consumes since the
	// last call: 17−16 = 1 at tick 16 (earlier 14−... at 10 it was 7).
	f := l.Feedback()
	require.True(t, f.HasAck)
	require.Equal(t, uint32(17), f.Ack)
	require.Equal(t, 1, f.Depth)
	l.Consume(17, &in)
	l.Consume(18, &in)
	require.Equal(t, -1, l.Feedback().Depth)
}

func TestLogFirstCopyWins(t *testing.T) {
	c := newShooterCodec(t, frames.Config{})
	l, err := New(c, Config{})
	require.NoError(t, err)
	_, err = l.Receive(bitio.NewReader(section(t, c, 5, 1)), 5)
	require.NoError(t, err)
	_, err = l.Receive(bitio.NewReader(section(t, c, 5, 9)), 5)
	require.NoError(t, err)
	var in shooterInput
	l.Consume(5, &in)
	require.Equal(t, uint16(1), in.Keys)
}

func TestLogFlood(t *testing.T) {
	c := newShooterCodec(t, frames.Config{})
	l, err := New(c, Config{DatagramsPerTick: 2, Burst: 5})
	require.NoError(t, err)
	data := section(t, c, 1, 1)
	for i := 0; i < 5; i++ {
		_, err := l.Receive(bitio.NewReader(data), 1)
		require.NoError(t, err)
	}
	_, err = l.Receive(bitio.NewReader(data), 1)
	require.ErrorIs(t, err, ErrFlood)
	var in shooterInput
	l.Consume(1, &in) // refills 2
	for i := 0; i < 2; i++ {
		_, err := l.Receive(bitio.NewReader(data), 2)
		require.NoError(t, err)
	}
	_, err = l.Receive(bitio.NewReader(data), 2)
	require.ErrorIs(t, err, ErrFlood)
	require.Equal(t, uint64(2), l.Stats().Flooded)

	// A well-behaved client at one datagram per tick is never refused.
	for tick := uint32(2); tick < 1000; tick++ {
		l.Consume(tick, &in)
		_, err := l.Receive(bitio.NewReader(data), tick+1)
		require.NoError(t, err)
	}
}

func TestLogHostile(t *testing.T) {
	c := newShooterCodec(t, frames.Config{})
	l, err := New(c, Config{MaxLead: 32, Burst: 1000})
	require.NoError(t, err)
	var in shooterInput
	for tick := uint32(0); tick < 100; tick++ {
		l.Consume(tick, &in)
	}
	// Future ticks beyond the lead, and far past ticks.
	_, err = l.Receive(bitio.NewReader(section(t, c, 100+32, 1, 2)), 100)
	require.NoError(t, err)
	_, err = l.Receive(bitio.NewReader(section(t, c, 100+30000, 1)), 100)
	require.NoError(t, err)
	_, err = l.Receive(bitio.NewReader(section(t, c, 100+35536, 1)), 100)
	require.NoError(t, err)
	st := l.Stats()
	require.Equal(t, uint64(3), st.Ahead)
	require.Equal(t, uint64(1), st.Late)
	require.Equal(t, uint64(0), st.Frames)
	_, ok := l.Baseline(132)
	require.False(t, ok)
	// Garbage.
	_, err = l.Receive(bitio.NewReader([]byte{0xff, 0xff, 0xff}), 100)
	require.ErrorIs(t, err, inputerr.ErrMalformed)
	_, err = l.Receive(bitio.NewReader(nil), 100)
	require.ErrorIs(t, err, inputerr.ErrMalformed)
	require.Equal(t, uint64(2), l.Stats().Malformed)

	_, err = New(c, Config{MaxLead: MaxLeadLimit + 1})
	require.ErrorIs(t, err, inputerr.ErrInvalidConfig)
	_, err = New(c, Config{DatagramsPerTick: -1})
	require.ErrorIs(t, err, inputerr.ErrInvalidConfig)
	_, err = New(c, Config{Burst: -1})
	require.ErrorIs(t, err, inputerr.ErrInvalidConfig)
}

// TestSenderLogAckedBaseline: sections coded against an acked frame decode
// at the log, and a baseline the log no longer holds fails cleanly.
func TestSenderLogAckedBaseline(t *testing.T) {
	c := newShooterCodec(t, frames.Config{})
	s := frames.NewSender(c)
	l, err := New(c, Config{Burst: 1000})
	require.NoError(t, err)
	var w bitio.Writer
	require.Equal(t, 0, s.AppendFrames(&w))
	var in, got shooterInput
	for tick := uint32(1); tick < 200; tick++ {
		in = shooterInput{Keys: uint16(tick / 10), DX: float32(tick%7) - 3}
		require.True(t, s.Push(tick, &in))
		w.Reset(nil)
		require.Equal(t, min(4, int(tick)), s.AppendFrames(&w))
		_, err := l.Receive(bitio.NewReader(w.Bytes()), tick)
		require.NoError(t, err)
		require.Equal(t, Received, l.Consume(tick, &got))
		require.Equal(t, in, got)
		if tick%5 == 0 {
			f := l.Feedback()
			s.Ack(f.Ack - 3) // an old ack, as after a round trip
		}
	}
	require.False(t, s.Push(199, &in), "ticks must increase")
	// Skipped ticks are filled with the previous input.
	in.Keys = 999
	require.True(t, s.Push(203, &in))
	w.Reset(nil)
	require.Equal(t, 4, s.AppendFrames(&w))
	_, err = l.Receive(bitio.NewReader(w.Bytes()), 200)
	require.NoError(t, err)
	for tick := uint32(200); tick < 203; tick++ {
		l.Consume(tick, &got)
		require.Equal(t, uint16(19), got.Keys)
	}
	l.Consume(203, &got)
	require.Equal(t, uint16(999), got.Keys)

	// A fresh log does not hold the sender's baseline.
	l2, err := New(c, Config{})
	require.NoError(t, err)
	_, err = l2.Receive(bitio.NewReader(w.Bytes()), 200)
	require.ErrorIs(t, err, frames.ErrNoBaseline)
	require.Equal(t, uint64(1), l2.Stats().NoBaseline)
}

func TestFeedbackRoundTrip(t *testing.T) {
	for _, f := range []Feedback{{}, {Ack: 70000, HasAck: true, Depth: 3}, {Ack: 5, HasAck: true, Depth: -7}, {Depth: 1000}} {
		var w bitio.Writer
		AppendFeedback(&w, f)
		got, err := ReadFeedback(bitio.NewReader(w.Bytes()), f.Ack+100)
		require.NoError(t, err)
		want := f
		want.Depth = min(max(f.Depth, -MaxFeedbackDepth), MaxFeedbackDepth)
		if !f.HasAck {
			want.Ack = 0
		}
		require.Equal(t, want, got)
		full := w.Bytes()
		for n := 0; n < len(full)-1; n++ {
			_, err := ReadFeedback(bitio.NewReader(full[:n]), 0)
			require.ErrorIs(t, err, inputerr.ErrMalformed)
		}
	}
	var w bitio.Writer
	w.WriteBool(false)
	w.WriteExpGolomb(bitio.ZigZag(1000), 0)
	_, err := ReadFeedback(bitio.NewReader(w.Bytes()), 0)
	require.ErrorIs(t, err, inputerr.ErrMalformed)
}

func TestSteadyStateAllocs(t *testing.T) {
	c := newShooterCodec(t, frames.Config{})
	s := frames.NewSender(c)
	l, err := New(c, Config{})
	require.NoError(t, err)
	var w bitio.Writer
	var r bitio.Reader
	buf := make([]byte, 0, 128)
	tick := uint32(1)
	var got shooterInput
	round := func() {
		in := shooterInput{Keys: 3, DX: float32(tick % 9)}
		s.Push(tick, &in)
		w.Reset(buf)
		s.AppendFrames(&w)
		r.Reset(w.Bytes())
		if _, err := l.Receive(&r, tick); err != nil {
			t.Fatal(err)
		}
		l.Consume(tick, &got)
		s.Ack(l.Feedback().Ack)
		tick++
	}
	round()
	require.Zero(t, testing.AllocsPerRun(200, round))
}
