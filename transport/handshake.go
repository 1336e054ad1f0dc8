package transport

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"time"
	"unicode/utf8"
)

// Handshake wire format. Every handshake message is one reliable message that starts
// with a one-byte [MessageType]; integers are big-endian, variable-length fields are
// prefixed with their length as an unsigned LEB128 varint (encoding/binary.AppendUvarint):
//
//	Hello:   0x01 | version u16 | protocol hash u64 | token length uvarint | token |
//	         [match length uvarint (0..64) | match (UTF-8) |
//	          [resume length uvarint (1..64) | resume]]
//	Welcome: 0x02 | client ID u8 | payload length uvarint | payload
//	Reject:  0x03 | close code u16 | server version u16 | server protocol hash u64 |
//	         reason length uvarint | reason (UTF-8) | [protocol description]
//
// The bracketed match of a Hello is optional: a client names the match it joins on a host
// of many matches (package replication/host) there; without it a Hello is encoded as
// before the match existed, so that a server of another version still reads its version.
// The match may be empty only when a resume follows: the opaque ticket of a client that
// comes back to its seat ([Hello.Resume]).
//
// The bracketed protocol description of a Reject ([Reject.Protocol]) is optional and
// opaque to this package: the rest of the message, at most [MaxRejectProtocolLen] bytes.
// A server sends one when the protocol hashes differ, so that the client can tell what
// differs (package replication puts its component list there, and its client names the
// component that differs in [HandshakeError.Detail]); without it a Reject is encoded as
// before the description existed, which is what a version mismatch gets (so that a
// client of another version can still read it).
//
// Decoders reject a length above the field's bound before looking at the data, a
// truncated message, and trailing bytes.
const (
	MaxTokenLen          = 1024     // bound of Hello.Token
	MaxMatchLen          = 64       // bound of Hello.Match
	MaxResumeLen         = 64       // bound of Hello.Resume
	MaxWelcomePayloadLen = 16 << 10 // bound of Welcome.Payload
	MaxReasonLen         = 512      // bound of Reject.Reason

	MaxRejectProtocolLen = 16 << 10 // bound of Reject.Protocol

	// MaxHandshakeMessageSize is the largest handshake message (a Welcome with the
	// largest payload): the bound a connection applies to the first message it
	// receives, before the peer is known (see [Conn.PollMessage]).
	MaxHandshakeMessageSize = 1 + 1 + 3 + MaxWelcomePayloadLen
)

// MessageType is the first byte of a handshake message.
type MessageType byte

// The handshake message types: the client's Hello, and the server's answer, a
// Welcome or a Reject.
const (
	MessageHello   MessageType = 0x01
	MessageWelcome MessageType = 0x02
	MessageReject  MessageType = 0x03
)

// TypeOf returns the type of the handshake message b, or 0 if b is empty.
func TypeOf(b []byte) MessageType {
	if len(b) == 0 {
		return 0
	}
	return MessageType(b[0])
}

// Hello is the client's first message.
type Hello struct {
	Version      uint16 // wire protocol version of the client build
	ProtocolHash uint64 // hash of the client's component registry / schema
	Token        []byte // credentials for the server's Authenticator; at most MaxTokenLen bytes
	// Match names the match the client joins on a host of many matches (a plain
	// name, for LAN play without connect tokens; a connect token names its match
	// itself); at most MaxMatchLen bytes. Empty: none (a server of one match).
	Match string
	// Resume, if not empty, is the ticket of a client coming back to the seat
	// it held (package replication: its Welcome gave the ticket's secret); it
	// is opaque here, at most MaxResumeLen bytes. A host routes such a Hello
	// by Match without a token: the ticket is its credential.
	Resume []byte
}

// Len is the encoded length of h.
func (h Hello) Len() int {
	n := 1 + 2 + 8 + uvarintLen(len(h.Token)) + len(h.Token)
	if h.Match != "" || len(h.Resume) > 0 {
		n += uvarintLen(len(h.Match)) + len(h.Match)
	}
	if len(h.Resume) > 0 {
		n += uvarintLen(len(h.Resume)) + len(h.Resume)
	}
	return n
}

