package selfsigned

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/x509"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A certificate is ECDSA P-256 for localhost and the loopback addresses, valid
// as asked, and verifies for localhost as its own root; only a CA one may sign.
func TestNew(t *testing.T) {
	from := time.Now().Add(-time.Minute).Truncate(time.Second)
	for _, ca := range []bool{false, true} {
		c, err := New(Template{CommonName: "test", NotBefore: from, NotAfter: from.Add(time.Hour), IsCA: ca})
		require.NoError(t, err)
		leaf := c.Leaf
		require.Equal(t, [][]byte{leaf.Raw}, c.Certificate)
		require.Equal(t, "test", leaf.Subject.CommonName)
		require.True(t, leaf.NotBefore.Equal(from))
		require.True(t, leaf.NotAfter.Equal(from.Add(time.Hour)))
		require.Equal(t, elliptic.P256(), c.PrivateKey.(*ecdsa.PrivateKey).Curve)
		require.Equal(t, []string{"localhost"}, leaf.DNSNames)
		require.Len(t, leaf.IPAddresses, 2)
		require.Equal(t, ca, leaf.IsCA)
		require.Equal(t, ca, leaf.KeyUsage&x509.KeyUsageCertSign != 0)

		roots := x509.NewCertPool()
		roots.AddCert(leaf)
		_, err = leaf.Verify(x509.VerifyOptions{Roots: roots, DNSName: "localhost"})
		require.NoError(t, err)
	}
}
