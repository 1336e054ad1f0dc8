package sim

import (
	"container/heap"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/archenet/archenet/transport"
	"github.com/archenet/archenet/transport/internal/queue"
)

// ErrNoListener is returned by [Network.Dial] when nothing listens at the address.
var ErrNoListener = errors.New("sim: no listener at address")

// Addr is the address of a simulated endpoint. It implements net.Addr.
type Addr string

// Network returns "sim".
func (Addr) Network() string { return "sim" }

// String returns the address as given to [Network.Listen] or [Network.Dial].
func (a Addr) String() string { return string(a) }

// Network is an in-memory network driven by an injected clock and a seeded random source.
// Nothing happens until [Network.Advance] or [Network.AdvanceTo] moves the clock: due
// packets are then delivered in time order, ties in the order they were sent. For a given
// seed, start time and sequence of calls, every run delivers the same packets at the same
// times. All methods are safe for concurrent use, and blocking Receive and Accept calls
// wake up when another goroutine advances the clock.
type Network struct {
	mu        sync.Mutex
	rng       *rand.Rand
	now       time.Time
	seq       uint64
	events    eventHeap
	listeners map[Addr]*Listener
	dials     int
	trace     func(TraceEvent)
}

// NewNetwork returns an empty network whose clock starts at start.
func NewNetwork(seed int64, start time.Time) *Network {
	return &Network{
		rng:       rand.New(rand.NewPCG(uint64(seed), 0x61726368656e6574)), // "archenet"
		now:       start,
		listeners: make(map[Addr]*Listener),
	}
}

// Now returns the network's current time.
func (n *Network) Now() time.Time {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.now
}

// Advance moves the clock forward by d and delivers everything due by then.
func (n *Network) Advance(d time.Duration) {
	n.mu.Lock()
	n.advanceLocked(n.now.Add(d))
	n.mu.Unlock()
}

// AdvanceTo moves the clock to t and delivers everything due by then, in time order.
// A t before Now delivers nothing and leaves the clock unchanged.
func (n *Network) AdvanceTo(t time.Time) {
	n.mu.Lock()
	n.advanceLocked(t)
	n.mu.Unlock()
}

// NextEvent returns the time of the earliest pending delivery or timeout, if any.
func (n *Network) NextEvent() (time.Time, bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if len(n.events) == 0 {
		return time.Time{}, false
	}
	return n.events[0].at, true
}

// SetTrace installs fn to be called for every delivery and drop, in simulation order
// (nil removes it). fn runs with the network locked: it must not call the network or
// its connections, and must copy TraceEvent.Data to keep it.
func (n *Network) SetTrace(fn func(TraceEvent)) {
	n.mu.Lock()
	n.trace = fn
	n.mu.Unlock()
}

// TraceKind says what happened to a packet in a [TraceEvent].
type TraceKind uint8

// The kinds of [TraceEvent].
const (
	TraceDeliver   TraceKind = iota // reached the receiving end's queue
	TraceLost                       // lost on the link (loss, burst loss)
	TraceQueueDrop                  // tail-dropped at the bandwidth bottleneck
	TraceLinkDown                   // dropped because the link was down
	TraceFullDrop                   // arrived at a full receive queue
	TraceClose                      // a close reached the peer
)

// String returns a short name of the kind ("deliver", "lost", "queue-drop", …),
// or "TraceKind(n)" for an unknown kind.
func (k TraceKind) String() string {
	switch k {
	case TraceDeliver:
		return "deliver"
	case TraceLost:
		return "lost"
	case TraceQueueDrop:
		return "queue-drop"
	case TraceLinkDown:
		return "link-down"
	case TraceFullDrop:
		return "full-drop"
	case TraceClose:
		return "close"
	}
	return fmt.Sprintf("TraceKind(%d)", uint8(k))
}

// TraceEvent records one packet's fate; see [Network.SetTrace].
type TraceEvent struct {
	At       time.Time
	Kind     TraceKind
	From, To Addr
	Reliable bool
	Data     []byte // the payload; valid only during the call
}

// Listen starts accepting connections at addr. It panics if addr is already in use
// (a test setup error).
func (n *Network) Listen(addr string) *Listener {
	n.mu.Lock()
	defer n.mu.Unlock()
	a := Addr(addr)
	if _, ok := n.listeners[a]; ok {
		panic(fmt.Sprintf("sim: address %q already in use", addr))
	}
	l := &Listener{
		n:       n,
		addr:    a,
		pending: queue.New[*Conn](0, 0, nil),
		closed:  make(chan struct{}),
	}
	n.listeners[a] = l
	return l
}

// Dial connects a new client to the listener at addr and returns the client end; both
// ends are connected immediately, and the server end is ready in the listener's
// PollAccept and Accept. The client's address is "client-N", a new one per dial.
// Invalid link settings are an error ([ErrInvalidConditions]).
func (n *Network) Dial(addr string, link Link) (*Conn, error) {
	return n.DialFrom(addr, "", link)
}