// Append appends the encoding of h to b. It does not check the bound of Token (ParseHello
// does; ClientHandshake checks before sending).
func (h Hello) Append(b []byte) []byte {
	b = append(b, byte(MessageHello))
	b = binary.BigEndian.AppendUint16(b, h.Version)
	b = binary.BigEndian.AppendUint64(b, h.ProtocolHash)
	b = binary.AppendUvarint(b, uint64(len(h.Token)))
	b = append(b, h.Token...)
	if h.Match != "" || len(h.Resume) > 0 {
		b = binary.AppendUvarint(b, uint64(len(h.Match)))
		b = append(b, h.Match...)
	}
	if len(h.Resume) > 0 {
		b = binary.AppendUvarint(b, uint64(len(h.Resume)))
		b = append(b, h.Resume...)
	}
	return b
}

// ParseHello decodes a Hello. The returned Token and Resume alias b (nil if empty). Errors
// match ErrMalformed. A match that is present must be 1..MaxMatchLen bytes of valid UTF-8,
// or empty before a resume of 1..MaxResumeLen bytes.
func ParseHello(b []byte) (Hello, error) {
	r := reader{b: b, msg: "hello"}
	r.expectType(MessageHello)
	h := Hello{Version: r.u16(), ProtocolHash: r.u64()}
	h.Token = r.bytes("token", MaxTokenLen)
	if r.err == nil && len(r.b) > 0 {
		m := r.bytes("match", MaxMatchLen)
		if r.err == nil && len(r.b) > 0 {
			if h.Resume = r.bytes("resume", MaxResumeLen); r.err == nil && len(h.Resume) == 0 {
				r.fail("empty resume")
			}
		}
		if r.err == nil && (len(m) == 0 && len(h.Resume) == 0 || !utf8.Valid(m)) {
			r.fail("match of %d bytes is empty or not UTF-8", len(m))
		}
		h.Match = string(m)
	}
	if err := r.finish(); err != nil {
		return Hello{}, err
	}
	return h, nil
}

// Welcome is the server's answer to an accepted Hello.
type Welcome struct {
	ClientID uint8  // the slot the server assigned to this client
	Payload  []byte // application data (e.g. the tick rate); at most MaxWelcomePayloadLen bytes
}

// Len is the encoded length of w.
func (w Welcome) Len() int { return 1 + 1 + uvarintLen(len(w.Payload)) + len(w.Payload) }

// Append appends the encoding of w to b. It does not check the bound of Payload.
func (w Welcome) Append(b []byte) []byte {
	b = append(b, byte(MessageWelcome), w.ClientID)
	b = binary.AppendUvarint(b, uint64(len(w.Payload)))
	return append(b, w.Payload...)
}

// ParseWelcome decodes a Welcome. The returned Payload aliases b (nil if empty). Errors match ErrMalformed.
func ParseWelcome(b []byte) (Welcome, error) {
	r := reader{b: b, msg: "welcome"}
	r.expectType(MessageWelcome)
	w := Welcome{ClientID: r.u8()}
	w.Payload = r.bytes("payload", MaxWelcomePayloadLen)
	if err := r.finish(); err != nil {
		return Welcome{}, err
	}
	return w, nil
}

// Reject is the server's answer to a refused Hello. It carries the server's version and
// protocol hash so that the client can report a mismatch precisely, and, on a hash
// mismatch, what the application says about its protocol (Protocol: archenet's
// replication lists its components there, so that its client can say which one
// differs).
type Reject struct {
	Code         CloseCode // CodeHandshakeFailed (mismatch, malformed Hello) or CodeRejected
	Version      uint16    // the server's protocol version
	ProtocolHash uint64    // the server's protocol hash
	Reason       string    // human-readable; at most MaxReasonLen bytes
	// Protocol is the application's description of its protocol, opaque to the
	// transport, for the client to explain a protocol hash mismatch with (at most
	// MaxRejectProtocolLen bytes; nil: none). It ends the message.
	Protocol []byte
}

// Len is the encoded length of r.
func (r Reject) Len() int {
	return 1 + 2 + 2 + 8 + uvarintLen(len(r.Reason)) + len(r.Reason) + len(r.Protocol)
}

