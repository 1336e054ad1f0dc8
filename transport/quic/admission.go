package quic

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"

	quicgo "github.com/quic-go/quic-go"
)

// admission is a listener's budget for connections before their handshake
// ends (this end sends a Welcome; a rejected one counts until it closes).
// Until then a connection's flow-control windows stay at the handshake's size,
// at most MaxPendingPerAddress of them come from one source address, and
// once more than RetryAbove are pending, new ones must first prove their
// address with a QUIC Retry (a spoofed source cannot).
type admission struct {
	perAddr  int // 0: unlimited
	retryAt  int // 0: never
	mu       sync.Mutex
	bySource map[netip.Addr]int
	pending  atomic.Int64
	refused  atomic.Uint64
	retries  atomic.Uint64
}

// pendingConn is one connection's place in the admission budget.
type pendingConn struct {
	a        *admission
	src      netip.Addr
	released atomic.Bool
}

type pendingKey struct{}

func newAdmission(cfg *Config) *admission {
	a := &admission{bySource: map[netip.Addr]int{}}
	if cfg.MaxPendingPerAddress > 0 {
		a.perAddr = cfg.MaxPendingPerAddress
	}
	if cfg.RetryAbove > 0 {
		a.retryAt = cfg.RetryAbove
	}
	return a
}

// sourceOf is the budget's key for a peer: its IPv4 address, or the /64
// prefix of its IPv6 address (one host usually holds a whole /64).
func sourceOf(addr net.Addr) netip.Addr {
	ua, ok := addr.(*net.UDPAddr)
	if !ok {
		return netip.Addr{}
	}
	ip, _ := netip.AddrFromSlice(ua.IP)
	ip = ip.Unmap()
	if ip.Is6() {
		p, _ := ip.Prefix(64)
		return p.Addr()
	}
	return ip
}

// connContext is quic-go's Transport.ConnContext: called for a new
// connection's first packet, before any TLS work. A source over its budget
// is refused here (quic-go answers CONNECTION_REFUSED).
func (a *admission) connContext(ctx context.Context, info *quicgo.ClientInfo) (context.Context, error) {
	src := sourceOf(info.RemoteAddr)
	a.mu.Lock()
	if a.perAddr > 0 && a.bySource[src] >= a.perAddr {
		a.mu.Unlock()
		a.refused.Add(1)
		return nil, fmt.Errorf("%d connections from %v are in the handshake (MaxPendingPerAddress)", a.perAddr, src)
	}
	a.bySource[src]++
	a.mu.Unlock()
	a.pending.Add(1)
	p := &pendingConn{a: a, src: src}
	context.AfterFunc(ctx, p.release) // a connection that ends in the handshake
	return context.WithValue(ctx, pendingKey{}, p), nil
}

// release takes p out of the budget (once).
func (p *pendingConn) release() {
	if p.released.Swap(true) {
		return
	}
	a := p.a
	a.pending.Add(-1)
	a.mu.Lock()
	if a.bySource[p.src]--; a.bySource[p.src] <= 0 {
		delete(a.bySource, p.src)
	}
	a.mu.Unlock()
}

// pendingOf returns the budget entry of a connection (nil: none, e.g. a
// dialed connection).
func pendingOf(qc *quicgo.Conn) *pendingConn {
	p, _ := qc.Context().Value(pendingKey{}).(*pendingConn)
	return p
}

// verifySource is quic-go's Transport.VerifySourceAddress: a Retry for new
// connections while more than RetryAbove are pending.
func (a *admission) verifySource(net.Addr) bool {
	if a.retryAt > 0 && a.pending.Load() > int64(a.retryAt) {
		a.retries.Add(1)
		return true
	}
	return false
}

// allowWindowIncrease is quic-go's Config.AllowConnectionWindowIncrease: a
// connection's receive window grows past its handshake size only once its
// handshake is over.
func allowWindowIncrease(qc *quicgo.Conn, _ uint64) bool {
	p := pendingOf(qc)
	return p == nil || p.released.Load()
}
