package connio

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/archenet/archenet/transport"
	"github.com/archenet/archenet/transport/internal/frame"
)

// nopWriter takes everything at once.
type nopWriter struct{}

func (nopWriter) WriteDatagram([]byte) error           { return nil }
func (nopWriter) WriteMessage([]byte, time.Time) error { return nil }
func (nopWriter) TryWriteMessage([]byte) (bool, error) { return true, nil }
func (nopWriter) closed() error                        { return nil }

// violation is a close Core.Violation logged.
type violation struct {
	code   transport.CloseCode
	reason string
}

// newCore returns a Core over nopWriter whose connection lives until the test
// ends, and the violations it logs. s's zero settings take their defaults.
func newCore(t *testing.T, s Settings, server bool, welcomed func()) (*Core, chan violation) {
	t.Helper()
	require.NoError(t, s.ResolveLimits("test"))
	ctx, cancel := context.WithCancel(context.Background())
	logged := make(chan violation, 8)
	c := &Core{}
	closed := func() error {
		if ce := c.Local(); ce != nil {
			return ce
		}
		return nil
	}
	c.Init(Setup{
		Ctx: ctx, Settings: &s, Writer: nopWriter{}, Closed: closed,
		Log:    func(code transport.CloseCode, reason string) { logged <- violation{code, reason} },
		Server: server, Welcomed: welcomed,
	})
	t.Cleanup(func() {
		cancel()
		c.Stop()
		c.End(nil)
	})
	return c, logged
}

// The first close request while the connection lives is recorded (its reason
// truncated) and handed to AwaitClose; later ones are dropped.
func TestCoreCloseRequests(t *testing.T) {
	c, _ := newCore(t, Settings{}, false, nil)
	require.Nil(t, c.Local())
	c.RequestClose(transport.CodeRejected, strings.Repeat("x", transport.MaxReasonLen+10))
	c.RequestClose(transport.CodeFlood, "later")
	require.Equal(t, transport.CodeRejected, c.Local().Code)
	require.Len(t, c.Local().Reason, transport.MaxReasonLen)
	r, ok := c.AwaitClose()
	require.True(t, ok)
	require.Equal(t, transport.CodeRejected, r.Code)
	require.Len(t, r.Reason, transport.MaxReasonLen)
}

// Once the connection has ended, a close request is dropped and AwaitClose
// reports the end.
func TestCoreCloseAfterEnd(t *testing.T) {
	s := Settings{}
	require.NoError(t, s.ResolveLimits("test"))
	ctx, cancel := context.WithCancel(context.Background())
	c := &Core{}
	c.Init(Setup{Ctx: ctx, Settings: &s, Writer: nopWriter{}, Closed: nopWriter{}.closed})
	cancel()
	c.RequestClose(transport.CodeNormal, "")
	require.Nil(t, c.Local())
	_, ok := c.AwaitClose()
	require.False(t, ok)
	c.Stop()
	c.End(&transport.CloseError{Code: transport.CodeTimeout})
	<-c.Done()
	_, err := c.ReceiveMessage(context.Background())
	require.ErrorIs(t, err, transport.ErrTimeout)
}

// SendMessage refuses an oversize message and sends nothing once the
// connection is closing; a server's first Welcome calls Welcomed, once.
func TestCoreSendMessage(t *testing.T) {
	welcomes := 0
	c, _ := newCore(t, Settings{MaxMessageSize: 100}, true, func() { welcomes++ })
	var tl *transport.MessageTooLargeError
	require.ErrorAs(t, c.SendMessage(make([]byte, 101)), &tl)
	require.Equal(t, 100, tl.Max)
	welcome := transport.Welcome{ClientID: 1}.Append(nil)
	require.NoError(t, c.SendMessage(welcome))
	require.NoError(t, c.SendMessage(welcome))
	require.Equal(t, 1, welcomes)
	require.NoError(t, c.SendDatagram([]byte{1}))
	st := c.Stats(0)
	require.EqualValues(t, 2, st.MessagesSent)
	require.EqualValues(t, 1, st.DatagramsSent)

	c.RequestClose(transport.CodeNormal, "bye")
	var ce *transport.CloseError
	require.ErrorAs(t, c.SendMessage([]byte{1}), &ce)
	require.Equal(t, "bye", ce.Reason)
}

// The first message read is bounded by the handshake's size: a larger one is
// a violation that says so.
func TestCoreReadMessagesHandshake(t *testing.T) {
	c, logged := newCore(t, Settings{}, true, nil)
	big := frame.Append(nil, make([]byte, transport.MaxHandshakeMessageSize+1))
	c.ReadMessages(bufio.NewReader(bytes.NewReader(big)), true, nil)
	v := <-logged
	require.Equal(t, transport.CodeMessageTooLarge, v.code)
	require.True(t, strings.HasPrefix(v.reason, "handshake message of"), v.reason)
	require.Equal(t, transport.CodeMessageTooLarge, c.Local().Code)
}

