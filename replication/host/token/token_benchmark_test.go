package token

import (
	"bytes"
	"testing"
	"time"

	"github.com/archenet/archenet/transport"
)

// BenchmarkVerify: what a server spends on one token: refused before the
// AEAD (junk, expired), refused by it (forged), and admitted (a fresh
// token each time, so the replay cache grows and sweeps as in service).
func BenchmarkVerify(b *testing.B) {
	clk := &clock{now: t0}
	m := seededMinter(7, testKey, 11)
	good, err := m.Mint(testClaims())
	if err != nil {
		b.Fatal(err)
	}
	forged := bytes.Clone(good)
	forged[len(forged)-1] ^= 1
	c := testClaims()
	c.Expires = t0.Add(-time.Second)
	expired, _ := m.Mint(c)
	for name, tok := range map[string][]byte{"junk": make([]byte, transport.MaxTokenLen), "expired": expired, "forged": forged} {
		b.Run(name, func(b *testing.B) {
			v := testVerifier(b, clk, nil)
			b.ReportAllocs()
			for b.Loop() {
				_, _ = v.Verify(tok, nil)
			}
		})
	}
	b.Run("valid", func(b *testing.B) {
		v := testVerifier(b, clk, func(c *VerifierConfig) { c.ReplayCapacity = 1 << 20 })
		toks := make([][]byte, 0, 4096)
		for range cap(toks) {
			tok, _ := m.Mint(testClaims())
			toks = append(toks, tok)
		}
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			if i == len(toks) {
				b.StopTimer()
				v = testVerifier(b, clk, func(c *VerifierConfig) { c.ReplayCapacity = 1 << 20 })
				i = 0
				b.StartTimer()
			}
			if _, err := v.Verify(toks[i], nil); err != nil {
				b.Fatal(err)
			}
			i++
		}
	})
}
