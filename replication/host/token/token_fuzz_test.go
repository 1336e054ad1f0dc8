package token

import (
	"testing"
	"time"

	"github.com/archenet/archenet/transport"
)

// FuzzVerify feeds the verifier real tokens (sealed with its key, with
// another key, expired, for another server) and whatever the fuzzer makes
// of them: it never panics, and what it admits keeps every bound.
func FuzzVerify(f *testing.F) {
	m := seededMinter(7, testKey, 9)
	for _, tweak := range []func(*Claims){
		nil,
		func(c *Claims) { c.UserData = nil; c.Servers = c.Servers[1:] },
		func(c *Claims) { c.Expires = t0.Add(-time.Second) },
		func(c *Claims) { c.Servers = []string{"198.51.100.1:7777"} },
		func(c *Claims) { c.UserData = make([]byte, MaxUserData) },
	} {
		c := testClaims()
		if tweak != nil {
			tweak(&c)
		}
		tok, err := m.Mint(c)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(tok)
	}
	if tok, err := seededMinter(7, otherKey, 10).Mint(testClaims()); err == nil {
		f.Add(tok)
	}
	f.Add([]byte{})
	f.Add(make([]byte, minSize))
	// Sealed parts in the clear, for the decoder behind the AEAD.
	c := testClaims()
	f.Add(c.appendPlain(nil))
	f.Fuzz(func(t *testing.T, tok []byte) {
		if len(tok) > transport.MaxTokenLen {
			return // (the Hello refuses it first)
		}
		var p Claims
		if err := parsePlain(tok, &p); err == nil {
			p.Expires = t0
			if p.check() != nil || string(p.appendPlain(nil)) != string(tok) {
				t.Fatalf("sealed part does not round-trip: %+v", p)
			}
		}
		clk := &clock{now: t0}
		v := testVerifier(t, clk, nil)
		c, err := v.Verify(tok, nil)
		if err != nil {
			return
		}
		if c.Match == "" || len(c.Match) > MaxMatch || len(c.UserData) > MaxUserData || len(c.Servers) == 0 || len(c.Servers) > MaxServers {
			t.Fatalf("admitted claims out of bounds: %+v", c)
		}
		if !c.Expires.After(t0) {
			t.Fatalf("admitted an expired token: %v", c.Expires)
		}
		if _, err := v.Verify(tok, nil); err == nil {
			t.Fatalf("admitted twice")
		}
	})
}
