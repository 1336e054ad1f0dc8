package token

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/archenet/archenet/transport"
)

var (
	testKey  = Key{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32}
	otherKey = Key{31: 1}
	t0       = time.UnixMilli(1_800_000_000_000)
)

// seededMinter mints with nonces from a seeded source (reproducible tokens).
func seededMinter(id uint32, k Key, seed uint64) *Minter {
	m := NewMinter(id, k)
	m.rand = rand.NewChaCha8([32]byte{byte(seed)})
	return m
}

type clock struct{ now time.Time }

func (c *clock) Now() time.Time { return c.now }

func testVerifier(t testing.TB, clk *clock, tweak func(*VerifierConfig)) *Verifier {
	cfg := VerifierConfig{Keys: map[uint32]Key{7: testKey}, Addresses: []string{"203.0.113.5:7777"}, Now: clk.Now}
	if tweak != nil {
		tweak(&cfg)
	}
	v, err := NewVerifier(cfg)
	require.NoError(t, err)
	return v
}

func testClaims() Claims {
	return Claims{Match: "duel-7", ClientID: 42, UserData: []byte("team=red"), Expires: t0.Add(30 * time.Second),
		Servers: []string{"198.51.100.1:7777", "203.0.113.5:7777"}}
}

func hostsDuel(m string) bool { return m == "duel-7" }

// TestVerify: every reason a token is refused, each named, and a valid one
// admitted once.
func TestVerify(t *testing.T) {
	clk := &clock{now: t0}
	v := testVerifier(t, clk, nil)
	m := seededMinter(7, testKey, 1)
	good, err := m.Mint(testClaims())
	require.NoError(t, err)
	require.LessOrEqual(t, len(good), MaxSize)

	mint := func(mm *Minter, tweak func(*Claims)) []byte {
		c := testClaims()
		if tweak != nil {
			tweak(&c)
		}
		tok, err := mm.Mint(c)
		require.NoError(t, err)
		return tok
	}
	altered := bytes.Clone(good)
	altered[len(altered)-20] ^= 1
	alteredExpiry := bytes.Clone(good)
	alteredExpiry[12] ^= 1 // later, but the header is authenticated
	cases := []struct {
		name string
		tok  []byte
		want error
		text string
	}{
		{"expired", mint(m, func(c *Claims) { c.Expires = t0.Add(-time.Second) }), ErrExpired, "connect token expired 1s ago"},
		{"expires now", mint(m, func(c *Claims) { c.Expires = t0 }), ErrExpired, ""},
		{"too far ahead", mint(m, func(c *Claims) { c.Expires = t0.Add(2 * time.Hour) }), ErrExpired, "beyond the server's MaxLifetime 1h0m0s"},
		{"unknown key id", mint(seededMinter(8, testKey, 2), nil), ErrWrongKey, "key id 8 is not one of its keys"},
		{"wrong key", mint(seededMinter(7, otherKey, 3), nil), ErrWrongKey, "it does not open (wrong key, or altered)"},
		{"altered", altered, ErrWrongKey, ""},
		{"altered expiry", alteredExpiry, ErrWrongKey, ""},
		{"other server", mint(m, func(c *Claims) { c.Servers = []string{"198.51.100.1:7777"} }), ErrWrongServer, ""},
		{"unknown match", mint(m, func(c *Claims) { c.Match = "duel-8" }), ErrUnknownMatch, `unknown match "duel-8"`},
		{"empty", nil, ErrMalformed, ""},
		{"truncated", good[:len(good)-1], ErrMalformed, "truncated or extended"},
		{"extended", append(bytes.Clone(good), 0), ErrMalformed, ""},
		{"oversized", make([]byte, transport.MaxTokenLen), ErrMalformed, ""},
		{"a plain match name", []byte("duel-7"), ErrMalformed, ""},
		{"other version", append([]byte{2}, good[1:]...), ErrMalformed, "format version 2"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := v.Verify(tc.tok, hostsDuel)
			require.ErrorIs(t, err, tc.want)
			if tc.text != "" {
				require.Contains(t, err.Error(), tc.text)
			}
		})
	}
	// A sealed part with a non-minimal length is refused (one encoding per
	// token).
	c0 := testClaims()
	c0.UserData = nil
	plain := c0.appendPlain(nil)
	at := 8 + 1 + len(c0.Match)
	var p Claims
	require.NoError(t, parsePlain(plain, &p))
	require.ErrorIs(t, parsePlain(append(append(append([]byte{}, plain[:at]...), 0x80, 0x00), plain[at+1:]...), &p), ErrMalformed)

	// Every prefix of a good token is malformed, none spends it.
	for i := range len(good) {
		_, err := v.Verify(good[:i], hostsDuel)
		require.ErrorIs(t, err, ErrMalformed, "prefix %d", i)
	}

	c, err := v.Verify(good, hostsDuel)
	require.NoError(t, err)
	want := testClaims()
	want.Expires = want.Expires.Round(time.Millisecond)
	require.Equal(t, want, Claims{Match: c.Match, ClientID: c.ClientID, UserData: c.UserData, Expires: c.Expires, Servers: c.Servers})
	require.Equal(t, 1, v.ReplayEntries())
	_, err = v.Verify(good, hostsDuel)
	require.ErrorIs(t, err, ErrReplayed)
	require.EqualError(t, err, "connect token already used")
}

