package inputlog

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/archenet/archenet/input/internal/frames"
	"github.com/archenet/archenet/replication/bitio"
)

// The server repeats the last input for Hold missing ticks, then reports
// Outage (the caller applies the outage input); a frame ends it.
// A negative Hold never reports it.
func TestLogOutageAfterHold(t *testing.T) {
	c := newShooterCodec(t, frames.Config{Hold: 3})
	require.Equal(t, 3, c.Hold())
	l, err := New(c, Config{})
	require.NoError(t, err)
	_, err = l.Receive(bitio.NewReader(section(t, c, 10, 7)), 10)
	require.NoError(t, err)
	var in shooterInput
	require.Equal(t, Received, l.Consume(10, &in))
	for tick := uint32(11); tick <= 13; tick++ {
		require.Equal(t, Missing, l.Consume(tick, &in), "tick %d", tick)
		require.Equal(t, uint16(7), in.Keys)
	}
	require.Equal(t, Outage, l.Consume(14, &in))
	require.Equal(t, uint16(7), in.Keys, "the last input, for the outage input to be made from")
	applied, _ := l.LastApplied()
	require.Equal(t, uint32(10), applied)
	_, err = l.Receive(bitio.NewReader(section(t, c, 15, 2)), 15)
	require.NoError(t, err)
	require.Equal(t, Received, l.Consume(15, &in))
	st := l.Stats()
	require.Equal(t, uint64(4), st.Missing)
	require.Equal(t, uint64(1), st.Outage)

	never := newShooterCodec(t, frames.Config{Hold: -1})
	l, err = New(never, Config{})
	require.NoError(t, err)
	_, err = l.Receive(bitio.NewReader(section(t, never, 10, 7)), 10)
	require.NoError(t, err)
	require.Equal(t, Received, l.Consume(10, &in))
	require.Equal(t, Missing, l.Consume(10+1000, &in))
	require.Equal(t, frames.DefaultHold, newShooterCodec(t, frames.Config{}).Hold())
}