// Append appends the encoding of r to b. It does not check the bounds of Reason (see
// [TruncateReason]) and of Protocol.
func (r Reject) Append(b []byte) []byte {
	b = append(b, byte(MessageReject))
	b = binary.BigEndian.AppendUint16(b, uint16(r.Code))
	b = binary.BigEndian.AppendUint16(b, r.Version)
	b = binary.BigEndian.AppendUint64(b, r.ProtocolHash)
	b = binary.AppendUvarint(b, uint64(len(r.Reason)))
	b = append(b, r.Reason...)
	return append(b, r.Protocol...)
}

// ParseReject decodes a Reject. Errors match ErrMalformed.
func ParseReject(b []byte) (Reject, error) {
	rd := reader{b: b, msg: "reject"}
	rd.expectType(MessageReject)
	r := Reject{Code: CloseCode(rd.u16()), Version: rd.u16(), ProtocolHash: rd.u64()}
	r.Reason = string(rd.bytes("reason", MaxReasonLen))
	if rd.err == nil && len(rd.b) > 0 {
		if len(rd.b) > MaxRejectProtocolLen {
			rd.fail("protocol description of %d bytes exceeds %d", len(rd.b), MaxRejectProtocolLen)
		} else {
			r.Protocol = append([]byte(nil), rd.take(len(rd.b), "protocol description")...)
		}
	}
	if err := rd.finish(); err != nil {
		return Reject{}, err
	}
	return r, nil
}

// Err returns the error a client with the given version and hash reports for r:
// a version mismatch, else a hash mismatch, else a rejection with r's reason. A Reject
// whose code is neither CodeRejected nor CodeHandshakeFailed (CodeDraining, the refusal codes) also wraps a
// *CloseError with that code and reason (the error's Err), for errors.As.
func (r Reject) Err(clientVersion uint16, clientHash uint64) *HandshakeError {
	e := &HandshakeError{
		Kind:          HandshakeRejected,
		ServerVersion: r.Version, ClientVersion: clientVersion,
		ServerHash: r.ProtocolHash, ClientHash: clientHash,
		Reason: r.Reason,
	}
	if r.Code != CodeRejected && r.Code != CodeHandshakeFailed {
		// A refusal with a code of its own (CodeDraining): errors.As finds it.
		e.Err = &CloseError{Code: r.Code, Reason: r.Reason, Remote: true}
	}
	switch {
	case r.Version != clientVersion:
		e.Kind = HandshakeVersionMismatch
	case r.ProtocolHash != clientHash:
		e.Kind = HandshakeHashMismatch
	}
	return e
}

// TruncateReason shortens s to at most max bytes without splitting a UTF-8 sequence.
func TruncateReason(s string, max int) string {
	if len(s) <= max {
		return s
	}
	s = s[:max]
	for len(s) > 0 {
		r, size := utf8.DecodeLastRuneInString(s)
		if r != utf8.RuneError || size > 1 {
			break
		}
		s = s[:len(s)-1]
	}
	return s
}

// HandshakeErrorKind classifies a [HandshakeError].
type HandshakeErrorKind uint8

// The kinds of [HandshakeError].
const (
	HandshakeVersionMismatch HandshakeErrorKind = iota + 1 // the protocol versions differ
	HandshakeHashMismatch                                  // the protocol hashes differ
	HandshakeRejected                                      // the server refused the client
	HandshakeMalformed                                     // a handshake message was malformed or unexpected
)

// HandshakeError is why a handshake failed, on either side. Its message names both
// sides' values, e.g. "protocol hash mismatch: server 0x1234abcd, client 0x5678ef00".
type HandshakeError struct {
	Kind          HandshakeErrorKind
	ServerVersion uint16
	ClientVersion uint16
	ServerHash    uint64
	ClientHash    uint64
	Reason        string // for HandshakeRejected and HandshakeMalformed
	Err           error  // the underlying cause, if any (Authenticator error, decoding error, close error)
	// Detail says, on a hash mismatch, what differs (archenet's replication
	// names the components, from the Reject's Protocol); the message appends it.
	Detail string
}

