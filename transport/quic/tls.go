package quic

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"os"
	"time"

	"github.com/archenet/archenet/transport/internal/quicnet"
	"github.com/archenet/archenet/transport/internal/selfsigned"
)

// DevCert is a self-signed development certificate (ECDSA P-256) for "localhost" and
// 127.0.0.1 / ::1, with the matching TLS configurations: the client trusts exactly this
// certificate, so verification stays on.
type DevCert struct {
	Certificate tls.Certificate   // certificate and private key, for a server
	Leaf        *x509.Certificate // the parsed certificate
	CertPEM     []byte            // PEM "CERTIFICATE"
	KeyPEM      []byte            // PEM "PRIVATE KEY" (PKCS #8)
}

// GenerateDevCert creates a fresh DevCert valid from one hour ago for validFor
// (zero: 30 days). It is meant for development and tests, not for production servers.
func GenerateDevCert(validFor time.Duration) (*DevCert, error) {
	if validFor <= 0 {
		validFor = 30 * 24 * time.Hour
	}
	now := time.Now()
	cert, err := selfsigned.New(selfsigned.Template{
		CommonName: "archenet development certificate",
		NotBefore:  now.Add(-time.Hour), NotAfter: now.Add(validFor),
		IsCA: true,
	})
	if err != nil {
		return nil, err
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(cert.PrivateKey)
	if err != nil {
		return nil, err
	}
	return &DevCert{
		Certificate: cert,
		Leaf:        cert.Leaf,
		CertPEM:     pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Certificate[0]}),
		KeyPEM:      pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}),
	}, nil
}

// ServerTLS returns a server TLS configuration presenting the certificate.
func (d *DevCert) ServerTLS() *tls.Config {
	return &tls.Config{Certificates: []tls.Certificate{d.Certificate}, MinVersion: tls.VersionTLS13}
}

// ClientTLS returns a client TLS configuration that trusts exactly this certificate.
func (d *DevCert) ClientTLS() *tls.Config {
	pool := x509.NewCertPool()
	pool.AddCert(d.Leaf)
	return &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS13}
}

// WriteFiles writes the certificate and key as PEM files (the key with mode 0600).
func (d *DevCert) WriteFiles(certFile, keyFile string) error {
	if err := os.WriteFile(certFile, d.CertPEM, 0o644); err != nil {
		return fmt.Errorf("writing certificate: %w", err)
	}
	if err := os.WriteFile(keyFile, d.KeyPEM, 0o600); err != nil {
		return fmt.Errorf("writing key: %w", err)
	}
	return nil
}

// LoadDevCert reads a certificate and key written by [DevCert.WriteFiles].
func LoadDevCert(certFile, keyFile string) (*DevCert, error) {
	certPEM, err := os.ReadFile(certFile)
	if err != nil {
		return nil, err
	}
	keyPEM, err := os.ReadFile(keyFile)
	if err != nil {
		return nil, err
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, err
	}
	leaf, err := x509.ParseCertificate(cert.Certificate[0])
	if err != nil {
		return nil, err
	}
	cert.Leaf = leaf
	return &DevCert{Certificate: cert, Leaf: leaf, CertPEM: certPEM, KeyPEM: keyPEM}, nil
}

func serverTLS(c *Config) (*tls.Config, error) {
	t := quicnet.ServerTLS(c.TLS, ALPN)
	if t == nil {
		return nil, errors.New("quic: Listen needs Config.TLS with a server certificate (see GenerateDevCert)")
	}
	return t, nil
}

func clientTLS(c *Config, addr string) *tls.Config {
	host, _, _ := net.SplitHostPort(addr)
	t := quicnet.ClientTLS(c.TLS, ALPN, host)
	if c.InsecureSkipVerify {
		t.InsecureSkipVerify = true
	}
	return t
}
