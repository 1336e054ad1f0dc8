package replication

import (
	"context"
	"fmt"
	"iter"
	"log/slog"

	arche "github.com/mlange-42/arche/ecs"

	"github.com/archenet/archenet/components"
	"github.com/archenet/archenet/replication/bitio"
	"github.com/archenet/archenet/replication/internal/wire"
	"github.com/archenet/archenet/replication/schema"
)

// ClientEndpoint is a client's end of one message type: it sends messages
// of type T to the server and receives the server's. Get it with
// [ClientMessages]. Like the Client, it is used on the simulation
// goroutine.
type ClientEndpoint[T any] struct {
	endpoint[T]
	c *Client
}

// ClientMessages returns the client's endpoint for message type T (the same
// one on every call). T must be registered with schema.RegisterMessage.
func ClientMessages[T any](c *Client) (*ClientEndpoint[T], error) {
	p, err := messagePlan[T](c.cfg.Registry)
	if err != nil {
		return nil, err
	}
	if ep := c.msgs.eps[p.ID]; ep != nil {
		return ep.(*ClientEndpoint[T]), nil
	}
	ep := &ClientEndpoint[T]{endpoint: endpoint[T]{plan: p}, c: c}
	c.msgs.eps[p.ID] = ep
	return ep, nil
}

// Send sends m to the server with the next [Client.Send] (messages sent
// before the client joined wait for it), stamped with the newest server
// tick the client applied. Its references must name mirrors (or none). An
// error says why nothing was queued: a reference to an entity that is not
// a mirror, a message larger than a batch, or MaxQueuedMessageBytes
// waiting to go (the client is not connected, or its Send does not run).
func (e *ClientEndpoint[T]) Send(m T, d Delivery) error {
	if err := d.check(); err != nil {
		return err
	}
	c := e.c
	for _, f := range e.plan.Refs() {
		r := refAt(&m, f.Offset)
		r.ID, r.Set = components.NetID{}, false
		if r.Entity.IsZero() {
			continue
		}
		if !c.world.Alive(r.Entity) || !c.world.Has(r.Entity, c.mirrors.NetIDComponent()) {
			return fmt.Errorf("replication: %s names entity %v, which is not a mirror", e.plan.Name, r.Entity)
		}
		r.ID, r.Set = *(*components.NetID)(c.world.Get(r.Entity, c.mirrors.NetIDComponent())), true
	}
	if d == Unreliable {
		return unreliableClientMessage(&c.msgs, e.plan, &m)
	}
	return queueClientMessage(&c.msgs, e.plan, &m)
}

// Received iterates over the messages of type T the server sent, taken in
// by the last [Client.Receive].
func (e *ClientEndpoint[T]) Received() iter.Seq[Message[T]] { return e.received() }

// Handle calls fn for each message of type T the server sends, during
// [Client.Receive], in order.
func (e *ClientEndpoint[T]) Handle(fn func(Message[T])) { e.handlers = append(e.handlers, fn) }

// Client message batches are split at ClientBatchBytes of encoded messages
// (a single message may not be larger), and a client holds at most
// MaxQueuedMessageBytes of them unsent.
const (
	ClientBatchBytes      = 1024
	MaxQueuedMessageBytes = 64 << 10
)

// clientMsgs is a client's game-message state.
type clientMsgs struct {
	plans  []*schema.Plan
	idBits uint
	eps    []inbox
	lanes  []uint64
	body   bitio.Writer
	batch  wire.MessageWriter
	full   [][]byte // batches waiting for Send (without their header)
	counts []int    // their message counts
	queued int      // bytes in full and batch
	// log keeps the reliable batches sent, for a resume (bounded:
	// clientMessageLog)
	log     seatLog
	scratch []uint64
	buf     []byte
	// unreliable messages for the next datagram, its seq, and the newest
	// server tick whose section was taken
	sec        wire.SectionWriter
	seq        uint16
	newest     uint32
	newestSeen bool
	// made once: the reference resolver, and the batch's and section's
	// delivery (c, tick and n: the one being delivered)
	c       *Client
	tick    uint32
	resolve func(*components.Ref) (bool, string)
	onMsg   func(tick uint32, p *schema.Plan, lanes []uint64) error
	onSec   func(p *schema.Plan, lanes []uint64) error
	dg      []byte // the datagram with its section
}

