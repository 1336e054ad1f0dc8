package token

import (
	"crypto/cipher"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"golang.org/x/crypto/chacha20poly1305"
)

// VerifierConfig configures a [Verifier]. Every zero value has a
// documented default or is an error.
type VerifierConfig struct {
	// Keys are the keys tokens may be sealed with, by key id (several during
	// a rotation). At least one. Required.
	Keys map[uint32]Key
	// Addresses are this server's addresses as tokens name them (its public
	// host:port, which behind NAT or on Kubernetes is not the socket's); a
	// token must name one of them. At least one. Required.
	Addresses []string
	// MaxLifetime refuses tokens that expire further ahead than this, so a
	// replay cache entry lives at most that long. 0: 1 hour.
	MaxLifetime time.Duration
	// ReplayCapacity bounds the replay cache: the unexpired tokens used so
	// far. With it full, further tokens are refused with ErrBusy (never
	// forgetting one that could still be replayed). 0: 65536 (about 6 MB).
	ReplayCapacity int
	// Now is the clock expiry is checked against. Nil: time.Now.
	Now func() time.Time
}

func (c VerifierConfig) resolve() (VerifierConfig, error) {
	if len(c.Keys) == 0 {
		return c, errors.New("token: VerifierConfig.Keys is empty")
	}
	if len(c.Addresses) == 0 {
		return c, errors.New("token: VerifierConfig.Addresses is empty: name this server's address as tokens do")
	}
	for _, a := range c.Addresses {
		if a == "" || len(a) > MaxServerLen {
			return c, fmt.Errorf("token: VerifierConfig.Addresses: %q: want 1..%d bytes", a, MaxServerLen)
		}
	}
	if c.MaxLifetime < 0 || c.ReplayCapacity < 0 {
		return c, fmt.Errorf("token: VerifierConfig.MaxLifetime %v or ReplayCapacity %d is negative", c.MaxLifetime, c.ReplayCapacity)
	}
	if c.MaxLifetime == 0 {
		c.MaxLifetime = time.Hour
	}
	if c.ReplayCapacity == 0 {
		c.ReplayCapacity = 1 << 16
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return c, nil
}

// Verifier checks connect tokens: what a server calls on a client's token
// before it spends anything on the client. Safe for concurrent use.
type Verifier struct {
	cfg    VerifierConfig
	aeads  map[uint32]cipher.AEAD
	replay replayCache
}

// NewVerifier returns a verifier for cfg; an invalid setting is an error.
func NewVerifier(cfg VerifierConfig) (*Verifier, error) {
	cfg, err := cfg.resolve()
	if err != nil {
		return nil, err
	}
	v := &Verifier{cfg: cfg, aeads: map[uint32]cipher.AEAD{}}
	for id, k := range cfg.Keys {
		v.aeads[id], _ = chacha20poly1305.NewX(k[:])
	}
	v.cfg.Addresses = slices.Clone(cfg.Addresses)
	v.replay.init(cfg.ReplayCapacity)
	return v, nil
}

// Verify checks tok and spends it: it returns its claims if tok is well
// formed, sealed with one of the keys, unexpired (and not expiring beyond
// MaxLifetime), names one of the server's addresses, names a match hosted
// reports true for (nil: any), and was not used before; else an error
// matching one of the package's Err values. The checks run cheapest first:
// sizes and the clear header, the key id and expiry, then the AEAD (no
// allocation before it opens, whatever the token's length fields say); a
// token refused for its match is not spent.
func (v *Verifier) Verify(tok []byte, hosted func(match string) bool) (Claims, error) {
	c, nonce, err := v.open(tok)
	if err != nil {
		return Claims{}, err
	}
	if hosted != nil && !hosted(c.Match) {
		return Claims{}, fmt.Errorf("%w %q", ErrUnknownMatch, c.Match)
	}
	if err := v.replay.spend(nonce, c.Expires, v.cfg.Now()); err != nil {
		return Claims{}, err
	}
	return c, nil
}

// Release gives back a token Verify accepted, so that it admits once more:
// for a connection that ended before it joined (the client's join timed
// out, or the match's server refused or never took it). A host releases
// the tokens of such connections itself, so a token is spent only by a
// connection that joined. A tok that is malformed or was not spent is
// ignored.
func (v *Verifier) Release(tok []byte) {
	h, _, err := parseHeader(tok)
	if err != nil {
		return
	}
	v.replay.release(h.nonce)
}

// plainBufs hold the opened sealed parts (parsePlain copies what it keeps).
var plainBufs = sync.Pool{New: func() any { return new([maxPlain]byte) }}

// open checks everything but the match and replay.
func (v *Verifier) open(tok []byte) (Claims, [nonceSize]byte, error) {
	h, sealed, err := parseHeader(tok)
	if err != nil {
		return Claims{}, h.nonce, err
	}
	aead, ok := v.aeads[h.keyID]
	if !ok {
		return Claims{}, h.nonce, fmt.Errorf("%w: key id %d is not one of its keys", ErrWrongKey, h.keyID)
	}
	now := v.cfg.Now()
	expires := time.UnixMilli(h.expires)
	if !now.Before(expires) {
		return Claims{}, h.nonce, fmt.Errorf("%w %v ago", ErrExpired, now.Sub(expires).Round(time.Millisecond))
	}
	buf := plainBufs.Get().(*[maxPlain]byte)
	defer plainBufs.Put(buf)
	plain, err := aead.Open(buf[:0], h.nonce[:], sealed, tok[:headerLen])
	if err != nil {
		return Claims{}, h.nonce, fmt.Errorf("%w: it does not open (wrong key, or altered)", ErrWrongKey)
	}
	if ahead := expires.Sub(now); ahead > v.cfg.MaxLifetime {
		return Claims{}, h.nonce, fmt.Errorf("%w: it expires in %v, beyond the server's MaxLifetime %v", ErrExpired, ahead.Round(time.Second), v.cfg.MaxLifetime)
	}
	c := Claims{Expires: expires}
	if err := parsePlain(plain, &c); err != nil {
		return Claims{}, h.nonce, err
	}
	if !v.forMe(c.Servers) {
		return Claims{}, h.nonce, fmt.Errorf("%w (it names %q)", ErrWrongServer, c.Servers)
	}
	return c, h.nonce, nil
}

func (v *Verifier) forMe(servers []string) bool {
	for _, s := range servers {
		if slices.Contains(v.cfg.Addresses, s) {
			return true
		}
	}
	return false
}

// ReplayEntries returns how many used, unexpired tokens the replay cache
// holds (some of them may have expired since its last sweep).
func (v *Verifier) ReplayEntries() int { return v.replay.len() }

// replayCache remembers the nonces of spent tokens until they expire. It is
// bounded: full of unexpired entries, it refuses new ones rather than
// forgetting one that could be replayed. Expired entries are swept when it
// fills up, and at most every sweepEvery otherwise.
type replayCache struct {
	mu        sync.Mutex
	capacity  int
	spent     map[[nonceSize]byte]int64 // nonce → expiry (unix ms)
	lastSweep time.Time
}

// sweepEvery is how often the replay cache drops expired entries when it
// is not full.
const sweepEvery = 10 * time.Second

func (r *replayCache) init(capacity int) {
	r.capacity = capacity
	r.spent = make(map[[nonceSize]byte]int64)
}

// spend records nonce (expiring at expires) as used at now; ErrReplayed if
// it was, ErrBusy if the cache is full.
func (r *replayCache) spend(nonce [nonceSize]byte, expires, now time.Time) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.spent[nonce]; ok {
		return ErrReplayed
	}
	if len(r.spent) >= r.capacity || now.Sub(r.lastSweep) > sweepEvery {
		r.sweep(now)
	}
	if len(r.spent) >= r.capacity {
		return fmt.Errorf("%w (%d)", ErrBusy, r.capacity)
	}
	r.spent[nonce] = expires.UnixMilli()
	return nil
}

// release forgets nonce.
func (r *replayCache) release(nonce [nonceSize]byte) {
	r.mu.Lock()
	delete(r.spent, nonce)
	r.mu.Unlock()
}

func (r *replayCache) sweep(now time.Time) {
	r.lastSweep = now
	ms := now.UnixMilli()
	for n, exp := range r.spent {
		if exp <= ms {
			delete(r.spent, n)
		}
	}
}

func (r *replayCache) len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.spent)
}