// Error says why the handshake failed, naming both sides' values for a mismatch,
// e.g. "protocol version mismatch: server 3, client 2"; it has no package prefix.
func (e *HandshakeError) Error() string {
	switch e.Kind {
	case HandshakeVersionMismatch:
		return fmt.Sprintf("protocol version mismatch: server %d, client %d", e.ServerVersion, e.ClientVersion)
	case HandshakeHashMismatch:
		if e.Detail != "" {
			return fmt.Sprintf("protocol hash mismatch: server %#x, client %#x: %s", e.ServerHash, e.ClientHash, e.Detail)
		}
		return fmt.Sprintf("protocol hash mismatch: server %#x, client %#x", e.ServerHash, e.ClientHash)
	case HandshakeRejected:
		return "rejected by server: " + e.Reason
	default:
		return "handshake failed: " + e.Reason
	}
}

// Unwrap returns the underlying cause, Err (nil if none).
func (e *HandshakeError) Unwrap() error { return e.Err }

// CloseCode is the code a connection closes with because of e:
// CodeRejected for a rejection, CodeHandshakeFailed otherwise. A rejection
// whose cause (Err) is or wraps a *CloseError or a *CodeError with a code
// other than CodeNormal (a draining server refuses with CodeDraining, an
// expired token with CodeTokenExpired) closes with that code.
func (e *HandshakeError) CloseCode() CloseCode {
	if e.Kind == HandshakeRejected {
		var ce *CloseError
		if errors.As(e.Err, &ce) && ce.Code != CodeNormal {
			return ce.Code
		}
		var ke *CodeError
		if errors.As(e.Err, &ke) && ke.Code != CodeNormal {
			return ke.Code
		}
		return CodeRejected
	}
	return CodeHandshakeFailed
}

// CheckHello checks a client's Hello against the server's protocol version and hash.
// It returns nil or a *HandshakeError (version checked first).
func CheckHello(h Hello, version uint16, hash uint64) error {
	e := &HandshakeError{ServerVersion: version, ClientVersion: h.Version, ServerHash: hash, ClientHash: h.ProtocolHash}
	switch {
	case h.Version != version:
		e.Kind = HandshakeVersionMismatch
	case h.ProtocolHash != hash:
		e.Kind = HandshakeHashMismatch
	default:
		return nil
	}
	return e
}

// Authenticator decides whether the client at remote, presenting token, may join.
// A non-nil error rejects the client; its text is sent to the client as the reason.
type Authenticator func(ctx context.Context, remote net.Addr, token []byte) error

// RejectLinger bounds how long [ServerHandshake] waits, after sending a Reject, for the
// client to close the connection before closing it itself (giving the Reject time to
// arrive ahead of the close).
const RejectLinger = time.Second

// ClientHandshake sends h as the first reliable message on c and waits for the server's
// answer. On a Welcome it returns it; on a Reject it closes c with the Reject's code and
// returns a *HandshakeError describing the mismatch or rejection. If the server closes
// c without a readable Reject but with CodeRejected or CodeHandshakeFailed, the error is
// a *HandshakeError of kind HandshakeRejected with the close reason. A malformed answer
// closes c with CodeHandshakeFailed.
func ClientHandshake(ctx context.Context, c Conn, h Hello) (Welcome, error) {
	if len(h.Token) > MaxTokenLen {
		return Welcome{}, fmt.Errorf("transport: handshake token of %d bytes exceeds %d", len(h.Token), MaxTokenLen)
	}
	if err := c.SendMessage(h.Append(make([]byte, 0, h.Len()))); err != nil {
		return Welcome{}, fmt.Errorf("transport: sending hello: %w", err)
	}
	b, err := c.ReceiveMessage(ctx)
	if err != nil {
		var ce *CloseError
		if errors.As(err, &ce) && ce.Remote && (ce.Code == CodeRejected || ce.Code == CodeHandshakeFailed || ce.Code == CodeDraining) {
			return Welcome{}, &HandshakeError{Kind: HandshakeRejected, Reason: ce.Reason, Err: err,
				ClientVersion: h.Version, ClientHash: h.ProtocolHash}
		}
		return Welcome{}, fmt.Errorf("transport: waiting for welcome: %w", err)
	}
	switch TypeOf(b) {
	case MessageWelcome:
		w, err := ParseWelcome(b)
		if err == nil {
			return w, nil
		}
		return Welcome{}, failMalformed(c, err)
	case MessageReject:
		r, err := ParseReject(b)
		if err != nil {
			return Welcome{}, failMalformed(c, err)
		}
		he := r.Err(h.Version, h.ProtocolHash)
		code := r.Code
		if code != CodeRejected && code != CodeDraining {
			code = CodeHandshakeFailed
		}
		c.CloseWithReason(code, TruncateReason(he.Error(), MaxReasonLen))
		return Welcome{}, he
	default:
		return Welcome{}, failMalformed(c, fmt.Errorf("%w: unexpected message type %#x", ErrMalformed, TypeOf(b)))
	}
}