// TestUnknownMatchNotSpent: a token refused because its match is not (yet)
// hosted admits once the match is.
func TestUnknownMatchNotSpent(t *testing.T) {
	clk := &clock{now: t0}
	v := testVerifier(t, clk, nil)
	tok, err := seededMinter(7, testKey, 4).Mint(testClaims())
	require.NoError(t, err)
	_, err = v.Verify(tok, func(string) bool { return false })
	require.ErrorIs(t, err, ErrUnknownMatch)
	_, err = v.Verify(tok, hostsDuel)
	require.NoError(t, err)
}

// TestRelease: a released token admits once more, and only once; another
// token stays spent; garbage is ignored.
func TestRelease(t *testing.T) {
	clk := &clock{now: t0}
	v := testVerifier(t, clk, nil)
	m := seededMinter(7, testKey, 5)
	tok, err := m.Mint(testClaims())
	require.NoError(t, err)
	other, err := m.Mint(testClaims())
	require.NoError(t, err)
	for _, tk := range [][]byte{tok, other} {
		_, err = v.Verify(tk, hostsDuel)
		require.NoError(t, err)
	}
	v.Release(tok)
	v.Release([]byte{1, 2, 3})
	v.Release(nil)
	require.Equal(t, 1, v.ReplayEntries())
	_, err = v.Verify(other, hostsDuel)
	require.ErrorIs(t, err, ErrReplayed)
	_, err = v.Verify(tok, hostsDuel)
	require.NoError(t, err, "released")
	_, err = v.Verify(tok, hostsDuel)
	require.ErrorIs(t, err, ErrReplayed, "spent again")
}

// TestKeyRotation: a verifier holding two keys admits tokens of both.
func TestKeyRotation(t *testing.T) {
	clk := &clock{now: t0}
	v := testVerifier(t, clk, func(c *VerifierConfig) { c.Keys[8] = otherKey })
	for i, m := range []*Minter{seededMinter(7, testKey, 5), seededMinter(8, otherKey, 6)} {
		tok, err := m.Mint(testClaims())
		require.NoError(t, err)
		_, err = v.Verify(tok, nil)
		require.NoError(t, err, "minter %d", i)
	}
}

// TestReplayCacheBounded: full of unexpired tokens, the cache refuses new
// ones (ErrBusy) rather than forget one; once they expire it sweeps them and
// admits again.
func TestReplayCacheBounded(t *testing.T) {
	clk := &clock{now: t0}
	v := testVerifier(t, clk, func(c *VerifierConfig) { c.ReplayCapacity = 4 })
	m := seededMinter(7, testKey, 7)
	var toks [][]byte
	for i := range 5 {
		c := testClaims()
		c.Expires = t0.Add(time.Duration(10+i) * time.Second)
		tok, err := m.Mint(c)
		require.NoError(t, err)
		toks = append(toks, tok)
	}
	for _, tok := range toks[:4] {
		_, err := v.Verify(tok, nil)
		require.NoError(t, err)
	}
	_, err := v.Verify(toks[4], nil)
	require.ErrorIs(t, err, ErrBusy)
	require.Equal(t, 4, v.ReplayEntries())
	// The first expired: the next token sweeps it out and takes its place.
	clk.now = t0.Add(10 * time.Second)
	_, err = v.Verify(toks[4], nil)
	require.NoError(t, err)
	require.Equal(t, 4, v.ReplayEntries())
	// Used tokens are still refused as replays until they expire.
	_, err = v.Verify(toks[3], nil)
	require.ErrorIs(t, err, ErrReplayed)
}

