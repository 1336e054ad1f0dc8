package quic

import (
	"crypto/tls"
	"log/slog"
	"time"

	quicgo "github.com/quic-go/quic-go"

	"github.com/archenet/archenet/transport/internal/connio"
	"github.com/archenet/archenet/transport/internal/quicnet"
)

// ALPN is the TLS application protocol archenet negotiates.
const ALPN = "archenet/1"

// Config configures Listen and Dial. The zero value is usable for Dial to a server with
// a publicly trusted certificate; Listen needs TLS with a certificate. A nil *Config is
// the zero value.
type Config struct {
	// TLS is the TLS configuration: for Listen it must hold the server certificate, for
	// Dial it holds the roots to trust (see [DevCert.ClientTLS]). It is cloned; NextProtos
	// is set to [ALPN] and MinVersion to TLS 1.3. Nil: for Dial, the system roots; for
	// Listen, an error. Certificate verification is on unless InsecureSkipVerify is set.
	TLS *tls.Config

	// InsecureSkipVerify makes Dial accept ANY server certificate. DANGER: this disables
	// server authentication entirely and allows a man-in-the-middle to read and alter all
	// traffic, including handshake tokens. Only for throwaway local experiments; use
	// [GenerateDevCert] and [DevCert.ClientTLS] instead, even in development.
	// Zero: verification on.
	InsecureSkipVerify bool

	// HandshakeTimeout bounds the QUIC handshake plus opening the message stream.
	// Zero: 10s.
	HandshakeTimeout time.Duration
	// IdleTimeout closes the connection with transport.CodeTimeout after this long without
	// network activity (the smaller of both peers' values applies). Zero: 30s.
	IdleTimeout time.Duration
	// KeepAlivePeriod is how often a keep-alive is sent while otherwise idle.
	// Zero: IdleTimeout/3. Negative: no keep-alives.
	KeepAlivePeriod time.Duration

	// MaxMessageSize bounds reliable messages, sent and received; a peer announcing a
	// larger one is disconnected with transport.CodeMessageTooLarge. Zero: 1 MiB.
	MaxMessageSize int
	// MessageQueueLen bounds received messages waiting for PollMessage/ReceiveMessage;
	// when full, reading from the stream pauses (QUIC flow control then stalls the peer).
	// Zero: 1024.
	MessageQueueLen int
	// MessageQueueBytes bounds the bytes of received messages waiting, like MessageQueueLen.
	// Zero: 4 MiB.
	MessageQueueBytes int
	// DatagramQueueLen bounds received datagrams waiting for PollDatagram/ReceiveDatagram;
	// datagrams arriving at a full queue are dropped and counted in Stats.DatagramsDropped.
	// Zero: 1024.
	DatagramQueueLen int

	// DatagramRateLimit is the sustained number of datagrams per second the peer may send;
	// a peer exceeding it (beyond DatagramBurst) is disconnected with transport.CodeFlood.
	// Zero: 2000. Negative: unlimited.
	DatagramRateLimit int
	// DatagramBurst is the token bucket's depth: how many datagrams above the sustained
	// rate are tolerated at once. Zero: DatagramRateLimit (one second's worth).
	DatagramBurst int

	// DatagramSendQueueLen bounds datagrams waiting to be handed to QUIC (whose own send
	// queue holds 32 and fills when the path stalls); when full, the oldest waiting
	// datagram is dropped and counted in Stats.DatagramsSendDropped, so SendDatagram
	// never blocks. Zero: 64.
	DatagramSendQueueLen int
	// MaxSendBacklog bounds the bytes of reliable messages waiting for the peer's flow
	// control (beyond what QUIC itself buffers); a peer that lets it grow further is
	// disconnected with transport.CodeSendBacklog, so SendMessage never blocks.
	// Zero: 4 MiB.
	MaxSendBacklog int
	// SendBacklogTimeout bounds how long a reliable message may wait for the peer's flow
	// control before the connection closes with transport.CodeSendBacklog. Zero: 10 s.
	SendBacklogTimeout time.Duration

	// AcceptBacklog bounds connections that finished their handshake but were not yet
	// accepted; more are closed with transport.CodeRejected. Listen only. Zero: 64.
	AcceptBacklog int

	// HandshakeWindow is a connection's QUIC flow-control window (per stream and per
	// connection) until this end sends a transport.Welcome: what a peer that has not been
	// welcomed can make this end buffer. The windows then grow with QUIC's auto-tuning.
	// At least transport.MaxHandshakeMessageSize+16. Listen only. Zero: 32 KiB.
	HandshakeWindow int
	// MaxPendingPerAddress bounds the connections from one source address (an IPv4
	// address, or an IPv6 /64) that are open and not welcomed (this end has not sent a
	// transport.Welcome); more are refused at the QUIC handshake's first packet, before
	// any TLS work. Listen only. Zero: 16. Negative: no bound (LAN play behind one
	// address).
	MaxPendingPerAddress int
	// RetryAbove is the number of pending connections (as for MaxPendingPerAddress, from
	// every source) above which new connections must first prove their source address
	// with a QUIC Retry (one round trip more), so that spoofed sources cannot hold
	// handshake state. Listen only. Zero: 64. Negative: never.
	RetryAbove int
	// NewConnectionRate bounds the new connections a second, from every source: more
	// are refused at their first packet, before any TLS work (a flood of handshakes
	// costs the server little but the refusals), and while it is half spent new
	// connections must first prove their source address with a QUIC Retry. A second's
	// worth may come at once. Listen only. Zero: 256. Negative: no limit.
	NewConnectionRate int
	// NewConnectionRatePerAddress bounds the new connections a second from one source
	// address (as for MaxPendingPerAddress), refused the same way; twice that may come
	// at once. Listen only. Zero: 16, or no limit if MaxPendingPerAddress is negative
	// (LAN play behind one address). Negative: no limit.
	NewConnectionRatePerAddress int

	// Logger receives every close this end decides on (flood, oversize or malformed
	// frames, send backlog, failed connection setup), rate-limited per kind. Nil:
	// slog.Default().
	Logger *slog.Logger

	// LocalAddr is the UDP address Dial binds. Zero: port 0 on 127.0.0.1 (or [::1]) if the
	// server address is a loopback address, else on all interfaces.
	LocalAddr string
}

