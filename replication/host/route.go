package host

import (
	"bytes"
	"errors"
	"fmt"

	"github.com/archenet/archenet/replication"
	"github.com/archenet/archenet/replication/host/token"
	"github.com/archenet/archenet/transport"
)

// route decides where c goes by its first message b, and hands it to that
// match or refuses it with a Reject that says why.
func (h *Host) route(c transport.Conn, b []byte) {
	d := h.decide(b)
	if d.refusal == nil {
		var tok []byte
		if d.claims != nil {
			tok = bytes.Clone(d.hello.Token)
		}
		if d.match.handoff(handoff{conn: c, hello: b, claims: d.claims, token: tok}) {
			h.stats.routed.Add(1)
			return
		}
		h.releaseToken(tok)
		d.refuse(refuseMatchBusy, fmt.Errorf("%w: match busy: %d connections wait for its next frame (host.MatchConfig.Handoffs)", transport.ErrServerBusy, d.match.cfg.Handoffs))
	}
	h.stats.refused[d.why].Add(1)
	h.cfg.Logger.Info("archenet/host: connection refused", "remote", c.RemoteAddr(), "why", d.why.String(), "reason", d.refusal.Error())
	rj := d.refusal.Reject(replication.ProtocolVersion, d.hello.ProtocolHash)
	if err := c.SendMessage(rj.Append(nil)); err != nil {
		h.closeConn(c, rj.Code, rj.Reason)
		return
	}
	// Close after a linger, so that the Reject arrives before the close.
	if !h.lingering.Add(c, h.cfg.Now().Add(transport.RejectLinger), rj.Code, rj.Reason) {
		h.closeConn(c, rj.Code, rj.Reason)
	}
}

// decision is where a Hello goes: a match (with the token's claims, if
// any), or a refusal and its kind.
type decision struct {
	hello   transport.Hello
	match   *Match
	claims  *token.Claims
	refusal *transport.HandshakeError
	why     refusal
}

func (d *decision) refuse(why refusal, err error) {
	d.why = why
	_, d.refusal = transport.JudgeHello(d.hello.Append(nil), replication.ProtocolVersion, d.hello.ProtocolHash, err)
}

// decide is the host's routing policy, in this order: a Hello that does not
// parse, another protocol version, a draining host, a token that does not
// verify (or names a match not open), a match name not open; else the
// match. A resume (a Hello with a ticket) goes by its match name, tokens
// or not. The protocol hash is the match server's to judge.
func (h *Host) decide(b []byte) decision {
	var d decision
	hello, err := transport.ParseHello(b)
	if err != nil {
		d.why = refuseMalformed
		d.refusal = transport.AsHandshakeError(err, replication.ProtocolVersion, 0)
		return d
	}
	d.hello = hello
	if err := transport.CheckHello(hello, replication.ProtocolVersion, hello.ProtocolHash); err != nil {
		d.why, d.refusal = refuseVersion, err.(*transport.HandshakeError)
		return d
	}
	if dr := h.drain.Load(); dr != nil {
		d.refuse(refuseDraining, dr.refusal)
		return d
	}
	if h.cfg.Tokens != nil && len(hello.Resume) == 0 {
		return h.decideToken(d)
	}
	// (A client coming back to its seat names its match: its ticket, which
	// the match's server judges, is its credential.)
	name := hello.Match
	if name == "" {
		name = h.cfg.DefaultMatch
	}
	if name == "" {
		d.refuse(refuseUnknownMatch, fmt.Errorf("%w: no match named (replication.ClientConfig.Match), and the host has no default match", token.ErrUnknownMatch))
		return d
	}
	if d.match, _ = h.Match(name); d.match == nil {
		d.refuse(refuseUnknownMatch, fmt.Errorf("%w %q", token.ErrUnknownMatch, name))
	}
	return d
}

// decideToken routes by the Hello's connect token.
func (h *Host) decideToken(d decision) decision {
	var m *Match
	hosted := func(name string) bool {
		m, _ = h.Match(name)
		return m != nil
	}
	c, err := h.cfg.Tokens.Verify(d.hello.Token, hosted)
	if err != nil {
		d.refuse(tokenRefusal(err), err)
		return d
	}
	d.match, d.claims = m, &c
	return d
}

// tokenRefusal is the kind of a token's refusal.
func tokenRefusal(err error) refusal {
	for _, k := range []struct {
		err error
		why refusal
	}{
		{token.ErrExpired, refuseTokenExpired}, {token.ErrWrongKey, refuseTokenWrongKey},
		{token.ErrReplayed, refuseTokenReplayed}, {token.ErrUnknownMatch, refuseUnknownMatch},
		{token.ErrWrongServer, refuseTokenWrongServer}, {token.ErrBusy, refuseTokenBusy},
	} {
		if errors.Is(err, k.err) {
			return k.why
		}
	}
	return refuseTokenMalformed
}

// closeConn closes a refused connection without waiting for the transport
// (replication/internal/closing); a close the full queue cannot take is
// counted in Stats.ClosesDropped and left to the transport's idle timeout.
func (h *Host) closeConn(c transport.Conn, code transport.CloseCode, reason string) {
	if !h.closer.Close(c, code, reason) {
		h.stats.closesDropped.Add(1)
	}
}

// releaseToken gives back the connect token of a connection that did not
// join (nil: none), so that it admits once more (token.Verifier.Release).
func (h *Host) releaseToken(tok []byte) {
	if tok == nil || h.cfg.Tokens == nil {
		return
	}
	h.cfg.Tokens.Release(tok)
	h.stats.released.Add(1)
}