// TestMintBounds: Mint refuses claims a verifier could not take.
func TestMintBounds(t *testing.T) {
	m := NewMinter(1, testKey)
	for name, tweak := range map[string]func(*Claims){
		"no match":        func(c *Claims) { c.Match = "" },
		"long match":      func(c *Claims) { c.Match = strings.Repeat("m", MaxMatch+1) },
		"match not UTF-8": func(c *Claims) { c.Match = "\xff" },
		"user data":       func(c *Claims) { c.UserData = make([]byte, MaxUserData+1) },
		"no servers":      func(c *Claims) { c.Servers = nil },
		"many servers":    func(c *Claims) { c.Servers = make([]string, MaxServers+1) },
		"empty server":    func(c *Claims) { c.Servers = []string{""} },
		"long server":     func(c *Claims) { c.Servers = []string{strings.Repeat("s", MaxServerLen+1)} },
		"no expiry":       func(c *Claims) { c.Expires = time.Time{} },
	} {
		c := testClaims()
		tweak(&c)
		_, err := m.Mint(c)
		require.Error(t, err, name)
	}
	// The largest claims fit the Hello.
	c := testClaims()
	c.Match, c.UserData = strings.Repeat("m", MaxMatch), make([]byte, MaxUserData)
	c.Servers = make([]string, MaxServers)
	for i := range c.Servers {
		c.Servers[i] = strings.Repeat("s", MaxServerLen)
	}
	tok, err := m.Mint(c)
	require.NoError(t, err)
	require.Len(t, tok, MaxSize)
	require.LessOrEqual(t, MaxSize, transport.MaxTokenLen)
}

// TestVerifyCheap: refusing junk costs no allocation by what it claims:
// a 1 KiB token of junk allocates what a short one does, and a good token's
// check allocates only its claims.
func TestVerifyCheap(t *testing.T) {
	clk := &clock{now: t0}
	v := testVerifier(t, clk, nil)
	good, err := seededMinter(7, testKey, 8).Mint(testClaims())
	require.NoError(t, err)
	junk := make([]byte, transport.MaxTokenLen)
	forged := bytes.Clone(good)
	forged[len(forged)-1] ^= 1
	for name, tok := range map[string][]byte{"short": good[:3], "long junk": junk, "forged": forged} {
		allocs := testing.AllocsPerRun(100, func() { _, _ = v.Verify(tok, nil) })
		require.LessOrEqual(t, allocs, 8.0, name)
		if raceEnabled {
			continue // (sync.Pool drops buffers at random under the race detector)
		}
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		for range 100 {
			_, _ = v.Verify(tok, nil)
		}
		runtime.ReadMemStats(&after)
		// The refusal's message, not the token's size.
		require.Less(t, (after.TotalAlloc-before.TotalAlloc)/100, uint64(400), name)
	}
}

func TestNewVerifierConfig(t *testing.T) {
	for name, cfg := range map[string]VerifierConfig{
		"no keys":          {Addresses: []string{"a:1"}},
		"no addresses":     {Keys: map[uint32]Key{1: testKey}},
		"empty address":    {Keys: map[uint32]Key{1: testKey}, Addresses: []string{""}},
		"negative life":    {Keys: map[uint32]Key{1: testKey}, Addresses: []string{"a:1"}, MaxLifetime: -1},
		"negative entries": {Keys: map[uint32]Key{1: testKey}, Addresses: []string{"a:1"}, ReplayCapacity: -1},
	} {
		_, err := NewVerifier(cfg)
		require.Error(t, err, name)
	}
}

func TestParseKey(t *testing.T) {
	k, err := ParseKey(testKey.String())
	require.NoError(t, err)
	require.Equal(t, testKey, k)
	b64 := "AQIDBAUGBwgJCgsMDQ4PEBESExQVFhcYGRobHB0eHyA="
	k, err = ParseKey(b64)
	require.NoError(t, err)
	require.Equal(t, testKey, k)
	_, err = ParseKey("abcd")
	require.Error(t, err)
	require.NotEqual(t, NewKey(), NewKey())
}

var _ = errors.Is
