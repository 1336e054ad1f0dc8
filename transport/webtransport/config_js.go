//go:build js && wasm

package webtransport

import (
	"time"

	"github.com/archenet/archenet/transport/internal/connio"
)

// Config configures the browser's [Dial]. A nil *Config is the zero value, and every
// field says what its zero value means. (Native builds have more fields: TLS, the
// server's origin policy, flood limits; a page has no use for them, and leaving them
// out keeps crypto/tls and net/http out of the WebAssembly binary.)
type Config struct {
	// CertHashes are SHA-256 hashes of server certificates to accept without a CA
	// (the browser's serverCertificateHashes): the certificate must be one of them, be
	// ECDSA P-256 and be valid for at most 14 days. Empty: the browser verifies the
	// certificate against its CAs.
	CertHashes []CertHash

	// HandshakeTimeout bounds opening the session and the message stream. Zero: 10s.
	HandshakeTimeout time.Duration

	// MaxMessageSize bounds reliable messages, sent and received; a server announcing
	// a larger one is disconnected with transport.CodeMessageTooLarge. Zero: 1 MiB.
	MaxMessageSize int
	// MessageQueueLen bounds received messages waiting for PollMessage/ReceiveMessage;
	// when full, reading from the stream pauses. Zero: 1024.
	MessageQueueLen int
	// MessageQueueBytes bounds the bytes of received messages waiting. Zero: 4 MiB.
	MessageQueueBytes int
	// DatagramQueueLen bounds received datagrams waiting for PollDatagram; arrivals at a
	// full queue are dropped (Stats.DatagramsDropped). It is also the browser's
	// incomingHighWaterMark. Zero: 1024.
	DatagramQueueLen int

	// DatagramSendQueueLen bounds datagrams waiting for the browser's writer; when full,
	// the oldest is dropped (Stats.DatagramsSendDropped). Zero: 64.
	DatagramSendQueueLen int
	// MaxSendBacklog bounds the bytes of reliable messages waiting for the stream's
	// writer; past it the session closes with transport.CodeSendBacklog. Zero: 4 MiB.
	MaxSendBacklog int
	// SendBacklogTimeout bounds how long a reliable message may wait for the writer.
	// Zero: 10s.
	SendBacklogTimeout time.Duration
}

// resolve returns a copy of c (nil: the zero Config) and the settings every
// transport has, with their defaults (read those from the Settings, not the copy), or
// an error naming the first negative setting.
func (c *Config) resolve() (Config, connio.Settings, error) {
	var r Config
	if c != nil {
		r = *c
	}
	s := connio.Settings{
		HandshakeTimeout: r.HandshakeTimeout,
		MaxMessageSize:   r.MaxMessageSize, MessageQueueLen: r.MessageQueueLen,
		MessageQueueBytes: r.MessageQueueBytes, DatagramQueueLen: r.DatagramQueueLen,
		DatagramSendQueueLen: r.DatagramSendQueueLen, MaxSendBacklog: r.MaxSendBacklog, SendBacklogTimeout: r.SendBacklogTimeout,
	}
	err := s.ResolveLimits("webtransport")
	return r, s, err
}
