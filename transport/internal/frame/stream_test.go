package frame

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/archenet/archenet/transport"
)

// acceptPipe returns an accept function that hands out the server end of a
// pipe whose client end writes pre (and then closes, if close is set).
func acceptPipe(t *testing.T, pre []byte, close bool) func(context.Context) (net.Conn, error) {
	return func(context.Context) (net.Conn, error) {
		server, client := net.Pipe()
		t.Cleanup(func() { server.Close() })
		go func() {
			_, _ = client.Write(pre)
			if close {
				client.Close()
			}
		}()
		return server, nil
	}
}

func TestAccept(t *testing.T) {
	s, fe := Accept(context.Background(), acceptPipe(t, []byte{Preamble}, false), time.Minute)
	require.Nil(t, fe)
	require.NotNil(t, s)

	_, fe = Accept(context.Background(), acceptPipe(t, []byte{0x42}, false), time.Minute)
	require.Equal(t, &Error{transport.CodeProtocolError, "bad message stream preamble 0x42"}, fe)

	_, fe = Accept(context.Background(), acceptPipe(t, nil, true), time.Minute)
	require.Equal(t, &Error{transport.CodeProtocolError, "message stream preamble missing"}, fe)

	_, fe = Accept(context.Background(), func(context.Context) (net.Conn, error) { return nil, errors.New("no stream") }, time.Minute)
	require.Equal(t, &Error{transport.CodeTimeout, "message stream not opened in time"}, fe)
}

// deadlineBuffer is a WriteStream that records its deadline.
type deadlineBuffer struct {
	bytes.Buffer
	deadline time.Time
}

func (b *deadlineBuffer) SetWriteDeadline(t time.Time) error {
	b.deadline = t
	return nil
}

// Buffer's frames read back as the messages; its memory is kept from one
// message to the next up to 64 KiB.
func TestBuffer(t *testing.T) {
	var f Buffer
	var s deadlineBuffer
	deadline := time.Unix(1, 0)
	require.NoError(t, f.Write(&s, []byte("hello"), deadline))
	require.Equal(t, deadline, s.deadline)
	require.NoError(t, f.Write(&s, make([]byte, 64<<10+1), deadline))
	require.Nil(t, f.b, "a frame above 64 KiB is let go")
	require.NoError(t, f.Write(&s, []byte("again"), deadline))
	require.NotNil(t, f.b, "a small one is kept")

	r := bufio.NewReader(&s.Buffer)
	for _, want := range [][]byte{[]byte("hello"), make([]byte, 64<<10+1), []byte("again")} {
		got, err := Read(r, 1<<20)
		require.NoError(t, err)
		require.Equal(t, want, got)
	}
}