func failMalformed(c Conn, err error) *HandshakeError {
	he := &HandshakeError{Kind: HandshakeMalformed, Reason: err.Error(), Err: err}
	c.CloseWithReason(CodeHandshakeFailed, TruncateReason(he.Error(), MaxReasonLen))
	return he
}

// JudgeHello is the server's handshake policy, the one every server path
// uses: from the client's first message m, the server's protocol version and
// hash, and refuse — the server's own objection to a well-formed, matching
// Hello (it is full, the Authenticator said no; nil: none) — it returns the
// Hello and nil to accept the client, or the *HandshakeError that refuses
// it: malformed, version mismatch, hash mismatch (checked in that order),
// else rejected with refuse's text as the reason (a refuse that is a
// *CloseError gives its Reason, and its Code is the close code: a draining
// server refuses with CodeDraining). [HandshakeError.Reject] is
// the answer to send and [HandshakeError.CloseCode] the close code. Pure: no
// I/O, no clock.
func JudgeHello(m []byte, version uint16, hash uint64, refuse error) (Hello, *HandshakeError) {
	h, err := ParseHello(m)
	if err != nil {
		return Hello{}, &HandshakeError{Kind: HandshakeMalformed, Reason: err.Error(), Err: err, ServerVersion: version, ServerHash: hash}
	}
	if err := CheckHello(h, version, hash); err != nil {
		return h, err.(*HandshakeError)
	}
	if refuse != nil {
		reason := refuse.Error()
		if ce, ok := refuse.(*CloseError); ok {
			reason = ce.Reason // a refusal with a code of its own: its reason alone
		}
		return h, &HandshakeError{Kind: HandshakeRejected, Reason: reason, Err: refuse,
			ServerVersion: version, ClientVersion: h.Version, ServerHash: hash, ClientHash: h.ProtocolHash}
	}
	return h, nil
}

// AsHandshakeError returns err as the *HandshakeError a server refuses a
// client with: err itself if it is one, else a HandshakeMalformed error
// wrapping it (a protocol violation during the handshake).
func AsHandshakeError(err error, version uint16, hash uint64) *HandshakeError {
	var he *HandshakeError
	if errors.As(err, &he) {
		return he
	}
	return &HandshakeError{Kind: HandshakeMalformed, Reason: err.Error(), Err: err, ServerVersion: version, ServerHash: hash}
}

// Reject is the answer that tells the client about e, from a server with the
// given protocol version and hash. Its reason says the cause once: the
// client's error adds the "rejected by server: " or mismatch wording itself
// ([Reject.Err]).
func (e *HandshakeError) Reject(version uint16, hash uint64) Reject {
	reason := e.Reason
	if e.Kind != HandshakeRejected {
		reason = e.Error()
	}
	return Reject{Code: e.CloseCode(), Version: version, ProtocolHash: hash, Reason: TruncateReason(reason, MaxReasonLen)}
}