// A server's connection reads nothing past the Hello before it sends its
// Welcome, however many messages follow the Hello; a client's reads on once
// the first message was taken.
func TestCoreReadsNothingBeforeWelcome(t *testing.T) {
	in := frame.Append(nil, []byte("hello"))
	for i := range 1000 {
		in = frame.Append(in, []byte{byte(i), byte(i >> 8)})
	}
	for _, server := range []bool{true, false} {
		c, _ := newCore(t, Settings{}, server, nil)
		r := &countingReader{r: bytes.NewReader(in)}
		go c.ReadMessages(bufio.NewReaderSize(r, 16), true, nil)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		b, err := c.ReceiveMessage(ctx)
		cancel()
		require.NoError(t, err)
		require.Equal(t, "hello", string(b))
		// (A short wait for what must not come: a reader that went on would
		// have queued the next message within microseconds.)
		ctx, cancel = context.WithTimeout(context.Background(), 100*time.Millisecond)
		_, err = c.ReceiveMessage(ctx)
		cancel()
		if server {
			require.ErrorIs(t, err, context.DeadlineExceeded, "a message read before the Welcome")
			require.EqualValues(t, 1, c.Stats(0).MessagesReceived)
			require.LessOrEqual(t, r.n.Load(), int64(len("hello")+1+16), "read past the Hello's frame and one buffer")
			require.NoError(t, c.SendMessage(transport.Welcome{ClientID: 1}.Append(nil)))
		} else {
			require.NoError(t, err)
		}
		ctx, cancel = context.WithTimeout(context.Background(), 10*time.Second)
		for c.Stats(0).MessagesReceived < 1001 {
			_, err = c.ReceiveMessage(ctx)
			require.NoError(t, err)
		}
		cancel()
	}
}

// countingReader counts the bytes read from r.
type countingReader struct {
	r io.Reader
	n atomic.Int64
}

func (c *countingReader) Read(b []byte) (int, error) {
	n, err := c.r.Read(b)
	c.n.Add(int64(n))
	return n, err
}

// Messages reach the queue in order; a stream that ends while the connection
// lives on is a protocol error unless ended says the connection is ending.
func TestCoreReadMessages(t *testing.T) {
	var in []byte
	for i := range 3 {
		in = frame.Append(in, []byte{byte(i)})
	}
	for _, ending := range []bool{false, true} {
		c, _ := newCore(t, Settings{}, false, nil)
		c.ReadMessages(bufio.NewReader(bytes.NewReader(in)), false, func(err error) bool {
			require.ErrorIs(t, err, io.EOF)
			return ending
		})
		for i := range 3 {
			b, ok := c.PollMessage()
			require.True(t, ok)
			require.Equal(t, []byte{byte(i)}, b)
		}
		if ending {
			require.Nil(t, c.Local())
		} else {
			require.Equal(t, &transport.CloseError{Code: transport.CodeProtocolError, Reason: "message stream closed: EOF"}, c.Local())
		}
	}
}

// datagrams returns a recv that hands out the given datagrams and then fails.
func datagrams(dgs ...[]byte) func(context.Context) ([]byte, error) {
	return func(context.Context) ([]byte, error) {
		if len(dgs) == 0 {
			return nil, errors.New("no more")
		}
		b := dgs[0]
		dgs = dgs[1:]
		return b, nil
	}
}

// A server queues PendingDatagrams datagrams before its Welcome and drops the
// rest; a client queues them all.
func TestCoreReadDatagramsPending(t *testing.T) {
	in := make([][]byte, PendingDatagrams+5)
	for i := range in {
		in[i] = []byte{byte(i)}
	}
	for _, server := range []bool{true, false} {
		c, _ := newCore(t, Settings{DatagramRateLimit: -1}, server, nil)
		c.ReadDatagrams(datagrams(in...), 0)
		st := c.Stats(0)
		if server {
			require.EqualValues(t, PendingDatagrams, st.DatagramsReceived)
			require.EqualValues(t, 5, st.DatagramsDropped)
		} else {
			require.EqualValues(t, len(in), st.DatagramsReceived)
		}
	}
}

// A flood beyond the burst, or an oversize datagram, is a violation that
// ends the reading.
func TestCoreReadDatagramsViolations(t *testing.T) {
	c, logged := newCore(t, Settings{DatagramRateLimit: 1, DatagramBurst: 2}, false, nil)
	c.ReadDatagrams(datagrams([]byte{1}, []byte{2}, []byte{3}, []byte{4}), 0)
	require.Equal(t, violation{transport.CodeFlood, "datagram flood: more than 1 datagrams/s (burst 2)"}, <-logged)
	require.EqualValues(t, 2, c.Stats(0).DatagramsReceived)

	c, logged = newCore(t, Settings{}, false, nil)
	c.ReadDatagrams(datagrams(make([]byte, 10), make([]byte, 11), []byte{1}), 10)
	require.Equal(t, violation{transport.CodeProtocolError, fmt.Sprintf("datagram of %d bytes exceeds the maximum of %d", 11, 10)}, <-logged)
	require.EqualValues(t, 1, c.Stats(0).DatagramsReceived)
}
