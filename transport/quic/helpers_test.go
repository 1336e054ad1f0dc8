package quic_test

import (
	"crypto/x509"

	"github.com/archenet/archenet/transport/quic"
)

func x509VerifyOptions(c *quic.DevCert) x509.VerifyOptions {
	roots := x509.NewCertPool()
	roots.AddCert(c.Leaf)
	return x509.VerifyOptions{Roots: roots, DNSName: "localhost"}
}
