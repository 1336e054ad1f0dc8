// Package token mints and checks connect tokens: how a game's backend
// admits to a server only the players its matchmaker placed there (the
// netcode.io model).
//
// # Outline
//
// The matchmaker and the servers share a [Key] (32 secret bytes; several,
// named by key id, during a rotation). When it places a player, the
// matchmaker calls [Minter.Mint] with the [Claims] — the match, the
// player's id, user data for the game, an expiry (seconds to minutes
// ahead) and the addresses of the servers it may join — and hands the
// token to the player's game client, which presents it in its Hello
// (replication.ClientConfig.Token). The token is sealed with
// XChaCha20-Poly1305 under a random 24-byte nonce: the client can neither
// read nor alter it.
//
// A server checks it with [Verifier.Verify] before it spends anything on the
// client: the sizes and the clear header first (format, key id, expiry,
// sealed length), then the AEAD (no allocation before it opens, whatever
// the bytes say), then the server address, the match, and the replay cache
// (each token admits one connection; it remembers spent tokens until they
// expire, bounded by [VerifierConfig.ReplayCapacity]). Every refusal names
// its reason: [ErrMalformed], [ErrWrongKey], [ErrExpired],
// [ErrWrongServer], [ErrUnknownMatch], [ErrReplayed] or [ErrBusy].
// replication/host does all of this when its Config.Tokens is set.
//
// A token is at most [MaxSize] bytes (905), within the Hello's 1024:
//
//	version u8 | key id u32 | expires u64 (unix ms) | sealed length u16 | nonce [24] |
//	sealed(client id u64 | match length u8 | match | user data length uvarint | user data |
//	       server count u8 | per server: length u8 | address) | tag [16]
//
// The clear header is the AEAD's additional data, so it cannot be altered
// either.
//
// # Tasks
//
//   - Make a key: [NewKey]; store it as [Key.String], read it with [ParseKey].
//   - Mint a token (the matchmaker): [NewMinter], [Minter.Mint].
//   - Check a token (a server; replication/host does it): [NewVerifier], [Verifier.Verify].
//   - Tell why a token was refused: errors.Is with the Err values.
package token
