package token

import (
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"time"
	"unicode/utf8"

	"golang.org/x/crypto/chacha20poly1305"

	"github.com/archenet/archenet/transport"
)

// Bounds of a token's contents.
const (
	KeySize      = chacha20poly1305.KeySize // bytes of a Key
	nonceSize    = chacha20poly1305.NonceSizeX
	MaxMatch     = transport.MaxMatchLen // bytes of Claims.Match
	MaxUserData  = 256                   // bytes of Claims.UserData
	MaxServers   = 8                     // addresses in Claims.Servers
	MaxServerLen = 64                    // bytes of one address
	// MaxSize is the largest token, within the Hello's bound
	// (transport.MaxTokenLen).
	MaxSize = headerLen + maxPlain + chacha20poly1305.Overhead

	version   = 1
	headerLen = 1 + 4 + 8 + 2 + nonceSize
	minPlain  = 8 + 1 + 1 + 1 + 1 + 1 // client id, match len, user data len, server count, one 1-byte address
	maxPlain  = 8 + 1 + MaxMatch + 2 + MaxUserData + 1 + MaxServers*(1+MaxServerLen)
	// minSize is the smallest well-formed token.
	minSize = headerLen + minPlain + chacha20poly1305.Overhead
)

// Key is a token key: 32 secret bytes shared by the matchmaker that mints
// tokens and the servers that check them.
type Key [KeySize]byte

// NewKey returns a random key (crypto/rand).
func NewKey() Key {
	var k Key
	_, _ = rand.Read(k[:]) // (never fails: crypto/rand panics instead)
	return k
}

// ParseKey decodes a key written as 64 hexadecimal digits or as standard
// base64 (44 characters), e.g. from an environment variable or a secret.
func ParseKey(s string) (Key, error) {
	var k Key
	b, err := hex.DecodeString(s)
	if err != nil {
		b, err = base64.StdEncoding.DecodeString(s)
	}
	if err != nil || len(b) != KeySize {
		return k, fmt.Errorf("token: a key is %d bytes as 64 hex digits or base64; got %d characters", KeySize, len(s))
	}
	copy(k[:], b)
	return k, nil
}

// String returns the key as 64 hexadecimal digits (ParseKey reads them).
// It is the secret: do not log it.
func (k Key) String() string { return hex.EncodeToString(k[:]) }

// Claims are what a connect token says: which player (ClientID, UserData)
// may join which match on which servers until when.
type Claims struct {
	// Match names the match (at most MaxMatch bytes of UTF-8, not empty).
	Match string
	// ClientID is the backend's id of the player (the host reports it as the
	// player id, e.g. to Agones player tracking).
	ClientID uint64
	// UserData is for the game (a team, a skin, a rating), at most
	// MaxUserData bytes; sealed, so only the servers read it.
	UserData []byte
	// Expires is when the token stops admitting (millisecond precision).
	Expires time.Time
	// Servers are the servers the token is good for: 1 to MaxServers
	// strings of at most MaxServerLen bytes each. A server admits the token
	// only if one of them equals, byte for byte, one of the strings in its
	// VerifierConfig.Addresses (a host verifies with the Verifier in its
	// host.Config.Tokens). Nothing is resolved or normalized: a matchmaker
	// puts here each server's address exactly as that server's
	// VerifierConfig.Addresses spells it (its public host:port, which behind
	// NAT is not the socket's); for a server configured with
	// "203.0.113.5:7777", neither "game.example.com:7777" nor
	// "203.0.113.5:07777" matches. Write each with [ServerAddress], as the
	// server does (under Agones: agones.Address.Endpoint).
	Servers []string
}

// ServerAddress is how connect tokens name a server: its public host and
// port as host:port (an IPv6 host in brackets), the port in decimal. A
// matchmaker puts ServerAddress(address, port) of each server it allows in
// Claims.Servers, with the address and port the orchestrator gives it (an
// Agones allocation's status.address and status.ports[].port); the server
// names itself alike in its VerifierConfig.Addresses (package agones:
// Address.Endpoint). Nothing is resolved: "game.example.com:7777" does not
// match "203.0.113.5:7777".
func ServerAddress(host string, port int) string {
	return net.JoinHostPort(host, strconv.Itoa(port))
}

// check reports the first bound c breaks.
func (c *Claims) check() error {
	switch {
	case c.Match == "" || len(c.Match) > MaxMatch || !utf8.ValidString(c.Match):
		return fmt.Errorf("token: match of %d bytes: want 1..%d bytes of UTF-8", len(c.Match), MaxMatch)
	case len(c.UserData) > MaxUserData:
		return fmt.Errorf("token: user data of %d bytes exceeds %d", len(c.UserData), MaxUserData)
	case len(c.Servers) == 0 || len(c.Servers) > MaxServers:
		return fmt.Errorf("token: %d server addresses: want 1..%d", len(c.Servers), MaxServers)
	case c.Expires.UnixMilli() <= 0:
		return errors.New("token: Expires is not set")
	}
	for _, s := range c.Servers {
		if s == "" || len(s) > MaxServerLen {
			return fmt.Errorf("token: server address %q: want 1..%d bytes", s, MaxServerLen)
		}
	}
	return nil
}

