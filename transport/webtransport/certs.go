//go:build !js

package webtransport

import (
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/archenet/archenet/transport/internal/selfsigned"
)

// MaxHashedValidity is the longest validity browsers accept for a certificate pinned by
// its hash (serverCertificateHashes): 14 days, from NotBefore to NotAfter.
const MaxHashedValidity = 14 * 24 * time.Hour

// SelfSignedConfig configures [NewSelfSigned]. Every zero value has a default.
type SelfSignedConfig struct {
	// Validity is each certificate's lifetime. At most [MaxHashedValidity] (an error
	// otherwise). Zero: 13 days.
	Validity time.Duration
	// Overlap is how long before the current certificate expires its successor takes
	// over; the successor's hash is published (Hashes) from the start, so a page that
	// loaded before the rotation still connects after it. Must be less than half the
	// Validity (an error otherwise). Zero: Validity/4.
	Overlap time.Duration
	// Now is the clock of rotations. Nil: time.Now.
	Now func() time.Time
}

// SelfSigned is a rotating pair of self-signed ECDSA P-256 certificates that browsers
// accept by hash, without a CA: the current one, which the server presents, and its
// successor, valid from Overlap before the current one expires. Both hashes are
// published ([SelfSigned.Hashes], served by [EndpointHandler]); at the hand-over the
// successor becomes current and a new successor is made.
//
// Safe for concurrent use. Rotation happens lazily, in GetCertificate and Hashes.
type SelfSigned struct {
	cfg SelfSignedConfig

	mu      sync.Mutex
	current *issued
	next    *issued
}

type issued struct {
	cert tls.Certificate
	hash CertHash
}

// NewSelfSigned makes the first certificate and its successor.
func NewSelfSigned(cfg SelfSignedConfig) (*SelfSigned, error) {
	if cfg.Validity == 0 {
		cfg.Validity = 13 * 24 * time.Hour
	}
	if cfg.Validity < 0 || cfg.Validity > MaxHashedValidity {
		return nil, fmt.Errorf("webtransport: SelfSignedConfig.Validity %v: want more than 0 and at most %v (browsers refuse longer ones)", cfg.Validity, MaxHashedValidity)
	}
	if cfg.Overlap == 0 {
		cfg.Overlap = cfg.Validity / 4
	}
	if cfg.Overlap < 0 || 2*cfg.Overlap >= cfg.Validity {
		return nil, fmt.Errorf("webtransport: SelfSignedConfig.Overlap %v: want more than 0 and less than half the validity %v", cfg.Overlap, cfg.Validity)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	s := &SelfSigned{cfg: cfg}
	var err error
	now := cfg.Now()
	if s.current, err = issue(now, cfg.Validity); err != nil {
		return nil, err
	}
	if s.next, err = issue(s.handOver(), cfg.Validity); err != nil {
		return nil, err
	}
	return s, nil
}

// handOver is when the successor takes over. Called with mu held (or before sharing).
func (s *SelfSigned) handOver() time.Time {
	return s.current.cert.Leaf.NotAfter.Add(-s.cfg.Overlap)
}

// issue makes a certificate valid from from for validity.
func issue(from time.Time, validity time.Duration) (*issued, error) {
	cert, err := selfsigned.New(selfsigned.Template{
		CommonName: "archenet WebTransport (self-signed, pinned by hash)",
		NotBefore:  from, NotAfter: from.Add(validity),
	})
	if err != nil {
		return nil, err
	}
	return &issued{cert: cert, hash: HashCertificate(cert.Certificate[0])}, nil
}

// rotateLocked hands over to the successor once its time has come (repeatedly, after a
// long sleep) and makes a new successor.
func (s *SelfSigned) rotateLocked() error {
	now := s.cfg.Now()
	for !now.Before(s.handOver()) {
		s.current = s.next
		from := s.handOver()
		if now.After(s.current.cert.Leaf.NotAfter) { // slept past both: start afresh
			cur, err := issue(now, s.cfg.Validity)
			if err != nil {
				return err
			}
			s.current, from = cur, cur.cert.Leaf.NotAfter.Add(-s.cfg.Overlap)
		}
		next, err := issue(from, s.cfg.Validity)
		if err != nil {
			return err
		}
		s.next = next
	}
	return nil
}

// GetCertificate returns the current certificate, rotating first if due. It is the
// tls.Config hook ([SelfSigned.TLSConfig] sets it).
func (s *SelfSigned) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.rotateLocked(); err != nil {
		return nil, err
	}
	c := s.current.cert
	return &c, nil
}

// TLSConfig returns a server TLS configuration presenting the current certificate.
func (s *SelfSigned) TLSConfig() *tls.Config {
	return &tls.Config{GetCertificate: s.GetCertificate, MinVersion: tls.VersionTLS13}
}

// Hashes returns the hashes of the current certificate and its successor (in that
// order), rotating first if due. A page passes both to serverCertificateHashes.
func (s *SelfSigned) Hashes() []CertHash {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.rotateLocked(); err != nil {
		return []CertHash{s.current.hash}
	}
	return []CertHash{s.current.hash, s.next.hash}
}

// Current returns the parsed current certificate, for diagnostics.
func (s *SelfSigned) Current() *x509.Certificate {
	s.mu.Lock()
	defer s.mu.Unlock()
	_ = s.rotateLocked()
	return s.current.cert.Leaf
}

// ErrCertNotPinned is matched (errors.Is) by the error of a native Dial with
// [Config].CertHashes whose server presented a certificate that is not one of them, or
// one a browser would refuse to pin.
var ErrCertNotPinned = errors.New("webtransport: server certificate does not match the pinned hashes")

// verifyPinned checks the server certificate as a browser does for
// serverCertificateHashes: its hash is listed, it is ECDSA P-256 (or RSA), it is valid
// now, and for at most MaxHashedValidity.
func verifyPinned(hashes []CertHash, now func() time.Time) func(tls.ConnectionState) error {
	return func(cs tls.ConnectionState) error {
		if len(cs.PeerCertificates) == 0 {
			return fmt.Errorf("%w: no certificate", ErrCertNotPinned)
		}
		leaf := cs.PeerCertificates[0]
		h := HashCertificate(leaf.Raw)
		found := false
		for _, p := range hashes {
			found = found || p == h
		}
		if !found {
			return fmt.Errorf("%w: its sha-256 is %s, not one of the %d given (did the server rotate it? fetch its endpoint again)", ErrCertNotPinned, h, len(hashes))
		}
		if d := leaf.NotAfter.Sub(leaf.NotBefore); d > MaxHashedValidity {
			return fmt.Errorf("%w: valid for %v, more than %v", ErrCertNotPinned, d, MaxHashedValidity)
		}
		if t := now(); t.Before(leaf.NotBefore) || t.After(leaf.NotAfter) {
			return fmt.Errorf("%w: not valid now (%v to %v)", ErrCertNotPinned, leaf.NotBefore, leaf.NotAfter)
		}
		return nil
	}
}

// HashCertificate returns the CertHash of a DER-encoded certificate (its
// SHA-256). Not in a page's build, which only pins hashes a server gave it
// and so links no SHA-256.
func HashCertificate(der []byte) CertHash { return sha256.Sum256(der) }
