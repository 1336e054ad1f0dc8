package netem

import (
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"sync"
	"time"
)

// TCPProxy forwards TCP connections (a WebSocket, say) to a target with each
// direction's Conditions applied as TCP feels them: Latency and Jitter delay
// each chunk of the stream without reordering it (a chunk never overtakes
// the one before), and a chunk "lost" with probability Loss arrives a
// retransmission later — max(RTOMin, 2 × Latency) — holding up every byte
// after it (head-of-line blocking). Duplicate, Reorder, JitterReorders and
// Bandwidth do not apply. Safe for concurrent use.
type TCPProxy struct {
	ln     net.Listener
	target string

	mu       sync.Mutex
	rng      *rand.Rand
	up, down Conditions
	stats    [2]TCPStats
	conns    map[net.Conn]struct{}
	closed   bool
	wg       sync.WaitGroup
}

// RTOMin is the least retransmission delay of a lost chunk (Linux's minimum
// retransmission timeout: sparse game traffic rarely has the three
// duplicate acknowledgements a fast retransmit needs).
const RTOMin = 200 * time.Millisecond

// TCPStats counts one direction's chunks (reads of up to 1,460 bytes).
type TCPStats struct {
	Chunks, Bytes, Retransmitted uint64
}

// ListenTCP listens on 127.0.0.1 and forwards each connection to target (a
// TCP address); seed seeds the loss.
func ListenTCP(target string, seed uint64) (*TCPProxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &TCPProxy{ln: ln, target: target, rng: rand.New(rand.NewPCG(seed, 0x7c9)), conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Addr is the proxy's address.
func (p *TCPProxy) Addr() net.Addr { return p.ln.Addr() }

// SetConditions sets the client → target (up) and target → client (down)
// conditions, from the next chunk on.
func (p *TCPProxy) SetConditions(up, down Conditions) {
	p.mu.Lock()
	p.up, p.down = up, down
	p.mu.Unlock()
}

// Stats returns each direction's counts.
func (p *TCPProxy) Stats() (up, down TCPStats) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stats[0], p.stats[1]
}

// Close stops accepting and closes every proxied connection.
func (p *TCPProxy) Close() error {
	p.mu.Lock()
	p.closed = true
	for c := range p.conns {
		_ = c.Close()
	}
	p.mu.Unlock()
	err := p.ln.Close()
	p.wg.Wait()
	return err
}

func (p *TCPProxy) accept() {
	defer p.wg.Done()
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return
		}
		target, err := net.Dial("tcp", p.target)
		if err != nil {
			_ = client.Close()
			continue
		}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			_ = client.Close()
			_ = target.Close()
			return
		}
		p.conns[client], p.conns[target] = struct{}{}, struct{}{}
		p.mu.Unlock()
		p.wg.Add(2)
		go p.pump(client, target, 0)
		go p.pump(target, client, 1)
	}
}

// chunk is a piece of the stream and when it is due at the other end.
type chunk struct {
	b   []byte
	due time.Time
}

// pump forwards src to dst in direction dir (0 up, 1 down), each chunk at
// its due time, in order.
func (p *TCPProxy) pump(src, dst net.Conn, dir int) {
	defer p.wg.Done()
	q := make(chan chunk, 4096)
	done := make(chan struct{})
	go func() { // the writer: in order, each chunk at its due time
		defer close(done)
		for c := range q {
			if d := time.Until(c.due); d > 0 {
				time.Sleep(d)
			}
			if _, err := dst.Write(c.b); err != nil {
				for range q {
				}
				return
			}
		}
	}()
	var last time.Time
	buf := make([]byte, 1460)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			now := time.Now()
			p.mu.Lock()
			c := p.up
			if dir == 1 {
				c = p.down
			}
			delay := c.Latency
			if c.Jitter > 0 {
				delay = max(0, delay+time.Duration(p.rng.Int64N(int64(2*c.Jitter)+1))-c.Jitter)
			}
			lost := c.Loss > 0 && p.rng.Float64() < c.Loss
			st := &p.stats[dir]
			st.Chunks++
			st.Bytes += uint64(n)
			if lost {
				st.Retransmitted++
			}
			p.mu.Unlock()
			due := now.Add(delay)
			if lost {
				due = due.Add(max(RTOMin, 2*c.Latency))
			}
			if due.Before(last) {
				due = last // (a stream's bytes never overtake)
			}
			last = due
			q <- chunk{b: append([]byte(nil), buf[:n]...), due: due}
		}
		if err != nil {
			if !errors.Is(err, io.EOF) {
				_ = src.Close()
			}
			break
		}
	}
	close(q)
	<-done
	if tc, ok := dst.(*net.TCPConn); ok {
		_ = tc.CloseWrite()
	} else {
		_ = dst.Close()
	}
}
