package token_test

import (
	"errors"
	"fmt"
	"time"

	"github.com/archenet/archenet/replication/host/token"
)

// A matchmaker mints a token for a player it placed in match "duel-7" on
// the server at 203.0.113.5:7777; that server admits it once.
func ExampleMinter_Mint() {
	key := token.NewKey() // shared by the matchmaker and the servers (e.g. a Kubernetes secret)

	// The matchmaker:
	minter := token.NewMinter(1, key)
	tok, err := minter.Mint(token.Claims{
		Match:    "duel-7",
		ClientID: 42,
		UserData: []byte("team=red"),
		Expires:  time.Now().Add(30 * time.Second),
		Servers:  []string{"203.0.113.5:7777"},
	})
	if err != nil {
		panic(err)
	}
	// ... the game client puts tok in replication.ClientConfig.Token.

	// The server (replication/host does this with Config.Tokens):
	v, err := token.NewVerifier(token.VerifierConfig{Keys: map[uint32]token.Key{1: key}, Addresses: []string{"203.0.113.5:7777"}})
	if err != nil {
		panic(err)
	}
	hosted := func(match string) bool { return match == "duel-7" }
	c, err := v.Verify(tok, hosted)
	fmt.Println(c.Match, c.ClientID, string(c.UserData), err)
	_, err = v.Verify(tok, hosted)
	fmt.Println(errors.Is(err, token.ErrReplayed), err)
	// Output:
	// duel-7 42 team=red <nil>
	// true connect token already used
}
