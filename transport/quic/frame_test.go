//go:build archenet_quic

package quic

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"runtime"
	"testing"
	"time"

	"github.com/archenet/archenet/transport"
	"github.com/stretchr/testify/require"
)

func TestFrameEncoding(t *testing.T) {
	require.Equal(t, []byte{0x00}, appendFrame(nil, nil))
	require.Equal(t, []byte{0x03, 'a', 'b', 'c'}, appendFrame(nil, []byte("abc")))
	big := appendFrame([]byte{0xee}, make([]byte, 300))
	require.Equal(t, []byte{0xee, 0xac, 0x02}, big[:3])
	require.Len(t, big, 303)

	var stream []byte
	msgs := [][]byte{{}, []byte("x"), make([]byte, 128), make([]byte, 20000)}
	for _, m := range msgs {
		stream = appendFrame(stream, m)
	}
	r := bufio.NewReader(bytes.NewReader(stream))
	for _, want := range msgs {
		got, err := readFrame(r, 1<<20)
		require.NoError(t, err)
		require.Equal(t, want, got)
	}
	_, err := readFrame(r, 1<<20)
	require.Equal(t, io.EOF, err, "clean end at a frame boundary")
}

func frameErr(t *testing.T, b []byte, max int) *frameError {
	t.Helper()
	_, err := readFrame(bufio.NewReader(bytes.NewReader(b)), max)
	var fe *frameError
	require.True(t, errors.As(err, &fe), "got %v", err)
	return fe
}

func TestFrameRejectsHostileInput(t *testing.T) {
	fe := frameErr(t, []byte{0x80, 0x80, 0x80, 0x80, 0x10}, 1<<20) // 4 GiB
	require.Equal(t, transport.CodeMessageTooLarge, fe.code)
	require.Equal(t, "message of 4294967296 bytes exceeds the maximum of 1048576 bytes", fe.reason)

	fe = frameErr(t, bytes.Repeat([]byte{0xff}, 11), 1<<20)
	require.Equal(t, transport.CodeProtocolError, fe.code)
	require.Contains(t, fe.reason, "overflows")

	fe = frameErr(t, []byte{0x05, 'a', 'b'}, 1<<20)
	require.Equal(t, transport.CodeProtocolError, fe.code)
	require.Contains(t, fe.reason, "inside a message")

	fe = frameErr(t, []byte{0x85}, 1<<20)
	require.Contains(t, fe.reason, "inside a length prefix")

	fe = frameErr(t, appendFrame(nil, make([]byte, 11)), 10)
	require.Equal(t, transport.CodeMessageTooLarge, fe.code)
}

func TestFrameDoesNotAllocateByUntrustedLength(t *testing.T) {
	hostile := []byte{0x80, 0x80, 0x80, 0x80, 0x10} // announces 4 GiB
	src := bytes.NewReader(hostile)
	r := bufio.NewReaderSize(src, 16)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range 100 {
		src.Reset(hostile)
		r.Reset(src)
		if _, err := readFrame(r, 1<<20); err == nil {
			t.Fatal("4 GiB frame accepted")
		}
	}
	runtime.ReadMemStats(&after)
	// Only small error values are allocated, never the announced size (nor the 1 MiB maximum).
	perCall := (after.TotalAlloc - before.TotalAlloc) / 100
	require.Less(t, perCall, uint64(1024), "%d bytes allocated per hostile frame", perCall)
}

func TestTokenBucket(t *testing.T) {
	t0 := time.Unix(0, 0)
	b := newTokenBucket(100, 10, t0)
	for i := range 10 {
		require.True(t, b.allow(t0), "burst %d", i)
	}
	require.False(t, b.allow(t0), "burst exhausted")
	require.True(t, b.allow(t0.Add(10*time.Millisecond)), "one token refilled after 1/rate")
	require.False(t, b.allow(t0.Add(10*time.Millisecond)))
	require.True(t, b.allow(t0.Add(time.Hour)))
	n := 0
	for b.allow(t0.Add(time.Hour)) {
		n++
	}
	require.Equal(t, 9, n, "refill is capped at the burst")

	unlimited := newTokenBucket(-1, 1, t0)
	for range 1000 {
		require.True(t, unlimited.allow(t0))
	}
}

func FuzzFrameReader(f *testing.F) {
	f.Add(appendFrame(appendFrame(nil, []byte("hello")), nil))
	f.Add([]byte{0x80, 0x80, 0x80, 0x80, 0x10})
	f.Add(bytes.Repeat([]byte{0xff}, 11))
	f.Add([]byte{0x05, 'a'})
	const max = 4096
	f.Fuzz(func(t *testing.T, b []byte) {
		r := bufio.NewReaderSize(bytes.NewReader(b), 16)
		var frames [][]byte
		for {
			m, err := readFrame(r, max)
			if err != nil {
				var fe *frameError
				if err != io.EOF && !errors.As(err, &fe) {
					t.Fatalf("unexpected error type %T: %v", err, err)
				}
				break
			}
			if len(m) > max {
				t.Fatalf("frame of %d bytes above the maximum", len(m))
			}
			frames = append(frames, m)
		}
		// Frames re-encode to a prefix-compatible stream that decodes to the same frames.
		var enc []byte
		for _, m := range frames {
			enc = appendFrame(enc, m)
		}
		r = bufio.NewReader(bytes.NewReader(enc))
		for i, want := range frames {
			got, err := readFrame(r, max)
			if err != nil || !bytes.Equal(got, want) {
				t.Fatalf("frame %d does not round-trip: %v", i, err)
			}
		}
	})
}