// DialFrom is Dial from the client address from ("host:port" or any name; empty: a
// new "client-N"), which the server end's RemoteAddr returns: several connections
// from one host, for tests of per-address limits.
func (n *Network) DialFrom(addr, from string, link Link) (*Conn, error) {
	if err := link.check(); err != nil {
		return nil, err
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	l, ok := n.listeners[Addr(addr)]
	if !ok {
		return nil, fmt.Errorf("%w %q", ErrNoListener, addr)
	}
	n.dials++
	if from == "" {
		from = fmt.Sprintf("client-%d", n.dials)
	}
	lk := &pair{n: n, idleTimeout: link.IdleTimeout}
	if lk.idleTimeout == 0 {
		lk.idleTimeout = defaultIdleTimeout
	}
	lk.up.cond, lk.down.cond = link.Up, link.Down
	client := newConn(n, lk, Addr(from), l.addr, link)
	server := newConn(n, lk, l.addr, client.local, link)
	server.listened = true
	client.out, client.in = &lk.up, &lk.down
	server.out, server.in = &lk.down, &lk.up
	lk.up.from, lk.up.to = client, server
	lk.down.from, lk.down.to = server, client
	l.conns = append(l.conns, server)
	l.pending.TryPush(server)
	return client, nil
}

func (n *Network) advanceLocked(t time.Time) {
	for len(n.events) > 0 && !n.events[0].at.After(t) {
		ev := heap.Pop(&n.events).(*event)
		n.now = ev.at
		n.process(ev)
	}
	if t.After(n.now) {
		n.now = t
	}
}

func (n *Network) schedule(ev *event) {
	n.seq++
	ev.seq = n.seq
	heap.Push(&n.events, ev)
}

func (n *Network) emit(kind TraceKind, d *direction, reliable bool, data []byte) {
	if n.trace != nil {
		n.trace(TraceEvent{At: n.now, Kind: kind, From: d.from.local, To: d.to.local, Reliable: reliable, Data: data})
	}
}

func (n *Network) chance(p float64) bool {
	return p > 0 && (p >= 1 || n.rng.Float64() < p)
}

func (n *Network) jitter(c Conditions) time.Duration {
	if c.Jitter <= 0 {
		return 0
	}
	return time.Duration(n.rng.Int64N(int64(c.Jitter) + 1))
}

// lost draws whether the next packet on d is lost, stepping the Gilbert–Elliott chain.
func (n *Network) lost(d *direction) bool {
	c := d.cond
	p := c.Loss
	if ge := c.Burst; ge.PGoodToBad > 0 {
		if d.bad {
			if n.chance(ge.PBadToGood) {
				d.bad = false
			}
		} else if n.chance(ge.PGoodToBad) {
			d.bad = true
		}
		if d.bad {
			p = ge.LossBad
			if p <= 0 {
				p = 1
			}
		}
	}
	return n.chance(p)
}

// transmit passes size bytes through d's bandwidth bottleneck and returns when the last
// byte leaves it; ok=false means a tail drop (only if drop is set).
func (n *Network) transmit(d *direction, size int, drop bool) (time.Time, bool) {
	rate := d.cond.Bandwidth
	if rate <= 0 {
		return n.now, true
	}
	start := n.now
	if d.nextFree.After(start) {
		start = d.nextFree
	}
	backlog := int64(start.Sub(n.now)) * int64(rate) / int64(time.Second)
	if drop && backlog+int64(size) > int64(d.cond.queueBytes()) {
		return time.Time{}, false
	}
	d.nextFree = start.Add(time.Duration(int64(size) * int64(time.Second) / int64(rate)))
	return d.nextFree, true
}

func (n *Network) sendDatagram(d *direction, b []byte) {
	d.stats.Datagrams++
	if d.link().isDown {
		d.stats.LinkDownDropped++
		n.emit(TraceLinkDown, d, false, b)
		return
	}
	depart, ok := n.transmit(d, len(b), true)
	if !ok {
		d.stats.QueueDropped++
		n.emit(TraceQueueDrop, d, false, b)
		return
	}
	if n.lost(d) {
		d.stats.Lost++
		n.emit(TraceLost, d, false, b)
		return
	}
	copies := 1
	if n.chance(d.cond.Duplicate) {
		copies = 2
		d.stats.Duplicated++
	}
	for i := range copies {
		at := depart.Add(d.cond.Latency + n.jitter(d.cond))
		if n.chance(d.cond.Reorder) {
			at = at.Add(d.cond.reorderDelay())
			d.stats.Reordered++
		}
		data := b
		if i > 0 {
			data = append([]byte(nil), b...) // each delivery owns its slice
		}
		n.schedule(&event{at: at, kind: evDatagram, dir: d, data: data})
	}
}

func (n *Network) sendReliable(d *direction, ev *event) {
	depart, _ := n.transmit(d, len(ev.data), false)
	at := depart.Add(d.cond.Latency + n.jitter(d.cond))
	if ev.kind == evMessage {
		d.stats.Messages++
		rto := d.link().rto()
		for range MaxRetransmissions {
			if !n.lost(d) {
				break
			}
			d.stats.Retransmissions++
			at = at.Add(rto)
		}
	}
	n.scheduleReliable(d, ev, at)
}

// scheduleReliable keeps reliable events of a direction in order: none is delivered
// before the one sent ahead of it (head-of-line blocking).
func (n *Network) scheduleReliable(d *direction, ev *event, at time.Time) {
	if at.Before(d.lastReliable) {
		at = d.lastReliable
	}
	d.lastReliable = at
	ev.at = at
	ev.dir = d
	n.schedule(ev)
}

func (n *Network) process(ev *event) {
	d := ev.dir
	switch ev.kind {
	case evDatagram:
		if d.link().isDown {
			d.stats.LinkDownDropped++
			n.emit(TraceLinkDown, d, false, ev.data)
			return
		}
		if d.to.closed {
			return
		}
		if d.to.datagrams.TryPush(ev.data) {
			d.stats.Delivered++
			d.to.stats.DatagramsReceived++
			d.to.stats.DatagramBytesReceived += uint64(len(ev.data))
			n.emit(TraceDeliver, d, false, ev.data)
		} else {
			d.to.stats.DatagramsDropped++
			n.emit(TraceFullDrop, d, false, ev.data)
		}
	case evMessage, evClose:
		if d.link().isDown || len(d.held) > 0 {
			d.held = append(d.held, ev)
			return
		}
		if d.to.closed {
			return
		}
		if ev.kind == evClose {
			n.emit(TraceClose, d, true, nil)
			d.to.closeLocked(&transport.CloseError{Code: ev.code, Reason: ev.reason, Remote: true})
			return
		}
		if !d.to.gotFirst && len(ev.data) > transport.MaxHandshakeMessageSize {
			// As a real transport does: the handshake message is bounded.
			reason := fmt.Sprintf("handshake message of %d bytes exceeds the maximum of %d bytes", len(ev.data), transport.MaxHandshakeMessageSize)
			d.to.closeLocked(&transport.CloseError{Code: transport.CodeMessageTooLarge, Reason: reason})
			n.sendReliable(d.to.out, &event{kind: evClose, code: transport.CodeMessageTooLarge, reason: reason})
			return
		}
		if d.to.listened && d.to.gotFirst && !d.to.welcomed {
			// As a real transport does: nothing past the Hello is read
			// before the server's Welcome.
			d.unread = append(d.unread, ev.data)
			return
		}
		d.to.gotFirst = true
		d.to.deliver(ev.data)
		n.emit(TraceDeliver, d, true, ev.data)
	case evIdle:
		lk := ev.lk
		if lk.isDown && lk.downGen == ev.gen {
			reason := fmt.Sprintf("idle timeout: link down for %v", lk.idleTimeout)
			lk.up.from.closeLocked(&transport.CloseError{Code: transport.CodeTimeout, Reason: reason})
			lk.down.from.closeLocked(&transport.CloseError{Code: transport.CodeTimeout, Reason: reason})
		}
	}
}

type eventKind uint8

const (
	evDatagram eventKind = iota
	evMessage
	evClose
	evIdle
)

type event struct {
	at     time.Time
	seq    uint64
	kind   eventKind
	dir    *direction
	data   []byte
	code   transport.CloseCode
	reason string
	lk     *pair  // evIdle
	gen    uint64 // evIdle
}

type eventHeap []*event

func (h eventHeap) Len() int { return len(h) }
func (h eventHeap) Less(i, j int) bool {
	if !h[i].at.Equal(h[j].at) {
		return h[i].at.Before(h[j].at)
	}
	return h[i].seq < h[j].seq
}
func (h eventHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *eventHeap) Push(x any)   { *h = append(*h, x.(*event)) }
func (h *eventHeap) Pop() any {
	old := *h
	ev := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	return ev
}

// pair is the state two connected ends share.
type pair struct {
	n           *Network
	up, down    direction
	idleTimeout time.Duration
	isDown      bool
	downGen     uint64
}

func (l *pair) rto() time.Duration {
	return max(2*(l.up.cond.Latency+l.down.cond.Latency), minRTO)
}

// direction is one way of a link.
type direction struct {
	cond         Conditions
	bad          bool      // Gilbert–Elliott state
	nextFree     time.Time // when the bandwidth bottleneck has sent its backlog
	lastReliable time.Time // delivery time of the last reliable event scheduled
	held         []*event  // reliable events waiting for the link to come back up
	unread       [][]byte  // messages past the Hello, waiting for the server's Welcome
	stats        LinkStats
	from, to     *Conn
}

func (d *direction) link() *pair { return d.from.lk }
