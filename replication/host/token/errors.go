package token

import "errors"

// Why a token is refused. Verifier.Verify's errors match one of them
// (errors.Is) and add the detail; the host sends the text to the client as
// its rejection reason.
var (
	// ErrMalformed: not a token of this format (truncated, oversized, a
	// sealed part that does not decode).
	ErrMalformed = errors.New("connect token malformed")
	// ErrWrongKey: sealed with a key this server does not hold (an unknown
	// key id, or a token that does not open: wrong key or altered bytes).
	ErrWrongKey = errors.New("connect token not sealed with this server's key")
	// ErrExpired: past its expiry, or expiring further ahead than the
	// server allows (VerifierConfig.MaxLifetime).
	ErrExpired = errors.New("connect token expired")
	// ErrWrongServer: the token does not name this server's address.
	ErrWrongServer = errors.New("connect token is for another server")
	// ErrReplayed: the token was already used (each admits one connection).
	ErrReplayed = errors.New("connect token already used")
	// ErrBusy: the replay cache is full of unexpired tokens
	// (VerifierConfig.ReplayCapacity); try again later.
	ErrBusy = errors.New("server busy: too many connect tokens in use")
	// ErrUnknownMatch: the token is for a match this server does not host
	// (not yet, or no more). The token is not spent: the client may try
	// again.
	ErrUnknownMatch = errors.New("unknown match")
)
