package websocket

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"github.com/archenet/archenet/transport"
	"github.com/archenet/archenet/transport/internal/connio"
	"github.com/archenet/archenet/transport/internal/ratelimit"
)

// Conn is an archenet connection over one WebSocket (see the package
// documentation for its wire format). It implements [transport.Conn] and
// [transport.CloseStarter].
//
// Each Conn runs four goroutines: one reads the socket into the bounded
// message and datagram queues (enforcing the limits), two write (through a
// [transport.Outbox], so sends never block the caller), and one carries out
// the close and waits for the end. All have exited when [Conn.Done] is
// closed.
type Conn struct {
	ws            socket
	local, remote net.Addr
	core          connio.Core
	ctx           context.Context // ends when the socket has ended
	cancel        context.CancelFunc
	readDone      chan struct{} // closed when the reader has returned

	mu     sync.Mutex
	remCl  *transport.CloseError // the close the peer announced
	cause  error                 // why reading ended
	dgBuf  []byte                // the datagram writer goroutine's
	msgBuf []byte                // the message writer goroutine's

	onClose func(*Conn)
}

var (
	_ transport.Conn         = (*Conn)(nil)
	_ transport.CloseStarter = (*Conn)(nil)
)

// closeLinger bounds how long a close waits for the socket's close
// handshake.
const closeLinger = 250 * time.Millisecond

func newConn(c socket, set *connio.Settings, server bool, local, remote net.Addr, welcomed func(), onClose func(*Conn)) *Conn {
	k := &Conn{ws: c, local: local, remote: remote, onClose: onClose, readDone: make(chan struct{})}
	k.ctx, k.cancel = context.WithCancel(context.Background())
	// (A little over the largest message: readLimited sees an oversize one
	// first, and says so.)
	c.setReadLimit(max(set.MaxMessageSize, MaxDatagramPayload) + 64)
	k.core.Init(connio.Setup{
		Ctx: k.ctx, Settings: set, Writer: connWriter{k}, Closed: k.closedErr,
		Log:    closeLog(set, remote),
		Server: server, Welcomed: welcomed,
	})
	k.core.Go(func() {
		defer close(k.readDone)
		k.read()
	})
	go k.watch()
	return k
}

// read demultiplexes the socket's messages into the queues until the socket
// ends, the peer announces its close, or it breaks a rule.
func (k *Conn) read() {
	lim := k.core.DatagramLimit()
	first := true
	for {
		binary, r, err := k.ws.next(k.ctx)
		if err != nil {
			k.ended(err)
			return
		}
		more, remote, err := handle(&k.core, &lim, binary, r, &first)
		switch {
		case remote != nil:
			k.mu.Lock()
			k.remCl = remote
			k.mu.Unlock()
			k.cancel()
			return
		case err != nil:
			k.ended(err)
			return
		case !more:
			return
		}
	}
}

// sink is where the reader's messages go: the connection's core.
type sink interface {
	MessageLimit(first bool) int
	TakeMessage(b []byte, first bool) bool
	TakeDatagram(lim *ratelimit.TokenBucket, b []byte, maxSize int) bool
	Violation(code transport.CloseCode, reason string)
}

