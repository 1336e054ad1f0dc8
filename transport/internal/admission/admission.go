// Package admission is a QUIC listener's budget for connections whose archenet
// handshake has not ended, shared by transport/quic and transport/webtransport.
//
// Until this end sends a transport.Welcome (or the connection closes) a connection is
// pending: its flow-control windows stay at the handshake's size
// ([AllowWindowIncrease]), at most a bounded number come from one source address
// ([Budget.ConnContext], before any TLS work), and once too many are pending new ones
// must first prove their address with a QUIC Retry ([Budget.VerifySource]; a spoofed
// source cannot).
package admission

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"

	quicgo "github.com/quic-go/quic-go"
)

// Budget counts a listener's pending connections. Its methods are quic-go's
// Transport.ConnContext and Transport.VerifySourceAddress hooks; all are safe for
// concurrent use.
type Budget struct {
	perAddr  int // 0: unlimited
	retryAt  int // 0: never
	mu       sync.Mutex
	bySource map[netip.Addr]int
	pending  atomic.Int64
	refused  atomic.Uint64
	retries  atomic.Uint64
}

// Entry is one connection's place in a Budget, from its first packet until
// [Entry.Release].
type Entry struct {
	b        *Budget
	src      netip.Addr
	released atomic.Bool
}

type entryKey struct{}

// New returns a budget that allows at most perAddress pending connections from one
// source (<= 0: no bound) and asks for a Retry while more than retryAbove are pending
// (<= 0: never).
func New(perAddress, retryAbove int) *Budget {
	return &Budget{bySource: map[netip.Addr]int{}, perAddr: max(perAddress, 0), retryAt: max(retryAbove, 0)}
}

// SourceOf is the budget's key for a peer: its IPv4 address, or the /64 prefix of its
// IPv6 address (one host usually holds a whole /64).
func SourceOf(addr net.Addr) netip.Addr {
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

// ConnContext is quic-go's Transport.ConnContext: called for a new connection's first
// packet, before any TLS work. A source over its budget is refused here (quic-go
// answers CONNECTION_REFUSED); any other connection gets an [Entry], released when
// ctx (the connection's) ends or by [Entry.Release].
func (b *Budget) ConnContext(ctx context.Context, info *quicgo.ClientInfo) (context.Context, error) {
	src := SourceOf(info.RemoteAddr)
	b.mu.Lock()
	if b.perAddr > 0 && b.bySource[src] >= b.perAddr {
		b.mu.Unlock()
		b.refused.Add(1)
		return nil, fmt.Errorf("%d connections from %v are in the handshake (MaxPendingPerAddress)", b.perAddr, src)
	}
	b.bySource[src]++
	b.mu.Unlock()
	b.pending.Add(1)
	e := &Entry{b: b, src: src}
	context.AfterFunc(ctx, e.Release) // a connection that ends in the handshake
	return context.WithValue(ctx, entryKey{}, e), nil
}

// Release takes e out of its budget (the first call; later ones, and a call on
// nil, do nothing).
func (e *Entry) Release() {
	if e == nil || e.released.Swap(true) {
		return
	}
	b := e.b
	b.pending.Add(-1)
	b.mu.Lock()
	if b.bySource[e.src]--; b.bySource[e.src] <= 0 {
		delete(b.bySource, e.src)
	}
	b.mu.Unlock()
}

// Released reports whether e has left its budget.
func (e *Entry) Released() bool { return e.released.Load() }

// Of returns the budget entry of a connection (nil: none, e.g. a dialed connection).
func Of(qc *quicgo.Conn) *Entry {
	e, _ := qc.Context().Value(entryKey{}).(*Entry)
	return e
}

// VerifySource is quic-go's Transport.VerifySourceAddress: a Retry for new connections
// while more than the budget's retryAbove are pending.
func (b *Budget) VerifySource(net.Addr) bool {
	if b.retryAt > 0 && b.pending.Load() > int64(b.retryAt) {
		b.retries.Add(1)
		return true
	}
	return false
}

// AllowWindowIncrease is quic-go's Config.AllowConnectionWindowIncrease: a
// connection's receive window grows past its handshake size only once it has left the
// budget.
func AllowWindowIncrease(qc *quicgo.Conn, _ uint64) bool {
	e := Of(qc)
	return e == nil || e.Released()
}

// Stats are a budget's counts (transport/quic's and transport/webtransport's
// AdmissionStats convert from them).
type Stats struct {
	Pending           int
	RefusedPerAddress uint64
	Retries           uint64
}

// Stats returns the budget's counts (zero for a nil budget).
func (b *Budget) Stats() Stats {
	if b == nil {
		return Stats{}
	}
	return Stats{Pending: b.Pending(), RefusedPerAddress: b.Refused(), Retries: b.Retries()}
}

// Pending returns the number of connections in the budget.
func (b *Budget) Pending() int { return int(b.pending.Load()) }

// Refused returns how many connections ConnContext refused for their source.
func (b *Budget) Refused() uint64 { return b.refused.Load() }

// Retries returns how many connection attempts VerifySource sent a Retry.
func (b *Budget) Retries() uint64 { return b.retries.Load() }
