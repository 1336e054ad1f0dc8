package connio

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/archenet/archenet/transport"
)

// Settings are the settings the transports' Configs have in common, under the
// same names (transport/quic's Config and transport/webtransport's, natively
// and in the browser, document them to their users); a Config's resolve
// copies its fields here, and Resolve gives each its default. A setting a
// Config does not have (the browser's has no IdleTimeout, flood limit or
// listener bounds) stays zero there and gets its default, unused.
type Settings struct {
	HandshakeTimeout time.Duration
	IdleTimeout      time.Duration
	KeepAlivePeriod  time.Duration // negative: no keep-alives

	MaxMessageSize    int
	MessageQueueLen   int
	MessageQueueBytes int
	DatagramQueueLen  int

	DatagramRateLimit int // negative: unlimited
	DatagramBurst     int

	DatagramSendQueueLen int
	MaxSendBacklog       int
	SendBacklogTimeout   time.Duration

	AcceptBacklog        int
	HandshakeWindow      int
	MaxPendingPerAddress int // negative: no bound
	RetryAbove           int // negative: never
	// New connections a second, from everywhere and from one source;
	// negative: no limit.
	NewConnectionRate, NewConnectionRatePerAddress int

	// Logger is where a listener and a conn log: an interface, so that a
	// page's conn (whose Settings hold none) links no slog handler.
	Logger transport.Logger

	pkg string // the error prefix Resolve was given
}

// The settings' defaults (the Configs' docs say them too).
const (
	DefaultHandshakeTimeout     = 10 * time.Second
	DefaultIdleTimeout          = 30 * time.Second
	DefaultMaxMessageSize       = 1 << 20
	DefaultMessageQueueLen      = 1024
	DefaultMessageQueueBytes    = 4 << 20
	DefaultDatagramQueueLen     = 1024
	DefaultDatagramRateLimit    = 2000
	DefaultAcceptBacklog        = 64
	DefaultHandshakeWindow      = 32 << 10
	DefaultMaxPendingPerAddress = 16
	DefaultRetryAbove           = 64
	// DefaultNewConnectionRate: a second's worth may come at once.
	DefaultNewConnectionRate = 256
	// DefaultNewConnectionRatePerAddress: twice that may come at once.
	DefaultNewConnectionRatePerAddress = 16
)

// Resolve replaces every zero setting with its default, or reports the
// first setting that cannot work: a negative value where none is
// documented, named as pkg's "Config.Name" (pkg: "quic", "webtransport").
// Nothing is clamped silently. The Logger becomes log (nil: slog.Default()),
// rate-limited per message (transport.RateLimit).
func (s *Settings) Resolve(pkg string, log *slog.Logger) error {
	if err := s.ResolveLimits(pkg); err != nil {
		return err
	}
	if log == nil {
		log = slog.Default()
	}
	s.Logger = slog.New(transport.RateLimit(log.Handler(), 10, time.Second))
	return nil
}

// ResolveLimits is Resolve without the Logger, for the browser's Config: it
// has none, and a page's build then links no logging.
func (s *Settings) ResolveLimits(pkg string) error {
	s.pkg = pkg
	d := Defaults{Pkg: pkg}
	Set(&d, "HandshakeTimeout", &s.HandshakeTimeout, DefaultHandshakeTimeout)
	Set(&d, "IdleTimeout", &s.IdleTimeout, DefaultIdleTimeout)
	Set(&d, "MaxMessageSize", &s.MaxMessageSize, DefaultMaxMessageSize)
	Set(&d, "MessageQueueLen", &s.MessageQueueLen, DefaultMessageQueueLen)
	Set(&d, "MessageQueueBytes", &s.MessageQueueBytes, DefaultMessageQueueBytes)
	Set(&d, "DatagramQueueLen", &s.DatagramQueueLen, DefaultDatagramQueueLen)
	Set(&d, "DatagramSendQueueLen", &s.DatagramSendQueueLen, transport.DefaultOutboxDatagrams)
	Set(&d, "MaxSendBacklog", &s.MaxSendBacklog, transport.DefaultMaxBacklog)
	Set(&d, "SendBacklogTimeout", &s.SendBacklogTimeout, transport.DefaultBacklogTimeout)
	Set(&d, "AcceptBacklog", &s.AcceptBacklog, DefaultAcceptBacklog)
	Set(&d, "HandshakeWindow", &s.HandshakeWindow, DefaultHandshakeWindow)
	if d.Err != nil {
		return d.Err
	}
	// Zero is the default; negative means none or no bound (documented).
	if s.KeepAlivePeriod == 0 {
		s.KeepAlivePeriod = s.IdleTimeout / 3
	}
	if s.MaxPendingPerAddress == 0 {
		s.MaxPendingPerAddress = DefaultMaxPendingPerAddress
	}
	if s.RetryAbove == 0 {
		s.RetryAbove = DefaultRetryAbove
	}
	if s.NewConnectionRate == 0 {
		s.NewConnectionRate = DefaultNewConnectionRate
	}
	if s.NewConnectionRatePerAddress == 0 {
		// LAN play behind one address (no per-address bound) has no
		// per-address rate either, unless one is set.
		s.NewConnectionRatePerAddress = DefaultNewConnectionRatePerAddress
		if s.MaxPendingPerAddress < 0 {
			s.NewConnectionRatePerAddress = -1
		}
	}
	if s.DatagramRateLimit == 0 {
		s.DatagramRateLimit = DefaultDatagramRateLimit
	}
	Set(&d, "DatagramBurst", &s.DatagramBurst, max(s.DatagramRateLimit, 1))
	return d.Err
}

// CloseLog returns a [Setup].Log that logs to the Logger as msg, with remote,
// the code and the reason.
func (s *Settings) CloseLog(msg string, remote net.Addr) func(code transport.CloseCode, reason string) {
	return func(code transport.CloseCode, reason string) {
		s.Logger.Log(context.Background(), slog.LevelWarn, msg, "remote", remote, "code", code, "reason", reason)
	}
}

// CheckListen reports a setting no listener can work with (Resolve first).
func (s *Settings) CheckListen() error {
	if s.HandshakeWindow < transport.MaxHandshakeMessageSize+16 {
		return fmt.Errorf("%s: Config.HandshakeWindow %d cannot hold a handshake message (%d bytes and its length prefix)",
			s.pkg, s.HandshakeWindow, transport.MaxHandshakeMessageSize)
	}
	return nil
}

// Defaults applies the transports' rule for a config's numeric settings:
// zero takes the default, negative is an error naming the setting (where
// a negative value has a documented meaning, the caller handles the field
// itself). The first error is kept; later settings are left alone.
type Defaults struct {
	Pkg string // "quic", "webtransport": the error's prefix
	Err error
}

// Set applies the rule to setting name (*v), whose default is def.
func Set[T int | time.Duration](d *Defaults, name string, v *T, def T) {
	if d.Err != nil {
		return
	}
	if *v < 0 {
		d.Err = fmt.Errorf("%s: Config.%s %v is negative (0: the default, %v)", d.Pkg, name, *v, def)
		return
	}
	if *v == 0 {
		*v = def
	}
}
