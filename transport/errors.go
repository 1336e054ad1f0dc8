package transport

import (
	"errors"
	"fmt"
	"strconv"
)

// CloseCode says why a connection was closed. It travels to the peer with the close
// (on QUIC as the application error code of the CONNECTION_CLOSE frame).
//
// Codes below [CodeApplication] are reserved for archenet; an application defines its
// own codes as CodeApplication+n.
type CloseCode uint16

const (
	// CodeNormal is an orderly close without an error.
	CodeNormal CloseCode = 0
	// CodeProtocolError: the peer sent something that violates the wire protocol
	// (a malformed frame, an unexpected message, a QUIC transport error).
	CodeProtocolError CloseCode = 1
	// CodeMessageTooLarge: the peer announced a reliable message above the maximum size.
	CodeMessageTooLarge CloseCode = 2
	// CodeHandshakeFailed: the archenet handshake failed (version or protocol hash mismatch,
	// malformed handshake message).
	CodeHandshakeFailed CloseCode = 3
	// CodeRejected: the server refused the client (authentication failed, server full).
	CodeRejected CloseCode = 4
	// CodeTimeout: no network activity for longer than the idle timeout.
	CodeTimeout CloseCode = 5
	// CodeFlood: the peer sent datagrams faster than the configured rate limit.
	CodeFlood CloseCode = 6
	// CodeInternal: a local failure unrelated to the peer's behaviour.
	CodeInternal CloseCode = 7
	// CodeSendBacklog: the peer did not take reliable messages fast enough: more of
	// them waited for its flow control, or waited longer, than the sender allows
	// (a stalled, overloaded or hostile peer).
	CodeSendBacklog CloseCode = 8
	// CodeDraining: the server is draining (shutting down or being replaced): it admits
	// no new client, and it ends the matches still running at its drain deadline. The
	// reason says more, e.g. "server draining: maintenance".
	CodeDraining CloseCode = 9

	// Refusals a client can act on: a server refuses a Hello with one of them
	// (in its Reject) when the cause is a [CodeError] of that code, and the
	// client's error then satisfies errors.Is with the package's sentinel
	// (token.ErrExpired, [ErrUnknownMatch], ...). [CloseCode.Retryable] says
	// which the same credentials may pass later.

	// CodeTokenMalformed: the connect token does not decode. Not retryable:
	// ask the matchmaker for a new token.
	CodeTokenMalformed CloseCode = 10
	// CodeTokenWrongKey: the token is sealed with a key this server does not
	// hold. Not retryable: the matchmaker and the server disagree on keys.
	CodeTokenWrongKey CloseCode = 11
	// CodeTokenExpired: the token has expired (or lives longer than the
	// server allows). Not retryable: ask for a new token.
	CodeTokenExpired CloseCode = 12
	// CodeTokenWrongServer: the token names other servers. Not retryable: ask
	// for a new token for this server, or connect where it says.
	CodeTokenWrongServer CloseCode = 13
	// CodeTokenReplayed: the token was used already (each admits one
	// connection). Not retryable: ask for a new token.
	CodeTokenReplayed CloseCode = 14
	// CodeBusy: the server is busy (connections in the handshake, a match's
	// queue, its token cache). Retryable: the same token after a pause.
	CodeBusy CloseCode = 15
	// CodeUnknownMatch: the server hosts no match of that name, not yet or no
	// more. Retryable: the token is not spent; try again shortly, or ask the
	// matchmaker where the match is.
	CodeUnknownMatch CloseCode = 16
	// CodeResumeRefused: a client's ticket for the seat it held does not
	// resume it (no such seat, or it ended; a wrong, used or other seat's
	// secret). Not retryable: join again as a new player.
	CodeResumeRefused CloseCode = 17

	// CodeApplication is the first code free for application use.
	CodeApplication CloseCode = 0x100
)

// String returns the code's name, e.g. "flood" or "application+3".
func (c CloseCode) String() string {
	switch c {
	case CodeNormal:
		return "normal"
	case CodeProtocolError:
		return "protocol error"
	case CodeMessageTooLarge:
		return "message too large"
	case CodeHandshakeFailed:
		return "handshake failed"
	case CodeRejected:
		return "rejected"
	case CodeTimeout:
		return "timeout"
	case CodeFlood:
		return "flood"
	case CodeInternal:
		return "internal error"
	case CodeSendBacklog:
		return "send backlog"
	case CodeDraining:
		return "draining"
	case CodeTokenMalformed:
		return "token malformed"
	case CodeTokenWrongKey:
		return "token wrong key"
	case CodeTokenExpired:
		return "token expired"
	case CodeTokenWrongServer:
		return "token wrong server"
	case CodeTokenReplayed:
		return "token replayed"
	case CodeBusy:
		return "busy"
	case CodeUnknownMatch:
		return "unknown match"
	case CodeResumeRefused:
		return "resume refused"
	}
	if c >= CodeApplication {
		return "application+" + strconv.Itoa(int(c-CodeApplication))
	}
	return "code " + strconv.Itoa(int(c))
}

