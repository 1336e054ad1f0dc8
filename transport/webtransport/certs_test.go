//go:build !js

package webtransport_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/archenet/archenet/transport/webtransport"
)

// Certificates stay within what browsers pin (ECDSA P-256, at most 14 days), the
// successor's hash is published before it takes over, and the hand-over happens
// before the current one expires.
func TestSelfSignedRotation(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	s, err := webtransport.NewSelfSigned(webtransport.SelfSignedConfig{Now: func() time.Time { return now }})
	require.NoError(t, err)
	cur := s.Current()
	require.LessOrEqual(t, cur.NotAfter.Sub(cur.NotBefore), webtransport.MaxHashedValidity)
	pub, ok := cur.PublicKey.(*ecdsa.PublicKey)
	require.True(t, ok)
	require.Equal(t, elliptic.P256(), pub.Curve)
	h0 := s.Hashes()
	require.Len(t, h0, 2)
	require.Equal(t, webtransport.HashCertificate(cur.Raw), h0[0])

	// Just before the hand-over (13 days - 13/4 days): still the first.
	now = cur.NotAfter.Add(-13 * 24 * time.Hour / 4).Add(-time.Minute)
	require.Equal(t, h0, s.Hashes())
	// At the hand-over: the successor, already published, is current, and a new
	// successor is published; the old one had time left.
	now = now.Add(2 * time.Minute)
	h1 := s.Hashes()
	require.Equal(t, h0[1], h1[0])
	require.NotEqual(t, h0[1], h1[1])
	require.True(t, now.Before(cur.NotAfter))
	c, err := s.GetCertificate(nil)
	require.NoError(t, err)
	require.Equal(t, h1[0], webtransport.HashCertificate(c.Certificate[0]))
	require.False(t, now.Before(c.Leaf.NotBefore), "the new current certificate is valid")

	// After a month asleep: a fresh pair, valid now.
	now = now.Add(30 * 24 * time.Hour)
	h2 := s.Hashes()
	require.NotContains(t, h2, h1[0])
	require.True(t, !now.Before(s.Current().NotBefore) && now.Before(s.Current().NotAfter))
}

func TestSelfSignedConfigErrors(t *testing.T) {
	_, err := webtransport.NewSelfSigned(webtransport.SelfSignedConfig{Validity: 15 * 24 * time.Hour})
	require.ErrorContains(t, err, "browsers refuse longer ones")
	_, err = webtransport.NewSelfSigned(webtransport.SelfSignedConfig{Validity: 10 * 24 * time.Hour, Overlap: 5 * 24 * time.Hour})
	require.ErrorContains(t, err, "less than half the validity")
}