// handle takes one WebSocket message (binary, or text) read from r into s: a
// message (the first is the handshake), a datagram, or the peer's close
// (returned). It reports whether to read on; a rule broken is a violation
// (requested of s), an error of r is returned.
func handle(s sink, lim *ratelimit.TokenBucket, binary bool, r io.Reader, first *bool) (bool, *transport.CloseError, error) {
	if !binary {
		s.Violation(transport.CodeProtocolError, "text message (archenet's messages are binary)")
		return false, nil, nil
	}
	var kind [1]byte
	if n, _ := io.ReadFull(r, kind[:]); n == 0 {
		s.Violation(transport.CodeProtocolError, "empty message")
		return false, nil, nil
	}
	switch kind[0] {
	case kindMessage:
		limit := s.MessageLimit(*first)
		b, err := readLimited(r, limit)
		if errors.Is(err, errTooLarge) {
			what := "message"
			if *first {
				what = "handshake message"
			}
			s.Violation(transport.CodeMessageTooLarge, fmt.Sprintf("%s exceeds the maximum of %d bytes", what, limit))
			return false, nil, nil
		}
		if err != nil {
			return false, nil, err
		}
		if !s.TakeMessage(b, *first) {
			return false, nil, nil
		}
		*first = false
	case kindDatagram:
		b, err := readLimited(r, MaxDatagramPayload)
		if errors.Is(err, errTooLarge) {
			s.Violation(transport.CodeProtocolError, fmt.Sprintf("datagram exceeds the maximum of %d bytes", MaxDatagramPayload))
			return false, nil, nil
		}
		if err != nil {
			return false, nil, err
		}
		if !s.TakeDatagram(lim, b, MaxDatagramPayload) {
			return false, nil, nil
		}
	case kindClose:
		b, err := readLimited(r, 2+transport.MaxReasonLen)
		if err != nil && !errors.Is(err, errTooLarge) {
			return false, nil, err
		}
		code, reason, perr := parseClose(b)
		if err != nil || perr != nil {
			s.Violation(transport.CodeProtocolError, "malformed close message")
			return false, nil, nil
		}
		return false, &transport.CloseError{Code: code, Reason: reason, Remote: true}, nil
	default:
		s.Violation(transport.CodeProtocolError, fmt.Sprintf("message of unknown kind 0x%02x", kind[0]))
		return false, nil, nil
	}
	return true, nil, nil
}

// ended records why reading ended (the socket's end) and ends the
// connection.
func (k *Conn) ended(err error) {
	k.mu.Lock()
	if k.cause == nil {
		k.cause = err
	}
	k.mu.Unlock()
	k.cancel()
}

// watch carries out the first close request and ends the connection: the
// reliable messages already sent go first (for at most closeLinger), then the
// close message, and the socket closes once the peer has closed its end (or
// after closeLinger). The WebSocket's own close handshake is not awaited (it
// may take seconds); the close message carries code and reason.
func (k *Conn) watch() {
	if r, ok := k.core.AwaitClose(); ok {
		deadline := time.Now().Add(closeLinger)
		for k.core.Stats(0).MessageBacklog > 0 && time.Now().Before(deadline) && k.ctx.Err() == nil {
			time.Sleep(time.Millisecond) // (the outbox's writer drains it)
		}
		ctx, cancel := context.WithDeadline(context.Background(), deadline.Add(closeLinger))
		_ = k.ws.write(ctx, appendClose(nil, r.Code, r.Reason))
		cancel()
		t := time.NewTimer(closeLinger)
		select {
		case <-k.readDone:
		case <-t.C:
		}
		t.Stop()
	}
	k.cancel()
	k.ws.closeNow()
	k.core.Stop()
	err := k.closeError()
	if k.onClose != nil {
		k.onClose(k)
	}
	k.core.End(err)
}

