package transport

import (
	"context"
	"net"
	"time"
)

// Conn is one end of a connection between an archenet server and a client.
//
// A Conn carries two channels that the replication layer keeps apart:
//
//   - datagrams: unreliable and unordered, at most [Conn.MaxDatagramSize] bytes each,
//     used for value mutations (snapshots, input frames) that are acked by the layer above;
//   - messages: reliable and ordered, at most [Conn.MaxMessageSize] bytes each,
//     used for structural changes (spawn, despawn, component insert/remove) and the handshake.
//
// Every method is safe for concurrent use. The Poll methods never block, so a fixed-step
// game loop can drain both queues once per tick; the Receive methods block until data
// arrives, the connection closes, or ctx is done.
//
// Queued data stays readable after the connection closed: Poll and Receive return it first,
// and only then report the close (Receive returns [Conn.Err]).
type Conn interface {
	// SendDatagram sends b as one unreliable datagram. It never blocks: datagrams the
	// network cannot take at once wait in a bounded queue, and when that is full the
	// oldest waiting datagram is dropped (counted in Stats.DatagramsSendDropped), as a
	// lost packet would be. The caller may reuse b after SendDatagram returns. A payload
	// larger than MaxDatagramSize fails with a *[DatagramTooLargeError]; a closed
	// connection fails with an error for which errors.Is(err, [ErrClosed]) holds.
	SendDatagram(b []byte) error
	// ReceiveDatagram blocks until a datagram arrives. The returned slice is owned by the caller.
	ReceiveDatagram(ctx context.Context) ([]byte, error)
	// PollDatagram returns the next queued datagram, or ok=false if none is queued.
	PollDatagram() (b []byte, ok bool)
	// MaxDatagramSize is the largest datagram payload that can be sent right now.
	// It is at most 1200 bytes until path MTU discovery raises it (QUIC) and may change
	// during the connection's lifetime.
	MaxDatagramSize() int

	// SendMessage queues b as one reliable, ordered message. It never blocks: messages
	// the peer's flow control cannot take yet wait in a backlog bounded in bytes and in
	// age (Stats.MessageBacklog). A peer that lets the backlog outgrow its bound is
	// disconnected with [CodeSendBacklog], and SendMessage returns that close error
	// (errors.Is(err, [ErrClosed]) holds). The caller may reuse b after SendMessage
	// returns. A message larger than MaxMessageSize fails with a *[MessageTooLargeError]
	// and leaves the connection open.
	SendMessage(b []byte) error
	// ReceiveMessage blocks until a message arrives. The returned slice is owned by the caller.
	ReceiveMessage(ctx context.Context) ([]byte, error)
	// PollMessage returns the next queued message, or ok=false if none is queued.
	//
	// The first message a connection receives is the handshake: it may be at most
	// [MaxHandshakeMessageSize] bytes (a larger one closes the connection with
	// [CodeMessageTooLarge]), and nothing after it is read until it has been taken, so
	// an unauthenticated peer holds at most that much of the receiver's memory. A
	// server's end of transport/quic and transport/webtransport reads nothing more
	// until it has sent a [Welcome] (the flow-control window holds the rest); a server
	// speaking another protocol over them must send one before it reads on.
	PollMessage() (b []byte, ok bool)
	// MaxMessageSize is the largest message that SendMessage accepts and the peer receives.
	MaxMessageSize() int

	// CloseWithReason closes the connection; the peer sees code and reason in its
	// [Conn.Err] (with Remote set). Closing an already closed connection is a no-op that
	// returns nil.
	CloseWithReason(code CloseCode, reason string) error
	// Close is CloseWithReason(CodeNormal, "").
	Close() error
	// Done is closed when the connection is closed by either side or times out.
	Done() <-chan struct{}
	// Err is nil before Done is closed; after that it says why: a *[CloseError], for which
	// errors.Is(err, ErrClosed) holds (and errors.Is(err, ErrTimeout) for timeouts).
	Err() error

	// RemoteAddr is the address of the peer.
	RemoteAddr() net.Addr
	// LocalAddr is the address of this end.
	LocalAddr() net.Addr
	// Stats returns a snapshot of the connection's counters.
	Stats() Stats
}

// CloseStarter is implemented by a [Conn] that can begin its close without waiting for
// anything (its network stack, its goroutines, the peer). The replication server closes
// such connections on its tick; any other Conn's CloseWithReason runs on a goroutine of
// the server's, because it may wait.
type CloseStarter interface {
	// StartClose begins closing the connection with code and reason, as CloseWithReason
	// does, and returns at once; Done is closed once the close is complete. Only the
	// first close of a connection counts.
	StartClose(code CloseCode, reason string)
}

// Stats is a snapshot of a connection's counters. Counts are of payloads as the
// application sees them, without transport overhead.
type Stats struct {
	DatagramsSent         uint64
	DatagramsReceived     uint64 // delivered into the receive queue
	DatagramBytesSent     uint64
	DatagramBytesReceived uint64

	MessagesSent         uint64
	MessagesReceived     uint64
	MessageBytesSent     uint64
	MessageBytesReceived uint64

	// DatagramsDropped counts datagrams that arrived but were dropped because the bounded
	// receive queue was full (the application did not drain it fast enough).
	DatagramsDropped uint64
	// DatagramsSendDropped counts datagrams SendDatagram accepted but dropped before
	// they reached the network: the oldest of a full send queue (the path could not
	// carry them) or, rarely, ones the path's maximum payload had shrunk below.
	DatagramsSendDropped uint64
	// MessageBacklog is the number of bytes of reliable messages sent but still waiting
	// for the peer's flow control (a gauge, not a counter).
	MessageBacklog int

	// RTT is the smoothed round-trip time where known, 0 if unknown.
	RTT time.Duration
}

// Listener accepts incoming connections.
type Listener interface {
	// Accept blocks until a connection is ready, the listener is closed, or ctx is done.
	Accept(ctx context.Context) (Conn, error)
	// PollAccept returns the next ready connection, or ok=false if none is ready.
	PollAccept() (c Conn, ok bool)
	// Close stops accepting and closes every connection the listener produced, with
	// CodeNormal. Accept then fails with an error for which errors.Is(err, ErrClosed) holds.
	Close() error
	// Addr is the address the listener accepts connections on.
	Addr() net.Addr
}

// HelloListener is a [Listener] whose connections come with their first message (the
// client's Hello) already read: a host of many matches reads it to route each connection
// to its match (package replication/host) and hands both on. The replication server
// takes connections from PollAcceptHello instead of PollAccept when its listener has it,
// and judges the Hello it was given.
type HelloListener interface {
	Listener
	// PollAcceptHello returns the next ready connection and the first message it
	// received (owned by the caller), or ok=false if none is ready.
	PollAcceptHello() (c Conn, hello []byte, ok bool)
}
