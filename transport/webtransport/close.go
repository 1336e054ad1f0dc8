//go:build !js

package webtransport

import (
	"encoding/binary"
	"time"

	"github.com/quic-go/quic-go/http3"
	"github.com/quic-go/quic-go/quicvarint"
	wt "github.com/quic-go/webtransport-go"

	"github.com/archenet/archenet/transport"
)

// closeLinger bounds how long a close waits for the peer to answer the session's close
// capsule, and how long a QUIC connection outlives its closed session.
const closeLinger = 250 * time.Millisecond

// closeSessionCapsule is the capsule type of WT_CLOSE_SESSION (draft-ietf-webtrans-http3).
const closeSessionCapsule = 0x2843

// appendCloseCapsule appends the WT_CLOSE_SESSION capsule carrying code and reason.
func appendCloseCapsule(b []byte, code transport.CloseCode, reason string) []byte {
	b = quicvarint.Append(b, closeSessionCapsule)
	b = quicvarint.Append(b, uint64(4+len(reason)))
	b = binary.BigEndian.AppendUint32(b, uint32(code))
	return append(b, reason...)
}

// closeSession ends sess with code and reason; it may take up to 2·closeLinger. With
// connect (the session's CONNECT stream, held by a server whose sessions have no
// WebTransport flow control, so nothing else writes to it) it writes the close capsule
// and the stream's FIN itself and waits for the peer to end the session: Chromium shows
// the page the code and reason only then. webtransport-go's Session.CloseWithError
// sends STOP_SENDING with the capsule, and Chromium 156 then reports "Connection lost"
// instead (TestBrowserEcho shows which). Without connect (a dialed session),
// CloseWithError alone, which webtransport-go servers read correctly.
func closeSession(sess *wt.Session, connect *http3.Stream, code transport.CloseCode, reason string) {
	if connect != nil && sess.Context().Err() == nil {
		_ = connect.SetWriteDeadline(time.Now().Add(closeLinger))
		_, err := connect.Write(appendCloseCapsule(nil, code, reason))
		if err == nil {
			err = connect.Close()
		}
		if err == nil {
			t := time.NewTimer(closeLinger)
			select {
			case <-sess.Context().Done():
			case <-t.C:
			}
			t.Stop()
		}
	}
	// (A no-op once the session has ended.)
	_ = sess.CloseWithError(wt.SessionErrorCode(code), reason)
}