// Retryable reports whether a client refused with c may try again later with
// the same credentials (CodeBusy, CodeUnknownMatch). The others need
// something else first: a new token (the token codes), another server
// (CodeDraining, a version or protocol mismatch), or the player (CodeRejected
// by the game's Authenticator).
func (c CloseCode) Retryable() bool { return c == CodeBusy || c == CodeUnknownMatch }

// CodeError is an error that stands for a close code. A server refuses a Hello
// whose cause (an Authenticator's error, say) is or wraps a CodeError with its
// Code; errors.Is(err, e) then holds on the client for the error it gets (its
// chain holds a *CloseError with e.Code), as it does for an error whose chain
// holds e itself.
type CodeError struct {
	Code CloseCode
	Text string
}

// Error is the text.
func (e *CodeError) Error() string { return e.Text }

// The refusals of this package's codes a client may meet from any server.
var (
	// ErrServerBusy: CodeBusy.
	ErrServerBusy = &CodeError{Code: CodeBusy, Text: "server busy"}
	// ErrUnknownMatch: CodeUnknownMatch.
	ErrUnknownMatch = &CodeError{Code: CodeUnknownMatch, Text: "unknown match"}
)

// CodeOf returns the close code err carries: that of the first *CloseError
// or *CodeError in its chain, or of a *HandshakeError's close
// ([HandshakeError.CloseCode]); CodeNormal for nil, CodeInternal for an error
// with none.
func CodeOf(err error) CloseCode {
	if err == nil {
		return CodeNormal
	}
	var ce *CloseError
	var ke *CodeError
	var he *HandshakeError
	switch {
	case errors.As(err, &ce):
		return ce.Code
	case errors.As(err, &ke):
		return ke.Code
	case errors.As(err, &he):
		return he.CloseCode()
	}
	return CodeInternal
}

var (
	// ErrClosed is matched (errors.Is) by every error caused by a closed connection or listener.
	ErrClosed = errors.New("transport: connection closed")
	// ErrTimeout is matched (errors.Is) by the close error of a connection that timed out.
	ErrTimeout = errors.New("transport: timeout")
	// ErrMalformed is matched (errors.Is) by every decoding error of a wire message.
	ErrMalformed = errors.New("transport: malformed message")
)

// CloseError says why a connection closed. It is what [Conn.Err] returns.
// errors.Is(err, ErrClosed) holds for every CloseError; errors.Is(err, ErrTimeout) holds
// for those with Code == CodeTimeout.
type CloseError struct {
	Code   CloseCode
	Reason string
	// Remote is true if the peer closed the connection, false if this end did
	// (including closes this end decided on because of the peer's behaviour, and timeouts).
	Remote bool
}

// Error describes the close: who closed, the code and the reason if any, e.g.
// "transport: connection closed by peer (timeout)".
func (e *CloseError) Error() string {
	who := "locally"
	if e.Remote {
		who = "by peer"
	}
	if e.Reason == "" {
		return fmt.Sprintf("transport: connection closed %s (%s)", who, e.Code)
	}
	return fmt.Sprintf("transport: connection closed %s (%s): %s", who, e.Code, e.Reason)
}

// Is reports whether target is ErrClosed, ErrTimeout for a timeout, or a
// *CodeError of e's code.
func (e *CloseError) Is(target error) bool {
	if t, ok := target.(*CodeError); ok {
		return t.Code == e.Code
	}
	return target == ErrClosed || (target == ErrTimeout && e.Code == CodeTimeout)
}

// Timeout reports whether the connection closed because of a timeout (see net.Error).
func (e *CloseError) Timeout() bool { return e.Code == CodeTimeout }

// DatagramTooLargeError is returned by [Conn.SendDatagram] for a payload above the
// current maximum datagram size.
type DatagramTooLargeError struct {
	Size int // length of the rejected payload
	Max  int // largest payload that could have been sent
}

// Error names the rejected size and the maximum, in bytes.
func (e *DatagramTooLargeError) Error() string {
	return fmt.Sprintf("transport: datagram of %d bytes exceeds the maximum payload of %d bytes", e.Size, e.Max)
}

// MessageTooLargeError is returned by [Conn.SendMessage] for a message above
// [Conn.MaxMessageSize]. The connection stays open.
type MessageTooLargeError struct {
	Size int // length of the rejected message
	Max  int // the maximum message size
}

// Error names the rejected size and the maximum, in bytes.
func (e *MessageTooLargeError) Error() string {
	return fmt.Sprintf("transport: message of %d bytes exceeds the maximum of %d bytes", e.Size, e.Max)
}
