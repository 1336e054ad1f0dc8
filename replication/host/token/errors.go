package token

import "github.com/archenet/archenet/transport"

// Why a token is refused. Verifier.Verify's errors match one of them
// (errors.Is) and add the detail; the host sends the text to the client as
// its rejection reason, with the error's close code (each is a
// *transport.CodeError), so that the client's error matches the same one:
// errors.Is(client.Err(), token.ErrExpired). transport.CodeOf(err).Retryable
// says whether the same token may pass later (ErrBusy, ErrUnknownMatch) or a
// new one is needed (the others).
var (
	// ErrMalformed: not a token of this format (truncated, oversized, a
	// sealed part that does not decode). transport.CodeTokenMalformed.
	ErrMalformed error = &transport.CodeError{Code: transport.CodeTokenMalformed, Text: "connect token malformed"}
	// ErrWrongKey: sealed with a key this server does not hold (an unknown
	// key id, or a token that does not open: wrong key or altered bytes).
	// transport.CodeTokenWrongKey.
	ErrWrongKey error = &transport.CodeError{Code: transport.CodeTokenWrongKey, Text: "connect token not sealed with this server's key"}
	// ErrExpired: past its expiry, or expiring further ahead than the
	// server allows (VerifierConfig.MaxLifetime). transport.CodeTokenExpired.
	ErrExpired error = &transport.CodeError{Code: transport.CodeTokenExpired, Text: "connect token expired"}
	// ErrWrongServer: the token does not name this server's address.
	// transport.CodeTokenWrongServer.
	ErrWrongServer error = &transport.CodeError{Code: transport.CodeTokenWrongServer, Text: "connect token is for another server"}
	// ErrReplayed: the token was already used (each admits one connection).
	// transport.CodeTokenReplayed.
	ErrReplayed error = &transport.CodeError{Code: transport.CodeTokenReplayed, Text: "connect token already used"}
	// ErrBusy: the replay cache is full of unexpired tokens
	// (VerifierConfig.ReplayCapacity); try again later. transport.CodeBusy:
	// a client's errors.Is(err, ErrBusy) holds for any busy refusal.
	ErrBusy error = &transport.CodeError{Code: transport.CodeBusy, Text: "server busy: too many connect tokens in use"}
	// ErrUnknownMatch: the token is for a match this server does not host
	// (not yet, or no more). The token is not spent: the client may try
	// again. It is transport.ErrUnknownMatch (transport.CodeUnknownMatch).
	ErrUnknownMatch error = transport.ErrUnknownMatch
)
