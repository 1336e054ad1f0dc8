package netem

import (
	"container/heap"
	"errors"
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// Conditions describe one direction of the proxied path. The zero value forwards every
// datagram at once.
type Conditions struct {
	// Latency is the one-way base delay.
	Latency time.Duration
	// Jitter varies each datagram's delay uniformly within Latency ± Jitter (never below
	// zero). Datagrams keep their order unless JitterReorders is set, as on a path whose
	// delay varies with its queues.
	Jitter time.Duration
	// JitterReorders lets a datagram's jitter overtake earlier ones.
	JitterReorders bool
	// Loss is the probability that a datagram is dropped.
	Loss float64
	// Duplicate is the probability that a datagram is delivered twice.
	Duplicate float64
	// Reorder is the probability that a datagram is held back by ReorderDelay, so that
	// later ones overtake it.
	Reorder float64
	// ReorderDelay is the extra delay of a reordered datagram. Zero: 10 ms.
	ReorderDelay time.Duration
	// Bandwidth caps the direction at this many bytes per second (UDP payload); datagrams
	// queue behind each other and are tail-dropped beyond QueueBytes. Zero: unlimited.
	Bandwidth int
	// QueueBytes bounds the bottleneck queue when Bandwidth is set. Zero: 64 KiB.
	QueueBytes int
}

// Stats counts one direction's datagrams.
type Stats struct {
	Received, Forwarded, Lost, Duplicated, Reordered, DownDropped, QueueDropped uint64
}

// Proxy forwards datagrams between clients and a target. Safe for concurrent use.
type Proxy struct {
	ln     *net.UDPConn
	target *net.UDPAddr

	mu       sync.Mutex
	rng      *rand.Rand
	up, down dirState
	isDown   bool
	peers    map[string]*peer
	closed   bool

	wg sync.WaitGroup
}

type dirState struct {
	cond      Conditions
	stats     Stats
	lastDue   time.Time // order-keeping jitter: no datagram due before the previous one
	nextFree  time.Time // bandwidth bottleneck
	scheduler *scheduler
}

type peer struct {
	client *net.UDPAddr
	conn   atomic.Pointer[net.UDPConn] // connected to the target (Rebind replaces it)
}

// Listen starts a proxy on 127.0.0.1 (a free port) forwarding to target.
func Listen(target string, seed uint64) (*Proxy, error) {
	taddr, err := net.ResolveUDPAddr("udp", target)
	if err != nil {
		return nil, err
	}
	ln, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		return nil, err
	}
	_ = ln.SetReadBuffer(4 << 20) // as far as the system allows: bursts are the point
	p := &Proxy{
		ln: ln, target: taddr,
		rng:   rand.New(rand.NewPCG(seed, 0x6e6574656d)), // "netem"
		peers: map[string]*peer{},
	}
	p.up.scheduler = newScheduler(&p.wg)
	p.down.scheduler = newScheduler(&p.wg)
	p.wg.Add(1)
	go p.readClients()
	return p, nil
}

// Addr is the address clients send to.
func (p *Proxy) Addr() net.Addr { return p.ln.LocalAddr() }

// SetConditions sets both directions: up is client → target, down target → client.
// Datagrams already scheduled keep their schedule.
func (p *Proxy) SetConditions(up, down Conditions) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.up.cond, p.down.cond = up, down
}

// SetDown starts (true) or ends (false) an outage: while down, every datagram in either
// direction is dropped, also those already scheduled when they fall due.
func (p *Proxy) SetDown(down bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.isDown = down
}

// Stats returns the counters of both directions.
func (p *Proxy) Stats() (up, down Stats) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.up.stats, p.down.stats
}

// Close stops the proxy and releases its sockets; it returns once its goroutines have
// exited.
func (p *Proxy) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	peers := p.peers
	p.mu.Unlock()
	err := p.ln.Close()
	for _, pr := range peers {
		pr.conn.Load().Close()
	}
	p.up.scheduler.close()
	p.down.scheduler.close()
	p.wg.Wait()
	return err
}

func (p *Proxy) readClients() {
	defer p.wg.Done()
	buf := make([]byte, 64<<10)
	for {
		n, from, err := p.ln.ReadFromUDP(buf)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		pr, err := p.peerFor(from)
		if err != nil {
			continue
		}
		data := append([]byte(nil), buf[:n]...)
		p.forward(&p.up, data, func(b []byte) { _, _ = pr.conn.Load().Write(b) })
	}
}

func (p *Proxy) peerFor(client *net.UDPAddr) (*peer, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, net.ErrClosed
	}
	if pr := p.peers[client.String()]; pr != nil {
		return pr, nil
	}
	conn, err := p.dialTarget()
	if err != nil {
		return nil, err
	}
	pr := &peer{client: client}
	pr.conn.Store(conn)
	p.peers[client.String()] = pr
	p.wg.Add(1)
	go p.readTarget(pr, conn)
	return pr, nil
}

// dialTarget opens a socket towards the target (a new source port).
func (p *Proxy) dialTarget() (*net.UDPConn, error) {
	conn, err := net.DialUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)}, p.target)
	if err != nil {
		return nil, err
	}
	_ = conn.SetReadBuffer(4 << 20)
	return conn, nil
}

