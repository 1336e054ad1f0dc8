package frame

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"runtime"
	"testing"

	"github.com/archenet/archenet/transport"
	"github.com/stretchr/testify/require"
)

func TestFrameEncoding(t *testing.T) {
	require.Equal(t, []byte{0x00}, Append(nil, nil))
	require.Equal(t, []byte{0x03, 'a', 'b', 'c'}, Append(nil, []byte("abc")))
	big := Append([]byte{0xee}, make([]byte, 300))
	require.Equal(t, []byte{0xee, 0xac, 0x02}, big[:3])
	require.Len(t, big, 303)

	var stream []byte
	msgs := [][]byte{{}, []byte("x"), make([]byte, 128), make([]byte, 20000)}
	for _, m := range msgs {
		stream = Append(stream, m)
	}
	r := bufio.NewReader(bytes.NewReader(stream))
	for _, want := range msgs {
		got, err := Read(r, 1<<20)
		require.NoError(t, err)
		require.Equal(t, want, got)
	}
	_, err := Read(r, 1<<20)
	require.Equal(t, io.EOF, err, "clean end at a frame boundary")
}

func frameErr(t *testing.T, b []byte, max int) *Error {
	t.Helper()
	_, err := Read(bufio.NewReader(bytes.NewReader(b)), max)
	var fe *Error
	require.True(t, errors.As(err, &fe), "got %v", err)
	return fe
}

func TestFrameRejectsHostileInput(t *testing.T) {
	fe := frameErr(t, []byte{0x80, 0x80, 0x80, 0x80, 0x10}, 1<<20) // 4 GiB
	require.Equal(t, transport.CodeMessageTooLarge, fe.Code)
	require.Equal(t, "message of 4294967296 bytes exceeds the maximum of 1048576 bytes", fe.Reason)

	fe = frameErr(t, bytes.Repeat([]byte{0xff}, 11), 1<<20)
	require.Equal(t, transport.CodeProtocolError, fe.Code)
	require.Contains(t, fe.Reason, "overflows")

	fe = frameErr(t, []byte{0x05, 'a', 'b'}, 1<<20)
	require.Equal(t, transport.CodeProtocolError, fe.Code)
	require.Contains(t, fe.Reason, "inside a message")

	fe = frameErr(t, []byte{0x85}, 1<<20)
	require.Contains(t, fe.Reason, "inside a length prefix")

	fe = frameErr(t, Append(nil, make([]byte, 11)), 10)
	require.Equal(t, transport.CodeMessageTooLarge, fe.Code)
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
		if _, err := Read(r, 1<<20); err == nil {
			t.Fatal("4 GiB frame accepted")
		}
	}
	runtime.ReadMemStats(&after)
	// Only small error values are allocated, never the announced size (nor the 1 MiB maximum).
	perCall := (after.TotalAlloc - before.TotalAlloc) / 100
	require.Less(t, perCall, uint64(1024), "%d bytes allocated per hostile frame", perCall)
}

func FuzzFrameReader(f *testing.F) {
	f.Add(Append(Append(nil, []byte("hello")), nil))
	f.Add([]byte{0x80, 0x80, 0x80, 0x80, 0x10})
	f.Add(bytes.Repeat([]byte{0xff}, 11))
	f.Add([]byte{0x05, 'a'})
	const max = 4096
	f.Fuzz(func(t *testing.T, b []byte) {
		r := bufio.NewReaderSize(bytes.NewReader(b), 16)
		var frames [][]byte
		for {
			m, err := Read(r, max)
			if err != nil {
				var fe *Error
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
			enc = Append(enc, m)
		}
		r = bufio.NewReader(bytes.NewReader(enc))
		for i, want := range frames {
			got, err := Read(r, max)
			if err != nil || !bytes.Equal(got, want) {
				t.Fatalf("frame %d does not round-trip: %v", i, err)
			}
		}
	})
}

// A peer that announces a large message and sends a little of it holds memory in
// proportion to what it sent.
func TestFrameAllocatesAsBytesArrive(t *testing.T) {
	partial := append(Append(nil, make([]byte, 1<<20))[:3], make([]byte, 100)...) // announces 1 MiB, sends 100 B
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range 100 {
		_, err := Read(bufio.NewReaderSize(bytes.NewReader(partial), 16), 1<<20)
		require.Error(t, err)
	}
	runtime.ReadMemStats(&after)
	perCall := (after.TotalAlloc - before.TotalAlloc) / 100
	require.Less(t, perCall, uint64(20<<10), "%d bytes allocated per truncated 1 MiB frame", perCall)

	// Complete frames of every size around the chunk boundaries still round-trip.
	for _, size := range []int{0, 1, chunk - 1, chunk, chunk + 1, 3*chunk + 5, 1 << 20} {
		want := make([]byte, size)
		for i := range want {
			want[i] = byte(i * 7)
		}
		got, err := Read(bufio.NewReader(bytes.NewReader(Append(nil, want))), 1<<20)
		require.NoError(t, err)
		require.Equal(t, want, got, "size %d", size)
	}
}