// appendPlain appends the sealed part of a token:
//
//	client id u64 | match length u8 | match | user data length uvarint | user data |
//	server count u8 | per server: length u8 | address
func (c *Claims) appendPlain(b []byte) []byte {
	b = binary.BigEndian.AppendUint64(b, c.ClientID)
	b = append(b, byte(len(c.Match)))
	b = append(b, c.Match...)
	b = binary.AppendUvarint(b, uint64(len(c.UserData)))
	b = append(b, c.UserData...)
	b = append(b, byte(len(c.Servers)))
	for _, s := range c.Servers {
		b = append(b, byte(len(s)))
		b = append(b, s...)
	}
	return b
}

// Minter mints connect tokens: what a matchmaker calls when it places a
// player. Safe for concurrent use.
type Minter struct {
	id   uint32
	aead cipher.AEAD
	rand io.Reader
}

// NewMinter returns a minter sealing with key, named by keyID in every token
// so that servers holding several keys (a rotation) pick the right one.
func NewMinter(keyID uint32, key Key) *Minter {
	aead, _ := chacha20poly1305.NewX(key[:]) // (fails only on a key of the wrong size)
	return &Minter{id: keyID, aead: aead, rand: rand.Reader}
}

// Mint seals c into a token (at most MaxSize bytes) with a fresh random
// nonce. It fails if c breaks a bound. Allocates the token.
func (m *Minter) Mint(c Claims) ([]byte, error) {
	if err := c.check(); err != nil {
		return nil, err
	}
	var nonce [nonceSize]byte
	if _, err := io.ReadFull(m.rand, nonce[:]); err != nil {
		return nil, fmt.Errorf("token: nonce: %w", err)
	}
	b := make([]byte, 0, MaxSize)
	b = append(b, version)
	b = binary.BigEndian.AppendUint32(b, m.id)
	b = binary.BigEndian.AppendUint64(b, uint64(c.Expires.UnixMilli()))
	plain := c.appendPlain(make([]byte, 0, maxPlain))
	b = binary.BigEndian.AppendUint16(b, uint16(len(plain)+m.aead.Overhead()))
	b = append(b, nonce[:]...)
	return m.aead.Seal(b, nonce[:], plain, b[:headerLen]), nil
}

// header is a token's clear part, authenticated as the AEAD's additional
// data:
//
//	version u8 (1) | key id u32 | expires u64 (unix ms) | sealed length u16 | nonce [24]
//
// (big-endian), followed by the sealed part (appendPlain's bytes and the
// 16-byte tag of XChaCha20-Poly1305).
type header struct {
	keyID   uint32
	expires int64 // unix milliseconds
	nonce   [nonceSize]byte
}

// parseHeader splits a token into its header and sealed part; it checks
// only sizes and the version.
func parseHeader(tok []byte) (header, []byte, error) {
	var h header
	if len(tok) < minSize || len(tok) > MaxSize {
		return h, nil, fmt.Errorf("%w: %d bytes, want %d..%d", ErrMalformed, len(tok), minSize, MaxSize)
	}
	if tok[0] != version {
		return h, nil, fmt.Errorf("%w: format version %d, want %d", ErrMalformed, tok[0], version)
	}
	h.keyID = binary.BigEndian.Uint32(tok[1:])
	h.expires = int64(binary.BigEndian.Uint64(tok[5:]))
	if n := int(binary.BigEndian.Uint16(tok[13:])); n != len(tok)-headerLen {
		return h, nil, fmt.Errorf("%w: sealed part of %d bytes, the header says %d (truncated or extended)", ErrMalformed, len(tok)-headerLen, n)
	}
	copy(h.nonce[:], tok[15:headerLen])
	return h, tok[headerLen:], nil
}

// parsePlain decodes the sealed part into c; strings and user data are
// copied (they outlive the caller's buffer).
func parsePlain(b []byte, c *Claims) error {
	fail := func(what string) error { return fmt.Errorf("%w: sealed part: %s", ErrMalformed, what) }
	if len(b) < minPlain {
		return fail("truncated")
	}
	c.ClientID = binary.BigEndian.Uint64(b)
	b = b[8:]
	n := int(b[0])
	if n == 0 || n > MaxMatch || len(b) < 1+n {
		return fail("match length")
	}
	if !utf8.Valid(b[1 : 1+n]) {
		return fail("match is not UTF-8")
	}
	c.Match = string(b[1 : 1+n])
	b = b[1+n:]
	u, k := binary.Uvarint(b)
	if k <= 0 || u > MaxUserData || uint64(len(b)-k) < u || k != len(binary.AppendUvarint(nil, u)) {
		return fail("user data length")
	}
	if u > 0 {
		c.UserData = append([]byte(nil), b[k:k+int(u)]...)
	}
	b = b[k+int(u):]
	if len(b) < 1 || b[0] == 0 || b[0] > MaxServers {
		return fail("server count")
	}
	count := int(b[0])
	b = b[1:]
	c.Servers = make([]string, 0, count)
	for range count {
		if len(b) < 1 || b[0] == 0 || b[0] > MaxServerLen || len(b) < 1+int(b[0]) {
			return fail("server address length")
		}
		c.Servers = append(c.Servers, string(b[1:1+int(b[0])]))
		b = b[1+int(b[0]):]
	}
	if len(b) != 0 {
		return fail(fmt.Sprintf("%d trailing bytes", len(b)))
	}
	return nil
}
