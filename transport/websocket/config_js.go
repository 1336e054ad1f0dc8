//go:build js

package websocket

import (
	"time"

	"github.com/archenet/archenet/transport/internal/connio"
)

// Config configures [Dial] in a page (the browser's WebSocket has its own
// TLS and no options; the server's settings are not here). A nil *Config is
// the zero value, and every field says what its zero value means.
type Config struct {
	// HandshakeTimeout bounds Dial. Zero: 10s.
	HandshakeTimeout time.Duration
	// MaxMessageSize bounds reliable messages, sent and received. Zero:
	// 1 MiB.
	MaxMessageSize int
	// MessageQueueLen and MessageQueueBytes bound received messages
	// waiting. Zero: 1024, 4 MiB.
	MessageQueueLen, MessageQueueBytes int
	// DatagramQueueLen bounds received datagrams waiting. Zero: 1024.
	DatagramQueueLen int
	// DatagramRateLimit and DatagramBurst bound the server's datagrams a
	// second. Zero: 2000, DatagramRateLimit. Negative: unlimited.
	DatagramRateLimit, DatagramBurst int
	// DatagramSendQueueLen bounds datagrams waiting to be sent. Zero: 64.
	DatagramSendQueueLen int
	// MaxSendBacklog and SendBacklogTimeout bound reliable messages waiting
	// to be sent. Zero: 4 MiB, 10s.
	MaxSendBacklog     int
	SendBacklogTimeout time.Duration
}

// resolve returns the settings with their defaults (no logger: a page
// logs nothing of its own).
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
	}
	return r, s, s.ResolveLimits("websocket")
}