func (m *clientMsgs) init(c *Client, reg *schema.Registry) {
	m.c = c
	m.log.max = clientMessageLog
	m.resolve = func(r *components.Ref) (bool, string) {
		if r.Set {
			r.Entity, _ = c.mirrors.Entity(r.ID)
		}
		return true, ""
	}
	m.onMsg = func(tick uint32, p *schema.Plan, lanes []uint64) error {
		m.tick = tick
		return m.onSec(p, lanes)
	}
	m.onSec = func(p *schema.Plan, lanes []uint64) error {
		if ep := m.eps[p.ID]; ep != nil {
			ep.deliver(0, m.tick, lanes, m.resolve)
		} else {
			m.c.Stats.MessagesUnhandled++
		}
		return nil
	}
	m.plans = reg.Messages()
	m.idBits = wire.IDBits(len(m.plans))
	m.eps = make([]inbox, len(m.plans))
	m.scratch = make([]uint64, wire.MaxMessageLanes(m.plans))
	m.lanes = make([]uint64, wire.MaxMessageLanes(m.plans))
}

// queueClientMessage encodes v into the batch being built.
func queueClientMessage[T any](m *clientMsgs, p *schema.Plan, v *T) error {
	lanes := m.lanes[:p.NumLanes()]
	schema.QuantizeValue(p, v, lanes)
	m.body.Reset(m.body.Bytes()[:0])
	wire.MessageBody(&m.body, p, m.idBits, lanes)
	nbits := m.body.BitLen()
	size := (nbits + 7) / 8
	if size > ClientBatchBytes {
		return fmt.Errorf("replication: %s encodes to %d bytes, more than a batch (%d)", p.Name, size, ClientBatchBytes)
	}
	if m.queued+size > MaxQueuedMessageBytes {
		return fmt.Errorf("replication: %s not sent: %d bytes of messages wait to go (the client is not connected, or Client.Send does not run)", p.Name, m.queued)
	}
	if n := m.batch.Len(); n == wire.MaxBatchMessages || (n > 0 && m.batch.Bytes()+size > ClientBatchBytes) {
		m.full = append(m.full, append([]byte(nil), m.batch.Body()...)) // (the header at Send)
		m.counts = append(m.counts, n)
		m.batch.Reset()
	}
	m.batch.Add(m.body.Bytes(), nbits)
	m.queued += size
	return nil
}

// unreliableClientMessage adds v to the next datagram's section.
func unreliableClientMessage[T any](m *clientMsgs, p *schema.Plan, v *T) error {
	lanes := m.lanes[:p.NumLanes()]
	schema.QuantizeValue(p, v, lanes)
	m.body.Reset(m.body.Bytes()[:0])
	wire.MessageBody(&m.body, p, m.idBits, lanes)
	nbits := m.body.BitLen()
	if !m.sec.Fits(nbits, true) {
		return fmt.Errorf("replication: %s not sent: the next datagram's unreliable messages are full (%d bytes)", p.Name, wire.MaxSectionLen)
	}
	m.sec.Add(m.body.Bytes(), nbits)
	return nil
}

// appendSection appends the unreliable section to datagram d (flagging it)
// if it fits max bytes; the section is spent either way (dropped rather
// than late). It returns the datagram and the messages sent.
func (m *clientMsgs) appendSection(d []byte, max int) ([]byte, int) {
	n := m.sec.Len()
	if n == 0 {
		return d, 0
	}
	m.seq++
	m.dg = m.sec.Append(append(m.dg[:0], d...), true, m.seq) // (d is the link's: not grown in place)
	m.sec.Reset()
	if len(m.dg) > max {
		return d, 0
	}
	m.dg[0] |= wire.FlagClientMessages
	return m.dg, n
}