// Rebind gives every client a new source address towards the target, as a
// NAT rebinding (or a phone moving from Wi-Fi to mobile data) does: each
// client's datagrams leave from a new socket from now on, and what the
// target sends to the old one is lost. It returns how many clients moved.
func (p *Proxy) Rebind() (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return 0, net.ErrClosed
	}
	for _, pr := range p.peers {
		conn, err := p.dialTarget()
		if err != nil {
			return 0, err
		}
		old := pr.conn.Swap(conn)
		p.wg.Add(1)
		go p.readTarget(pr, conn)
		old.Close()
	}
	return len(p.peers), nil
}

func (p *Proxy) readTarget(pr *peer, conn *net.UDPConn) {
	defer p.wg.Done()
	buf := make([]byte, 64<<10)
	for {
		n, err := conn.Read(buf)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		data := append([]byte(nil), buf[:n]...)
		p.forward(&p.down, data, func(b []byte) { _, _ = p.ln.WriteToUDP(b, pr.client) })
	}
}

// forward applies d's conditions to one datagram and schedules its deliveries.
func (p *Proxy) forward(d *dirState, b []byte, send func([]byte)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	d.stats.Received++
	if p.isDown {
		d.stats.DownDropped++
		return
	}
	c := d.cond
	now := time.Now()
	depart := now
	if c.Bandwidth > 0 {
		if d.nextFree.After(depart) {
			depart = d.nextFree
		}
		qb := c.QueueBytes
		if qb <= 0 {
			qb = 64 << 10
		}
		if backlog := float64(depart.Sub(now)) * float64(c.Bandwidth) / float64(time.Second); backlog+float64(len(b)) > float64(qb) {
			d.stats.QueueDropped++
			return
		}
		d.nextFree = depart.Add(time.Duration(float64(len(b)) * float64(time.Second) / float64(c.Bandwidth)))
		depart = d.nextFree
	}
	if p.chance(c.Loss) {
		d.stats.Lost++
		return
	}
	copies := 1
	if p.chance(c.Duplicate) {
		copies = 2
		d.stats.Duplicated++
	}
	for range copies {
		delay := c.Latency
		if c.Jitter > 0 {
			delay += time.Duration(p.rng.Int64N(int64(2*c.Jitter)+1)) - c.Jitter
			delay = max(delay, 0)
		}
		due := depart.Add(delay)
		if !c.JitterReorders && due.Before(d.lastDue) {
			due = d.lastDue
		}
		d.lastDue = due
		if p.chance(c.Reorder) {
			rd := c.ReorderDelay
			if rd <= 0 {
				rd = 10 * time.Millisecond
			}
			due = due.Add(rd)
			d.stats.Reordered++
		}
		d.scheduler.add(due, func() {
			p.mu.Lock()
			down := p.isDown
			if down {
				d.stats.DownDropped++
			} else {
				d.stats.Forwarded++
			}
			p.mu.Unlock()
			if !down {
				send(b)
			}
		})
	}
}

func (p *Proxy) chance(x float64) bool { return x > 0 && (x >= 1 || p.rng.Float64() < x) }

// scheduler runs functions at their due times, in due order (ties in insertion order).
type scheduler struct {
	mu     sync.Mutex
	items  itemHeap
	seq    uint64
	wake   chan struct{}
	done   chan struct{}
	closed bool
}

type item struct {
	due time.Time
	seq uint64
	fn  func()
}

func newScheduler(wg *sync.WaitGroup) *scheduler {
	s := &scheduler{wake: make(chan struct{}, 1), done: make(chan struct{})}
	wg.Add(1)
	go s.run(wg)
	return s
}

func (s *scheduler) add(due time.Time, fn func()) {
	s.mu.Lock()
	s.seq++
	heap.Push(&s.items, item{due: due, seq: s.seq, fn: fn})
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

func (s *scheduler) close() {
	s.mu.Lock()
	if !s.closed {
		s.closed = true
		close(s.done)
	}
	s.mu.Unlock()
}

func (s *scheduler) run(wg *sync.WaitGroup) {
	defer wg.Done()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		s.mu.Lock()
		var fn func()
		wait := time.Hour
		if len(s.items) > 0 {
			if d := time.Until(s.items[0].due); d <= 0 {
				fn = heap.Pop(&s.items).(item).fn
			} else {
				wait = d
			}
		}
		s.mu.Unlock()
		if fn != nil {
			fn()
			continue
		}
		timer.Reset(wait)
		select {
		case <-timer.C:
		case <-s.wake:
			if !timer.Stop() {
				select {
				case <-timer.C:
				default:
				}
			}
		case <-s.done:
			return
		}
	}
}

type itemHeap []item

func (h itemHeap) Len() int { return len(h) }
func (h itemHeap) Less(i, j int) bool {
	if !h[i].due.Equal(h[j].due) {
		return h[i].due.Before(h[j].due)
	}
	return h[i].seq < h[j].seq
}
func (h itemHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *itemHeap) Push(x any)   { *h = append(*h, x.(item)) }
func (h *itemHeap) Pop() any {
	old := *h
	it := old[len(old)-1]
	*h = old[:len(old)-1]
	return it
}
