package input

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/archenet/archenet/replication/bitio"
)

// The server repeats the last input for Hold missing ticks, then reports
// StatusOutage (the caller applies the outage input); a frame ends it.
// A negative Hold never reports it.
func TestLogOutageAfterHold(t *testing.T) {
	c := newShooterCodec(t, Config{Hold: 3})
	require.Equal(t, 3, c.Hold())
	l, err := newInputLog(c, LogConfig{})
	require.NoError(t, err)
	_, err = l.Receive(bitio.NewReader(section(t, c, 10, 7)), 10)
	require.NoError(t, err)
	var in shooterInput
	require.Equal(t, statusReceived, l.Consume(10, &in))
	for tick := uint32(11); tick <= 13; tick++ {
		require.Equal(t, statusMissing, l.Consume(tick, &in), "tick %d", tick)
		require.Equal(t, uint16(7), in.Keys)
	}
	require.Equal(t, statusOutage, l.Consume(14, &in))
	require.Equal(t, uint16(7), in.Keys, "the last input, for the outage input to be made from")
	applied, _ := l.LastApplied()
	require.Equal(t, uint32(10), applied)
	_, err = l.Receive(bitio.NewReader(section(t, c, 15, 2)), 15)
	require.NoError(t, err)
	require.Equal(t, statusReceived, l.Consume(15, &in))
	st := l.Stats()
	require.Equal(t, uint64(4), st.Missing)
	require.Equal(t, uint64(1), st.Outage)

	never := newShooterCodec(t, Config{Hold: -1})
	l, err = newInputLog(never, LogConfig{})
	require.NoError(t, err)
	_, err = l.Receive(bitio.NewReader(section(t, never, 10, 7)), 10)
	require.NoError(t, err)
	require.Equal(t, statusReceived, l.Consume(10, &in))
	require.Equal(t, statusMissing, l.Consume(10+1000, &in))
	require.Equal(t, DefaultHold, newShooterCodec(t, Config{}).Hold())
}

// The player's view of its inputs: cut off when the newest snapshot says
// the server applies the outage input, or when snapshots stop for Hold
// ticks less half the round trip (at least three net ticks); back with a
// snapshot that shows its inputs applied.
func TestStallWatch(t *testing.T) {
	t0 := time.Unix(100, 0)
	w := stallWatch{hold: 15, tick: time.Second / 60, net: time.Second / 30}
	rtt := 100 * time.Millisecond
	require.False(t, w.check(t0, rtt), "no snapshot yet")

	w.snapshot(t0, 600, 598, true)
	require.False(t, w.check(t0, rtt))
	// Snapshots stop: 250 ms of hold less 50 ms, the half round trip.
	require.False(t, w.check(t0.Add(199*time.Millisecond), rtt))
	require.True(t, w.check(t0.Add(201*time.Millisecond), rtt))
	// A long round trip: never less than three net ticks of quiet.
	require.False(t, w.check(t0.Add(99*time.Millisecond), time.Second))
	require.True(t, w.check(t0.Add(101*time.Millisecond), time.Second))

	// Snapshots again, but the server applies the outage input: still cut off.
	t1 := t0.Add(5 * time.Second)
	w.snapshot(t1, 900, 598, true)
	require.True(t, w.check(t1, rtt))
	// The server hears the client again.
	w.snapshot(t1.Add(time.Second/30), 902, 890, true)
	require.False(t, w.check(t1.Add(time.Second/30), rtt))
	// Ticks wrap.
	w.snapshot(t1, 5, 1<<32-20, true)
	require.True(t, w.check(t1, rtt))
	w.snapshot(t1, 5, 1<<32-5, true)
	require.False(t, w.check(t1, rtt))
	// No input applied yet: not cut off; a negative hold never is.
	w.snapshot(t1, 900, 0, false)
	require.False(t, w.check(t1, rtt))
	never := stallWatch{hold: -1, tick: time.Second / 60, net: time.Second / 30}
	never.snapshot(t0, 900, 10, true)
	require.False(t, never.check(t0.Add(time.Hour), rtt))
}