// closeError is why the connection ended: the close this end asked for if
// it did first, else the one the peer announced, else the socket's end.
func (k *Conn) closeError() *transport.CloseError {
	if local := k.core.Local(); local != nil {
		return local
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.remCl != nil {
		return k.remCl
	}
	return closeErrorOf(k.cause)
}

// closedErr returns the close error if the connection is closing or
// closed, else nil.
func (k *Conn) closedErr() error {
	select {
	case <-k.core.Done():
		return k.Err()
	default:
	}
	if k.core.Local() == nil && k.ctx.Err() == nil {
		return nil
	}
	return k.closeError()
}

// connWriter is the blocking send side the Outbox drains (its datagram and
// message writers are two goroutines, each with its buffer).
type connWriter struct{ k *Conn }

func (w connWriter) WriteDatagram(b []byte) error {
	w.k.dgBuf = append(append(w.k.dgBuf[:0], kindDatagram), b...)
	return w.k.ws.writeDatagram(w.k.ctx, w.k.dgBuf)
}

func (w connWriter) WriteMessage(b []byte, deadline time.Time) error {
	ctx, cancel := context.WithDeadline(w.k.ctx, deadline)
	defer cancel()
	w.k.msgBuf = append(append(w.k.msgBuf[:0], kindMessage), b...)
	err := w.k.ws.write(ctx, w.k.msgBuf)
	if len(w.k.msgBuf) > 64<<10 {
		w.k.msgBuf = nil // (a large message's buffer is not kept)
	}
	return err
}

// SendDatagram implements [transport.Conn]. It never blocks: the datagram
// waits in a queue of Config.DatagramSendQueueLen, the oldest dropped when it
// is full.
func (k *Conn) SendDatagram(b []byte) error {
	if err := k.closedErr(); err != nil {
		return err
	}
	if len(b) > MaxDatagramPayload {
		return &transport.DatagramTooLargeError{Size: len(b), Max: MaxDatagramPayload}
	}
	return k.core.SendDatagram(b)
}

// ReceiveDatagram implements [transport.Conn].
func (k *Conn) ReceiveDatagram(ctx context.Context) ([]byte, error) {
	return k.core.ReceiveDatagram(ctx)
}

// PollDatagram implements [transport.Conn].
func (k *Conn) PollDatagram() ([]byte, bool) { return k.core.PollDatagram() }

// MaxDatagramSize implements [transport.Conn]: [MaxDatagramPayload].
func (k *Conn) MaxDatagramSize() int { return MaxDatagramPayload }

// SendMessage implements [transport.Conn]. It never blocks: messages wait in
// a backlog bounded by Config.MaxSendBacklog and SendBacklogTimeout, past
// either of which the connection closes with transport.CodeSendBacklog.
func (k *Conn) SendMessage(b []byte) error { return k.core.SendMessage(b) }

// ReceiveMessage implements [transport.Conn].
func (k *Conn) ReceiveMessage(ctx context.Context) ([]byte, error) {
	return k.core.ReceiveMessage(ctx)
}

// PollMessage implements [transport.Conn].
func (k *Conn) PollMessage() ([]byte, bool) { return k.core.PollMessage() }

// MaxMessageSize implements [transport.Conn].
func (k *Conn) MaxMessageSize() int { return k.core.MaxMessageSize() }

// StartClose implements [transport.CloseStarter]: the connection's own
// goroutine carries the close out (the peer sees code and reason), and Done
// is closed when it is complete, within about half a second.
func (k *Conn) StartClose(code transport.CloseCode, reason string) { k.core.RequestClose(code, reason) }

// CloseWithReason implements [transport.Conn]; the reason is truncated to
// transport.MaxReasonLen bytes. It returns once the connection's goroutines
// have exited.
func (k *Conn) CloseWithReason(code transport.CloseCode, reason string) error {
	return k.core.CloseWait(code, reason)
}

// Close implements [transport.Conn].
func (k *Conn) Close() error { return k.CloseWithReason(transport.CodeNormal, "") }

// Done implements [transport.Conn].
func (k *Conn) Done() <-chan struct{} { return k.core.Done() }

// Err implements [transport.Conn].
func (k *Conn) Err() error { return k.core.Err() }

// RemoteAddr implements [transport.Conn].
func (k *Conn) RemoteAddr() net.Addr { return k.remote }

// LocalAddr implements [transport.Conn].
func (k *Conn) LocalAddr() net.Addr { return k.local }

// Stats implements [transport.Conn]. RTT is 0: a WebSocket does not measure
// it (replication's input clock then relies on the server's feedback).
func (k *Conn) Stats() transport.Stats { return k.core.Stats(0) }

// addr is a net.Addr of a socket this package knows only by name.
type addr struct{ network, s string }

func (a addr) Network() string { return a.network }
func (a addr) String() string  { return a.s }

// closeLog logs a close this end decides on because of the peer.
func closeLog(set *connio.Settings, remote net.Addr) func(transport.CloseCode, string) {
	if set.Logger == nil {
		return nil
	}
	return set.CloseLog("archenet/websocket: closing", remote)
}

// socket is the WebSocket under a Conn: coder/websocket natively
// (socket_native.go), the browser's WebSocket in js/wasm (socket_js.go).
type socket interface {
	// next waits for the next message: whether it is binary, and a reader
	// of it (valid until the next call).
	next(ctx context.Context) (binary bool, r io.Reader, err error)
	// write sends one binary message, waiting (until ctx ends) for the
	// socket to take it.
	write(ctx context.Context, b []byte) error
	// writeDatagram sends a datagram's message, or drops it when the socket
	// is backed up (the browser's: it cannot wait).
	writeDatagram(ctx context.Context, b []byte) error
	// closeNow closes the socket at once.
	closeNow()
	// setReadLimit bounds a message's size.
	setReadLimit(n int)
}
