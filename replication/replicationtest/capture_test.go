package replicationtest

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/archenet/archenet/components"
)

func testCapture() ClientCapture {
	return ClientCapture{Me: 3, Mirrors: []CapturedMirror{
		{ID: components.NetID{Handle: components.MakeHandle(3, 7), Gen: 2}, Tick: 1 << 31, Predicted: true, Set: 1<<63 | 5, Lanes: []uint64{0, 1<<64 - 1, 300}},
		{ID: components.NetID{Handle: 9, Gen: 1}, Tick: 12},
	}}
}

// A capture round-trips; a truncated, padded or oversized one is refused.
func TestClientCaptureEncoding(t *testing.T) {
	b, err := testCapture().AppendBinary(nil)
	require.NoError(t, err)
	var got ClientCapture
	require.NoError(t, got.UnmarshalBinary(b))
	again, _ := got.AppendBinary(nil)
	require.Equal(t, b, again)
	require.Equal(t, testCapture().Mirrors[0], got.Mirrors[0])
	for i := range b {
		require.Error(t, new(ClientCapture).UnmarshalBinary(b[:i]), "truncated at %d", i)
	}
	require.ErrorContains(t, new(ClientCapture).UnmarshalBinary(append(b, 0)), "trailing")
	require.ErrorContains(t, new(ClientCapture).UnmarshalBinary([]byte{1, 0xff, 0xff, 0xff, 0xff, 0x0f}), "mirror count")
}

// FuzzClientCapture: UnmarshalBinary never panics, and what it accepts
// encodes back to the same bytes.
func FuzzClientCapture(f *testing.F) {
	b, _ := testCapture().AppendBinary(nil)
	f.Add(b)
	f.Add([]byte{0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		var c ClientCapture
		if c.UnmarshalBinary(b) != nil {
			return
		}
		again, _ := c.AppendBinary(nil)
		if !bytes.Equal(again, b) {
			// Uvarints have one shortest form; a longer one decodes too.
			var c2 ClientCapture
			require.NoError(t, c2.UnmarshalBinary(again))
			require.Equal(t, c, c2)
		}
	})
}
