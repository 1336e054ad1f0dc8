package sim

import (
	"errors"
	"fmt"
	"time"
)

// Conditions describe one direction of a simulated link. The zero value is a perfect
// link: no delay (delivery at the next Advance), no loss, unlimited bandwidth, 1200-byte MTU.
//
// Reliable messages see latency, jitter, bandwidth and loss; a lost transmission delays
// the message by one retransmission timeout (see [Link]) and head-of-line blocks the
// messages after it. Duplication, reordering, tail drop and the MTU only concern datagrams.
type Conditions struct {
	// Latency is the one-way base delay. Zero: none.
	Latency time.Duration
	// Jitter adds a delay drawn uniformly from [0, Jitter] to each packet. Zero: none.
	// Jitter alone can reorder datagrams; reliable messages stay in order.
	Jitter time.Duration
	// Loss is the probability that a datagram, or one transmission of a reliable message,
	// is lost independently of the others (in the Gilbert–Elliott good state, if Burst is set).
	// Zero: no independent loss.
	Loss float64
	// Burst enables bursty (Gilbert–Elliott) loss. Zero value: disabled.
	Burst GilbertElliott
	// Duplicate is the probability that a datagram is delivered twice (the copy gets its
	// own jitter). Zero: never.
	Duplicate float64
	// Reorder is the probability that a datagram is held back by ReorderDelay, so that
	// later datagrams overtake it. Zero: never.
	Reorder float64
	// ReorderDelay is the extra delay of a reordered datagram. Zero: Latency + 10ms.
	ReorderDelay time.Duration
	// Bandwidth caps the link at this many payload bytes per second; packets queue behind
	// each other at the bottleneck. Zero: unlimited.
	Bandwidth int
	// QueueBytes bounds the bottleneck queue when Bandwidth is set: a datagram that does
	// not fit is tail-dropped (reliable messages wait instead). Zero: 64 KiB.
	QueueBytes int
	// MTU is the largest datagram payload; SendDatagram fails with a
	// *transport.DatagramTooLargeError above it. Zero: 1200.
	MTU int
}

// GilbertElliott is the two-state bursty loss model: the link flips between a good and
// a bad state before each packet, and loses packets in the bad state with probability
// LossBad (in the good state, Conditions.Loss applies). The mean burst length is
// 1/PBadToGood packets.
type GilbertElliott struct {
	// PGoodToBad is the per-packet probability of entering the bad state. Zero: the model is off.
	PGoodToBad float64
	// PBadToGood is the per-packet probability of leaving the bad state. Zero: the bad
	// state is never left once entered.
	PBadToGood float64
	// LossBad is the loss probability in the bad state. Zero: 1 (every packet lost).
	LossBad float64
}

// ErrInvalidConditions is wrapped by the errors of [Network.Dial] and
// [Conn.SetConditions] for a negative duration, size or rate, or a
// probability outside [0, 1] (or NaN).
var ErrInvalidConditions = errors.New("sim: invalid link conditions")

// check returns an error naming the first invalid setting of c.
func (c Conditions) check() error {
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"Latency", c.Latency}, {"Jitter", c.Jitter}, {"ReorderDelay", c.ReorderDelay}} {
		if d.v < 0 {
			return fmt.Errorf("%w: %s %v is negative", ErrInvalidConditions, d.name, d.v)
		}
	}
	for _, p := range []struct {
		name string
		v    float64
	}{{"Loss", c.Loss}, {"Duplicate", c.Duplicate}, {"Reorder", c.Reorder},
		{"Burst.PGoodToBad", c.Burst.PGoodToBad}, {"Burst.PBadToGood", c.Burst.PBadToGood}, {"Burst.LossBad", c.Burst.LossBad}} {
		if !(p.v >= 0 && p.v <= 1) {
			return fmt.Errorf("%w: %s %v is not a probability", ErrInvalidConditions, p.name, p.v)
		}
	}
	if c.Bandwidth < 0 || c.QueueBytes < 0 || c.MTU < 0 {
		return fmt.Errorf("%w: negative Bandwidth %d, QueueBytes %d or MTU %d", ErrInvalidConditions, c.Bandwidth, c.QueueBytes, c.MTU)
	}
	return nil
}

// check returns an error naming the first invalid setting of l.
func (l Link) check() error {
	if err := l.Up.check(); err != nil {
		return fmt.Errorf("link up: %w", err)
	}
	if err := l.Down.check(); err != nil {
		return fmt.Errorf("link down: %w", err)
	}
	if l.DatagramQueueLen < 0 || l.MaxMessageSize < 0 {
		return fmt.Errorf("%w: negative DatagramQueueLen %d or MaxMessageSize %d", ErrInvalidConditions, l.DatagramQueueLen, l.MaxMessageSize)
	}
	return nil
}

// Link configures a connection made by [Network.Dial].
type Link struct {
	// Up is the client → server direction, Down the server → client direction.
	Up, Down Conditions
	// IdleTimeout closes both ends with transport.CodeTimeout once the link has been down
	// (see [Conn.SetLinkDown]) for this long. Zero: 30s. Negative: never.
	IdleTimeout time.Duration
	// DatagramQueueLen bounds each end's datagram receive queue; datagrams arriving at a
	// full queue are dropped and counted in Stats.DatagramsDropped. Zero: 1024.
	DatagramQueueLen int
	// MaxMessageSize is the largest reliable message. Zero: 1 MiB.
	MaxMessageSize int
}

// Retransmission timeout: a lost transmission of a reliable message costs
// max(2 × base RTT, minRTO), where base RTT = Up.Latency + Down.Latency. A message is
// retransmitted at most MaxRetransmissions times; model a total outage with
// [Conn.SetLinkDown] instead of Loss = 1.
const (
	minRTO             = 20 * time.Millisecond
	MaxRetransmissions = 32
)

const (
	defaultMTU            = 1200
	defaultQueueBytes     = 64 << 10
	defaultIdleTimeout    = 30 * time.Second
	defaultDatagramQueue  = 1024
	defaultMaxMessageSize = 1 << 20
)

func (c Conditions) mtu() int {
	if c.MTU <= 0 {
		return defaultMTU
	}
	return c.MTU
}

func (c Conditions) queueBytes() int {
	if c.QueueBytes <= 0 {
		return defaultQueueBytes
	}
	return c.QueueBytes
}

func (c Conditions) reorderDelay() time.Duration {
	if c.ReorderDelay <= 0 {
		return c.Latency + 10*time.Millisecond
	}
	return c.ReorderDelay
}

// LinkStats counts what happened to the packets sent in one direction of a link.
type LinkStats struct {
	Datagrams       uint64 // datagrams handed to the link (after the MTU check)
	Delivered       uint64 // datagrams and copies that reached the receiving end
	Lost            uint64 // datagrams lost (independent or burst loss)
	Duplicated      uint64 // extra copies scheduled
	Reordered       uint64 // datagrams held back by ReorderDelay
	QueueDropped    uint64 // datagrams tail-dropped at the bandwidth bottleneck
	LinkDownDropped uint64 // datagrams dropped because the link was down
	Messages        uint64 // reliable messages handed to the link
	Retransmissions uint64 // simulated retransmissions of reliable messages
}