// ServerHandshake waits for the client's Hello on c, judges it with
// [JudgeHello], runs auth (if non-nil) on an acceptable one and judges it
// again with auth's verdict, then asks assign (if non-nil; nil sends a zero
// Welcome) for the Welcome to send. It returns the accepted Hello.
//
// On failure it sends a Reject, waits up to RejectLinger (bounded by ctx) for the client
// to close, closes c with CodeHandshakeFailed or CodeRejected, and returns a
// *HandshakeError; the client's ClientHandshake reports the matching error. An error from
// assign rejects the client with the error's text as the reason.
func ServerHandshake(ctx context.Context, c Conn, version uint16, hash uint64, auth Authenticator, assign func(Hello) (Welcome, error)) (Hello, error) {
	b, err := c.ReceiveMessage(ctx)
	if err != nil {
		return Hello{}, fmt.Errorf("transport: waiting for hello: %w", err)
	}
	h, he := JudgeHello(b, version, hash, nil)
	if he == nil && auth != nil {
		h, he = JudgeHello(b, version, hash, auth(ctx, c.RemoteAddr(), h.Token))
	}
	var w Welcome
	if he == nil && assign != nil {
		if w, err = assign(h); err != nil {
			h, he = JudgeHello(b, version, hash, err)
		}
	}
	if he != nil {
		return h, reject(ctx, c, he.Reject(version, hash), he)
	}
	if len(w.Payload) > MaxWelcomePayloadLen {
		err := fmt.Errorf("transport: welcome payload of %d bytes exceeds %d", len(w.Payload), MaxWelcomePayloadLen)
		c.CloseWithReason(CodeInternal, err.Error())
		return h, err
	}
	if err := c.SendMessage(w.Append(make([]byte, 0, w.Len()))); err != nil {
		return h, fmt.Errorf("transport: sending welcome: %w", err)
	}
	return h, nil
}

func reject(ctx context.Context, c Conn, r Reject, he *HandshakeError) error {
	if err := c.SendMessage(r.Append(make([]byte, 0, r.Len()))); err == nil {
		t := time.NewTimer(RejectLinger)
		select {
		case <-c.Done():
		case <-ctx.Done():
		case <-t.C:
		}
		t.Stop()
	}
	c.CloseWithReason(r.Code, r.Reason)
	return he
}

// reader decodes a handshake message; the first error sticks.
type reader struct {
	b   []byte
	msg string
	err error
}

func (r *reader) fail(format string, args ...any) {
	if r.err == nil {
		r.err = fmt.Errorf("%w: %s: %s", ErrMalformed, r.msg, fmt.Sprintf(format, args...))
	}
}

func (r *reader) take(n int, what string) []byte {
	if r.err != nil {
		return nil
	}
	if len(r.b) < n {
		r.fail("truncated %s", what)
		return nil
	}
	v := r.b[:n:n]
	r.b = r.b[n:]
	return v
}

func (r *reader) expectType(t MessageType) {
	if b := r.take(1, "type"); b != nil && MessageType(b[0]) != t {
		r.fail("message type %#x, want %#x", b[0], byte(t))
	}
}

func (r *reader) u8() uint8 {
	if b := r.take(1, "field"); b != nil {
		return b[0]
	}
	return 0
}

func (r *reader) u16() uint16 {
	if b := r.take(2, "field"); b != nil {
		return binary.BigEndian.Uint16(b)
	}
	return 0
}

func (r *reader) u64() uint64 {
	if b := r.take(8, "field"); b != nil {
		return binary.BigEndian.Uint64(b)
	}
	return 0
}

// bytes reads a length-prefixed field, checking the length against max before using it.
func (r *reader) bytes(what string, max int) []byte {
	if r.err != nil {
		return nil
	}
	n, k := binary.Uvarint(r.b)
	if k == 0 {
		r.fail("truncated %s length", what)
		return nil
	}
	if k < 0 {
		r.fail("%s length overflows", what)
		return nil
	}
	if n > uint64(max) {
		r.fail("%s length %d exceeds %d", what, n, max)
		return nil
	}
	r.b = r.b[k:]
	if n == 0 {
		return nil
	}
	return r.take(int(n), what)
}

func (r *reader) finish() error {
	if r.err == nil && len(r.b) != 0 {
		r.fail("%d trailing bytes", len(r.b))
	}
	return r.err
}

func uvarintLen(n int) int {
	l := 1
	for v := uint64(n); v >= 0x80; v >>= 7 {
		l++
	}
	return l
}
