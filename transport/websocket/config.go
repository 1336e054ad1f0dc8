//go:build !js

package websocket

import (
	"crypto/tls"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/archenet/archenet/transport/internal/connio"
)

// Config configures [Listen], [NewListener] and [Dial]. A nil *Config is the
// zero value, and every field says what its zero value means. Fields marked
// "server" are ignored by Dial.
type Config struct {
	// TLS, for Listen, serves wss:// with its certificate (server); nil:
	// plain ws:// (behind a TLS-terminating proxy, or on a LAN). For a
	// native Dial of a wss:// URL it holds the roots to trust; nil: the
	// system's. A browser uses its own.
	TLS *tls.Config
	// Path is the URL path Listen serves sessions at (server). Empty:
	// [DefaultPath].
	Path string

	// AllowedOrigins lists the page origins that may open sessions, besides
	// the same origin (a page whose origin has the endpoint's host and port).
	// Requests without an Origin header (native clients) are always allowed;
	// a browser always sends one. "*" allows every origin. Server. Empty:
	// same origin only.
	AllowedOrigins []string
	// CheckOrigin, if set, replaces the AllowedOrigins policy. Server.
	CheckOrigin func(r *http.Request) bool

	// HandshakeTimeout bounds Dial and, for Listen, reading a request's
	// headers. Zero: 10s.
	HandshakeTimeout time.Duration

	// MaxMessageSize bounds reliable messages, sent and received; a peer
	// sending a larger one is closed with transport.CodeMessageTooLarge.
	// Zero: 1 MiB.
	MaxMessageSize int
	// MessageQueueLen and MessageQueueBytes bound received messages waiting
	// for PollMessage/ReceiveMessage (reading pauses when full). Zero: 1024,
	// 4 MiB.
	MessageQueueLen, MessageQueueBytes int
	// DatagramQueueLen bounds received datagrams waiting; more are dropped
	// (Stats.DatagramsDropped). Zero: 1024.
	DatagramQueueLen int
	// DatagramRateLimit is the sustained datagrams per second a peer may
	// send; faster (beyond DatagramBurst) closes it with
	// transport.CodeFlood. Zero: 2000. Negative: unlimited.
	DatagramRateLimit int
	// DatagramBurst is the token bucket's depth. Zero: DatagramRateLimit.
	DatagramBurst int
	// DatagramSendQueueLen bounds datagrams waiting for the socket; the
	// oldest is dropped when full (Stats.DatagramsSendDropped). Zero: 64.
	DatagramSendQueueLen int
	// MaxSendBacklog and SendBacklogTimeout bound reliable messages waiting
	// for the socket; past either the connection closes with
	// transport.CodeSendBacklog. Zero: 4 MiB, 10s.
	MaxSendBacklog     int
	SendBacklogTimeout time.Duration

	// AcceptBacklog bounds connections set up but not yet accepted; more
	// are closed with transport.CodeRejected. Server. Zero: 64.
	AcceptBacklog int
	// MaxPendingSessions bounds the connections that are open and have not
	// been welcomed (this end has sent no transport.Welcome); more requests
	// are answered 503 before the upgrade. Server. Zero: 256.
	MaxPendingSessions int
	// MaxPendingPerAddress bounds such connections from one source address
	// (an IPv4 address, or an IPv6 /64). Server. Zero: 16. Negative: no
	// bound.
	MaxPendingPerAddress int
	// NewConnectionRate bounds new connections a second from every source
	// (a second's worth at once), NewConnectionRatePerAddress from one
	// source (twice that at once); more are answered 503. Server. Zero: 256
	// and 16 (none per address if MaxPendingPerAddress is negative).
	// Negative: no limit.
	NewConnectionRate, NewConnectionRatePerAddress int

	// Logger receives every close this end decides on and every refused
	// request, rate-limited per kind. Nil: slog.Default().
	Logger *slog.Logger
}

// defaultPendingSessions is MaxPendingSessions' default.
const defaultPendingSessions = 256

// resolve returns a copy of c with its defaults and the settings every
// transport has, or an error for a setting that cannot work.
func (c *Config) resolve() (Config, connio.Settings, error) {
	var r Config
	if c != nil {
		r = *c
	}
	s := connio.Settings{
		HandshakeTimeout: r.HandshakeTimeout, KeepAlivePeriod: -1,
		MaxMessageSize: r.MaxMessageSize, MessageQueueLen: r.MessageQueueLen,
		MessageQueueBytes: r.MessageQueueBytes, DatagramQueueLen: r.DatagramQueueLen,
		DatagramRateLimit: r.DatagramRateLimit, DatagramBurst: r.DatagramBurst,
		DatagramSendQueueLen: r.DatagramSendQueueLen, MaxSendBacklog: r.MaxSendBacklog, SendBacklogTimeout: r.SendBacklogTimeout,
		AcceptBacklog: r.AcceptBacklog, MaxPendingPerAddress: r.MaxPendingPerAddress,
		NewConnectionRate: r.NewConnectionRate, NewConnectionRatePerAddress: r.NewConnectionRatePerAddress,
	}
	if err := s.Resolve("websocket", r.Logger); err != nil {
		return r, s, err
	}
	d := connio.Defaults{Pkg: "websocket"}
	if connio.Set(&d, "MaxPendingSessions", &r.MaxPendingSessions, defaultPendingSessions); d.Err != nil {
		return r, s, d.Err
	}
	if r.Path == "" {
		r.Path = DefaultPath
	}
	if r.Path[0] != '/' {
		return r, s, fmt.Errorf("websocket: Config.Path %q does not start with /", r.Path)
	}
	return r, s, nil
}