// resolve returns a copy of c (nil: the zero Config) for the settings only
// this package has, and the settings every transport has with their defaults
// (read those from the Settings, not the copy), or an error naming the first
// invalid setting (a negative value where none is documented): nothing is
// clamped silently.
func (c *Config) resolve() (Config, connio.Settings, error) {
	var r Config
	if c != nil {
		r = *c
	}
	s := connio.Settings{
		HandshakeTimeout: r.HandshakeTimeout, IdleTimeout: r.IdleTimeout, KeepAlivePeriod: r.KeepAlivePeriod,
		MaxMessageSize: r.MaxMessageSize, MessageQueueLen: r.MessageQueueLen,
		MessageQueueBytes: r.MessageQueueBytes, DatagramQueueLen: r.DatagramQueueLen,
		DatagramRateLimit: r.DatagramRateLimit, DatagramBurst: r.DatagramBurst,
		DatagramSendQueueLen: r.DatagramSendQueueLen, MaxSendBacklog: r.MaxSendBacklog, SendBacklogTimeout: r.SendBacklogTimeout,
		AcceptBacklog: r.AcceptBacklog, HandshakeWindow: r.HandshakeWindow,
		MaxPendingPerAddress: r.MaxPendingPerAddress, RetryAbove: r.RetryAbove,
		NewConnectionRate: r.NewConnectionRate, NewConnectionRatePerAddress: r.NewConnectionRatePerAddress,
	}
	err := s.Resolve("quic", r.Logger)
	return r, s, err
}

// quicConfig is quic-go's configuration of a connection: the client opens
// exactly one bidirectional stream and nothing else is allowed.
func quicConfig(s *connio.Settings, server bool) *quicgo.Config {
	qc := quicnet.Config(s, server)
	qc.MaxIncomingStreams, qc.MaxIncomingUniStreams = -1, -1
	if server {
		qc.MaxIncomingStreams = 1
	}
	// Let the stream window hold at least one maximal message plus its prefix.
	if w := uint64(s.MaxMessageSize) + 16; w > 6<<20 {
		qc.MaxStreamReceiveWindow = w
		qc.MaxConnectionReceiveWindow = w + 1<<20
	}
	return qc
}