// receiveSection takes the message section of a snapshot datagram of
// tick: none older than the newest tick's taken (the receiver refused
// duplicates before).
func (m *clientMsgs) receiveSection(c *Client, tick uint32, sec []byte) {
	if m.newestSeen && int32(tick-m.newest) < 0 {
		c.Stats.MessagesStale++
		return
	}
	m.tick = tick
	_, n, err := wire.ParseSection(sec, false, m.plans, m.scratch, m.onSec)
	if err != nil {
		c.Stats.MessagesDropped++
		return
	}
	m.newest, m.newestSeen = tick, true
	c.Stats.MessagesIn += uint64(n)
}

// send sends the waiting batches with tick through send.
func (m *clientMsgs) send(tick uint32, send func([]byte) error) error {
	for len(m.full) > 0 {
		m.buf = wire.AppendMessagesHeader(m.buf[:0], wire.KindClientMessages, tick, m.counts[0])
		m.buf = append(m.buf, m.full[0]...)
		if err := send(m.buf); err != nil {
			return err
		}
		m.full, m.counts = m.full[1:], m.counts[1:]
	}
	if m.batch.Len() > 0 {
		m.buf = m.batch.Append(m.buf[:0], wire.KindClientMessages, tick)
		if err := send(m.buf); err != nil {
			return err
		}
		m.batch.Reset()
	}
	m.full, m.counts, m.queued = nil, nil, 0
	return nil
}

// sendMessages sends the game messages waiting to go (after the datagram).
func (c *Client) sendMessages() {
	if c.msgs.queued == 0 {
		return
	}
	n := c.msgs.batch.Len()
	for _, k := range c.msgs.counts {
		n += k
	}
	err := c.msgs.send(c.ServerTick(), func(b []byte) error {
		c.Stats.BytesOut += uint64(len(b))
		c.Stats.MessageBytesOut += uint64(len(b))
		c.msgs.log.add(b)
		return c.conn.SendMessage(b)
	})
	if err != nil {
		c.cfg.Logger.Log(context.Background(), slog.LevelDebug, "archenet: sending messages failed", "err", err)
		return
	}
	c.Stats.MessagesOut += uint64(n)
}

// clientMessageLog bounds the bytes of game message batches a client
// keeps to send again at a resume.
const clientMessageLog = 256 << 10

// resent sends again the batches of game messages after the first taken,
// which the server took, at a resume.
func (c *Client) resent(taken uint32) {
	l := &c.msgs.log
	if err := l.take(taken); err != nil {
		c.cfg.Logger.Log(context.Background(), slog.LevelWarn, "archenet: resume: the server took more messages than were sent", "err", err)
		return
	}
	if int32(l.lost-taken) > 0 {
		c.Stats.MessagesLost += uint64(l.lost - taken)
	}
	err := l.each(taken, func(b []byte) error {
		c.Stats.MessagesResent++
		c.Stats.BytesOut += uint64(len(b))
		c.Stats.MessageBytesOut += uint64(len(b))
		return c.conn.SendMessage(b)
	})
	if err != nil {
		c.cfg.Logger.Log(context.Background(), slog.LevelDebug, "archenet: sending messages failed", "err", err)
	}
}

// receive decodes a batch of the server's messages (checked whole first)
// into the endpoints; references resolve to mirrors, or to none.
func (m *clientMsgs) receive(c *Client, b []byte) error {
	_, n, err := wire.ParseMessages(b, wire.KindMessages, m.plans, m.scratch, m.onMsg)
	if err == nil {
		c.Stats.MessagesIn += uint64(n)
	}
	return err
}

// beginReceive forgets the messages the last Receive took in.
func (m *clientMsgs) beginReceive() {
	for _, ep := range m.eps {
		if ep != nil {
			ep.reset()
		}
	}
}

// ResolveRef sets r.Entity to the mirror r.ID names, if the client has it
// now, and reports whether it does: a reference that read as none because
// its entity had not arrived resolves once the entity's spawn lands.
func (c *Client) ResolveRef(r *components.Ref) bool {
	if !r.Set {
		r.Entity = arche.Entity{}
		return false
	}
	var ok bool
	r.Entity, ok = c.mirrors.Entity(r.ID)
	return ok
}
