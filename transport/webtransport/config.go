//go:build !js

package webtransport

import (
	"crypto/tls"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/archenet/archenet/transport/internal/connio"
)

// Config configures [Listen], [NewListener] and [Dial]. A nil *Config is the zero value,
// and every field says what its zero value means. Fields marked "server" are ignored by
// Dial, fields marked "client" by the server side.
type Config struct {
	// TLS is the server's TLS configuration (server): it must hold a certificate, or
	// GetCertificate (see [SelfSigned.GetCertificate] for a rotating self-signed one).
	// It is cloned; NextProtos is set to HTTP/3's and MinVersion to TLS 1.3. For native
	// Dial it holds the roots to trust (client); nil: the system roots, unless
	// CertHashes is set.
	TLS *tls.Config

	// CertHashes are SHA-256 hashes of server certificates to accept without a CA
	// (client), as a browser's serverCertificateHashes: the certificate must be one of
	// them, be ECDSA P-256 and be valid for at most 14 days. Empty: the certificate
	// is verified against roots (TLS) as usual.
	CertHashes []CertHash

	// Path is the URL path of the WebTransport endpoint (server, Listen only).
	// Empty: [DefaultPath].
	Path string

	// AllowedOrigins lists the page origins (e.g. "https://game.example.com",
	// "http://127.0.0.1:8080") that may open sessions, besides the same origin (a page
	// whose origin has the same host and port as the endpoint). Requests without an
	// Origin header (native clients) are always allowed; a browser always sends one.
	// "*" allows every origin. Server. Empty: same origin only.
	AllowedOrigins []string
	// CheckOrigin, if set, replaces the AllowedOrigins policy: a request is admitted
	// iff it returns true. Server. Nil: AllowedOrigins.
	CheckOrigin func(r *http.Request) bool

	// HandshakeTimeout bounds the QUIC handshake, the session request and opening the
	// message stream. Zero: 10s.
	HandshakeTimeout time.Duration
	// IdleTimeout closes the connection with transport.CodeTimeout after this long
	// without network activity. Zero: 30s.
	IdleTimeout time.Duration
	// KeepAlivePeriod is how often a keep-alive is sent while otherwise idle.
	// Zero: IdleTimeout/3. Negative: no keep-alives.
	KeepAlivePeriod time.Duration

	// MaxMessageSize bounds reliable messages, sent and received; a peer announcing a
	// larger one is disconnected with transport.CodeMessageTooLarge. Zero: 1 MiB.
	MaxMessageSize int
	// MessageQueueLen bounds received messages waiting for PollMessage/ReceiveMessage;
	// when full, reading from the stream pauses. Zero: 1024.
	MessageQueueLen int
	// MessageQueueBytes bounds the bytes of received messages waiting. Zero: 4 MiB.
	MessageQueueBytes int
	// DatagramQueueLen bounds received datagrams waiting for PollDatagram/ReceiveDatagram;
	// datagrams arriving at a full queue are dropped (Stats.DatagramsDropped). Zero: 1024.
	DatagramQueueLen int

	// DatagramRateLimit is the sustained number of datagrams per second the peer may
	// send; a peer exceeding it (beyond DatagramBurst) is disconnected with
	// transport.CodeFlood. Zero: 2000. Negative: unlimited.
	DatagramRateLimit int
	// DatagramBurst is the token bucket's depth. Zero: DatagramRateLimit.
	DatagramBurst int

	// DatagramSendQueueLen bounds datagrams waiting to be sent; when full, the oldest
	// waiting one is dropped (Stats.DatagramsSendDropped), so SendDatagram never
	// blocks. Zero: 64.
	DatagramSendQueueLen int
	// MaxSendBacklog bounds the bytes of reliable messages waiting for the peer's flow
	// control; past it the connection closes with transport.CodeSendBacklog.
	// Zero: 4 MiB.
	MaxSendBacklog int
	// SendBacklogTimeout bounds how long a reliable message may wait for the peer's flow
	// control before the connection closes with transport.CodeSendBacklog. Zero: 10s.
	SendBacklogTimeout time.Duration

	// AcceptBacklog bounds connections that are set up but not yet accepted; more are
	// closed with transport.CodeRejected. Server. Zero: 64.
	AcceptBacklog int
	// MaxPendingSessions bounds sessions between their request and a complete setup
	// (message stream opened, preamble read); further requests are answered 503 before
	// any session state exists. Server. Zero: 64.
	MaxPendingSessions int

	// HandshakeWindow is a connection's QUIC flow-control window (per stream and per
	// connection) until this end sends a transport.Welcome: what a peer that has not
	// been welcomed can make this end buffer (HTTP/3's control streams, the session
	// request and the archenet handshake share it). The windows then grow with QUIC's
	// auto-tuning. At least transport.MaxHandshakeMessageSize+16. Listen only.
	// Zero: 32 KiB.
	HandshakeWindow int
	// MaxPendingPerAddress bounds the connections from one source address (an IPv4
	// address, or an IPv6 /64) that are open and not welcomed (this end has not sent a
	// transport.Welcome); more are refused at the QUIC handshake's first packet, before
	// any TLS work. Listen only. Zero: 16. Negative: no bound.
	MaxPendingPerAddress int
	// RetryAbove is the number of pending connections (as for MaxPendingPerAddress,
	// from every source) above which new connections must first prove their source
	// address with a QUIC Retry. Listen only. Zero: 64. Negative: never.
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

	// Logger receives every close this end decides on and every refused session,
	// rate-limited per kind. Nil: slog.Default().
	Logger *slog.Logger
}

// defaultPendingSessions is MaxPendingSessions' default.
const defaultPendingSessions = 64

// resolve returns a copy of c (nil: the zero Config) for the settings only this
// package has, with their defaults, and the settings every transport has with theirs
// (read those from the Settings, not the copy), or an error for a setting that cannot
// work.
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
	if err := s.Resolve("webtransport", r.Logger); err != nil {
		return r, s, err
	}
	d := connio.Defaults{Pkg: "webtransport"}
	if connio.Set(&d, "MaxPendingSessions", &r.MaxPendingSessions, defaultPendingSessions); d.Err != nil {
		return r, s, d.Err
	}
	if r.Path == "" {
		r.Path = DefaultPath
	}
	if r.Path[0] != '/' {
		return r, s, fmt.Errorf("webtransport: Config.Path %q does not start with /", r.Path)
	}
	return r, s, nil
}
