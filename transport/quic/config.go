package quic

import (
	"crypto/tls"
	"fmt"
	"log/slog"
	"time"

	"github.com/archenet/archenet/transport"
	"github.com/archenet/archenet/transport/internal/admission"
	"github.com/archenet/archenet/transport/internal/connio"

	quicgo "github.com/quic-go/quic-go"
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

	// Logger receives every close this end decides on (flood, oversize or malformed
	// frames, send backlog, failed connection setup), rate-limited per kind. Nil:
	// slog.Default().
	Logger *slog.Logger

	// LocalAddr is the UDP address Dial binds. Zero: port 0 on 127.0.0.1 (or [::1]) if the
	// server address is a loopback address, else on all interfaces.
	LocalAddr string
}

const (
	defaultHandshakeTimeout = 10 * time.Second
	defaultIdleTimeout      = 30 * time.Second
	defaultMaxMessageSize   = 1 << 20
	defaultMessageQueueLen  = 1024
	defaultMessageQueueSize = 4 << 20
	defaultDatagramQueueLen = 1024
	defaultDatagramRate     = 2000
	defaultAcceptBacklog    = 64
	defaultHandshakeWindow  = 32 << 10
	defaultPendingPerAddr   = 16
	defaultRetryAbove       = 64
)

// resolve returns a copy with every zero field replaced by its default, or
// an error naming the first invalid setting (a negative value where none is
// documented): nothing is clamped silently.
func (c *Config) resolve() (Config, error) {
	var r Config
	if c != nil {
		r = *c
	}
	d := connio.Defaults{Pkg: "quic"}
	connio.Set(&d, "MaxMessageSize", &r.MaxMessageSize, defaultMaxMessageSize)
	connio.Set(&d, "MessageQueueLen", &r.MessageQueueLen, defaultMessageQueueLen)
	connio.Set(&d, "MessageQueueBytes", &r.MessageQueueBytes, defaultMessageQueueSize)
	connio.Set(&d, "DatagramQueueLen", &r.DatagramQueueLen, defaultDatagramQueueLen)
	connio.Set(&d, "AcceptBacklog", &r.AcceptBacklog, defaultAcceptBacklog)
	connio.Set(&d, "DatagramSendQueueLen", &r.DatagramSendQueueLen, transport.DefaultOutboxDatagrams)
	connio.Set(&d, "MaxSendBacklog", &r.MaxSendBacklog, transport.DefaultMaxBacklog)
	connio.Set(&d, "HandshakeWindow", &r.HandshakeWindow, defaultHandshakeWindow)
	connio.Set(&d, "HandshakeTimeout", &r.HandshakeTimeout, defaultHandshakeTimeout)
	connio.Set(&d, "IdleTimeout", &r.IdleTimeout, defaultIdleTimeout)
	connio.Set(&d, "SendBacklogTimeout", &r.SendBacklogTimeout, transport.DefaultBacklogTimeout)
	if d.Err != nil {
		return r, d.Err
	}
	// Zero is the default; negative means none or no bound (documented).
	if r.KeepAlivePeriod == 0 {
		r.KeepAlivePeriod = r.IdleTimeout / 3
	}
	if r.MaxPendingPerAddress == 0 {
		r.MaxPendingPerAddress = defaultPendingPerAddr
	}
	if r.RetryAbove == 0 {
		r.RetryAbove = defaultRetryAbove
	}
	if r.DatagramRateLimit == 0 {
		r.DatagramRateLimit = defaultDatagramRate
	}
	if connio.Set(&d, "DatagramBurst", &r.DatagramBurst, max(r.DatagramRateLimit, 1)); d.Err != nil {
		return r, d.Err
	}
	if r.Logger == nil {
		r.Logger = slog.Default()
	}
	r.Logger = slog.New(transport.RateLimit(r.Logger.Handler(), 10, time.Second))
	return r, nil
}

// checkListen reports a Listen setting no listener can work with.
func (c *Config) checkListen() error {
	if c.HandshakeWindow < transport.MaxHandshakeMessageSize+16 {
		return fmt.Errorf("quic: Config.HandshakeWindow %d cannot hold a handshake message (%d bytes and its length prefix)",
			c.HandshakeWindow, transport.MaxHandshakeMessageSize)
	}
	return nil
}

func (c *Config) quicConfig(server bool) *quicgo.Config {
	qc := &quicgo.Config{
		EnableDatagrams:      true,
		HandshakeIdleTimeout: c.HandshakeTimeout,
		MaxIdleTimeout:       c.IdleTimeout,
		// The client opens exactly one bidirectional stream; nothing else is allowed.
		MaxIncomingStreams:    -1,
		MaxIncomingUniStreams: -1,
	}
	if server {
		qc.MaxIncomingStreams = 1
		// Handshake-sized windows until this end's Welcome (package admission).
		qc.InitialStreamReceiveWindow = uint64(c.HandshakeWindow)
		qc.InitialConnectionReceiveWindow = uint64(c.HandshakeWindow)
		qc.AllowConnectionWindowIncrease = admission.AllowWindowIncrease
	}
	if c.KeepAlivePeriod > 0 {
		qc.KeepAlivePeriod = c.KeepAlivePeriod
	}
	// Let the stream window hold at least one maximal message plus its prefix.
	if w := uint64(c.MaxMessageSize) + 16; w > 6<<20 {
		qc.MaxStreamReceiveWindow = w
		qc.MaxConnectionReceiveWindow = w + 1<<20
	}
	return qc
}
