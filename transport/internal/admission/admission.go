// Package admission is a QUIC listener's budget for connections whose archenet
// handshake has not ended, shared by transport/quic and transport/webtransport.
//
// Until this end sends a transport.Welcome (or the connection closes) a connection is
// pending: its flow-control windows stay at the handshake's size
// ([AllowWindowIncrease]), at most a bounded number come from one source address
// ([Budget.ConnContext], before any TLS work), and once too many are pending new ones
// must first prove their address with a QUIC Retry ([Budget.VerifySource]; a spoofed
// source cannot). New connections beyond a rate, from everywhere and from one source,
// are refused at their first packet too (token buckets), and while the global rate is
// half spent new ones must prove their address.
package admission

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	quicgo "github.com/quic-go/quic-go"

	"github.com/archenet/archenet/transport/internal/ratelimit"
)

// Budget counts a listener's pending connections. Its methods are quic-go's
// Transport.ConnContext and Transport.VerifySourceAddress hooks; all are safe for
// concurrent use.
type Budget struct {
	lim      Limits
	mu       sync.Mutex
	bySource map[netip.Addr]int
	global   ratelimit.TokenBucket                 // (under mu)
	rates    map[netip.Addr]*ratelimit.TokenBucket // each source's (under mu)
	pruned   time.Time                             // when rates was last pruned
	pending  atomic.Int64
	refused  atomic.Uint64
	retries  atomic.Uint64
	rateRef  atomic.Uint64
	srcRef   atomic.Uint64
}

// Limits are a budget's bounds (<= 0: none).
type Limits struct {
	PerAddress int // pending connections from one source
	RetryAbove int // pending connections from everywhere, beyond which a Retry is asked
	// Rate and RatePerAddress are new connections a second, from everywhere
	// (a second's worth at once) and from one source (two seconds' worth).
	Rate, RatePerAddress int
	Now                  func() time.Time // nil: time.Now
}

// Entry is one connection's place in a Budget, from its first packet until
// [Entry.Release].
type Entry struct {
	b        *Budget
	src      netip.Addr
	released atomic.Bool
}

type entryKey struct{}

// maxSources bounds the sources whose rates the budget remembers: beyond it, those
// whose bucket has refilled are forgotten (they would start full anyway), at most
// once a second.
const maxSources = 4096

// New returns a budget with the limits lim.
func New(lim Limits) *Budget {
	if lim.Now == nil {
		lim.Now = time.Now
	}
	lim.PerAddress, lim.RetryAbove = max(lim.PerAddress, 0), max(lim.RetryAbove, 0)
	lim.Rate, lim.RatePerAddress = max(lim.Rate, 0), max(lim.RatePerAddress, 0)
	return &Budget{lim: lim, bySource: map[netip.Addr]int{}, rates: map[netip.Addr]*ratelimit.TokenBucket{},
		global: ratelimit.New(lim.Rate, max(lim.Rate, 1), lim.Now())}
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
// packet, before any TLS work. A source over its budget, or a connection beyond the
// rates, is refused here (quic-go answers CONNECTION_REFUSED; see allowRate for the
// verified fresh sources the global rate lets in); any other connection
// gets an [Entry], released when ctx (the connection's) ends or by [Entry.Release].
func (b *Budget) ConnContext(ctx context.Context, info *quicgo.ClientInfo) (context.Context, error) {
	src := SourceOf(info.RemoteAddr)
	b.mu.Lock()
	if b.lim.PerAddress > 0 && b.bySource[src] >= b.lim.PerAddress {
		b.mu.Unlock()
		b.refused.Add(1)
		return nil, fmt.Errorf("%d connections from %v are in the handshake (MaxPendingPerAddress)", b.lim.PerAddress, src)
	}
	if err := b.allowRate(src, info.AddrVerified); err != nil {
		b.mu.Unlock()
		return nil, err
	}
	b.bySource[src]++
	b.mu.Unlock()
	b.pending.Add(1)
	e := &Entry{b: b, src: src}
	context.AfterFunc(ctx, e.Release) // a connection that ends in the handshake
	return context.WithValue(ctx, entryKey{}, e), nil
}

// allowRate takes a token from src's bucket and the global one, or says which
// rate a new connection from src exceeds (b.mu held). Nothing is taken from a
// bucket for a connection refused. While the global rate is spent, a source
// whose address is verified (a Retry, which the pressure asks for) and that
// has made no connection lately (its bucket is full) still gets in: a flood
// from a few sources cannot lock new players out, and each fresh source costs
// one handshake at most.
func (b *Budget) allowRate(src netip.Addr, verified bool) error {
	now := b.lim.Now()
	var tb *ratelimit.TokenBucket
	fresh := true
	if b.lim.RatePerAddress > 0 {
		if tb = b.rates[src]; tb != nil {
			if tb.Tokens(now) < 1 {
				b.srcRef.Add(1)
				return fmt.Errorf("connections from %v come faster than %d a second (NewConnectionRatePerAddress)", src, b.lim.RatePerAddress)
			}
			fresh = tb.Full(now)
		}
	}
	if b.lim.Rate > 0 && !b.global.Allow(now) && !(verified && fresh) {
		b.rateRef.Add(1)
		return fmt.Errorf("new connections come faster than %d a second (NewConnectionRate)", b.lim.Rate)
	}
	if b.lim.RatePerAddress > 0 {
		if tb == nil {
			b.prune(now)
			t := ratelimit.New(b.lim.RatePerAddress, 2*b.lim.RatePerAddress, now)
			tb = &t
			b.rates[src] = tb
		}
		tb.Allow(now)
	}
	return nil
}

// pressed reports whether half the global rate's burst is spent.
func (b *Budget) pressed() bool {
	if b.lim.Rate <= 0 {
		return false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.global.Tokens(b.lim.Now()) <= float64(b.lim.Rate)/2
}

// prune forgets the sources whose buckets have refilled, when there are more
// than maxSources, at most once a second (b.mu held).
func (b *Budget) prune(now time.Time) {
	if len(b.rates) < maxSources || now.Sub(b.pruned) < time.Second {
		return
	}
	b.pruned = now
	for src, tb := range b.rates {
		if tb.Full(now) {
			delete(b.rates, src)
		}
	}
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
// while more than the budget's RetryAbove are pending, or half the global rate's
// burst is spent.
func (b *Budget) VerifySource(net.Addr) bool {
	if (b.lim.RetryAbove > 0 && b.pending.Load() > int64(b.lim.RetryAbove)) || b.pressed() {
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
	Pending                            int
	RefusedPerAddress                  uint64
	Retries                            uint64
	RefusedRate, RefusedRatePerAddress uint64
}

// Stats returns the budget's counts (zero for a nil budget).
func (b *Budget) Stats() Stats {
	if b == nil {
		return Stats{}
	}
	return Stats{Pending: b.Pending(), RefusedPerAddress: b.Refused(), Retries: b.Retries(),
		RefusedRate: b.rateRef.Load(), RefusedRatePerAddress: b.srcRef.Load()}
}

// Pending returns the number of connections in the budget.
func (b *Budget) Pending() int { return int(b.pending.Load()) }

// Refused returns how many connections ConnContext refused for their source.
func (b *Budget) Refused() uint64 { return b.refused.Load() }

// Retries returns how many connection attempts VerifySource sent a Retry.
func (b *Budget) Retries() uint64 { return b.retries.Load() }
