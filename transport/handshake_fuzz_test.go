package transport_test

import (
	"bytes"
	"reflect"
	"testing"

	"github.com/archenet/archenet/transport"
)

func FuzzParseHello(f *testing.F) {
	f.Add(transport.Hello{Version: 1, ProtocolHash: 0x1234abcd, Token: []byte("token")}.Append(nil))
	f.Add(transport.Hello{}.Append(nil))
	f.Add(transport.Hello{Version: 6, ProtocolHash: 0x77, Token: []byte("sealed"), Match: "duel-7"}.Append(nil))
	f.Add(transport.Hello{Version: 6, Match: string(make([]byte, transport.MaxMatchLen))}.Append(nil))
	f.Add([]byte{0x01, 0, 1, 0, 0, 0, 0, 0, 0, 0, 1, 0x80, 0x80, 0x80, 0x80, 0x10})
	f.Add(transport.Hello{Version: 10, ProtocolHash: 0x77, Resume: []byte("ticket")}.Append(nil))
	f.Add(transport.Hello{Version: 10, Match: "duel-7", Resume: make([]byte, transport.MaxResumeLen)}.Append(nil))
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := transport.ParseHello(b)
		if err != nil {
			return
		}
		if len(h.Token) > transport.MaxTokenLen || len(h.Match) > transport.MaxMatchLen || len(h.Resume) > transport.MaxResumeLen {
			t.Fatalf("token of %d bytes, match of %d or resume of %d accepted", len(h.Token), len(h.Match), len(h.Resume))
		}
		enc := h.Append(nil)
		if len(enc) != h.Len() {
			t.Fatalf("Len %d, encoded %d", h.Len(), len(enc))
		}
		h2, err := transport.ParseHello(enc)
		if err != nil || h2.Version != h.Version || h2.ProtocolHash != h.ProtocolHash || !bytes.Equal(h2.Token, h.Token) || h2.Match != h.Match || !bytes.Equal(h2.Resume, h.Resume) {
			t.Fatalf("re-encoding does not round-trip: %v", err)
		}
	})
}

// FuzzParseServerReply covers the decoders of the server's answers, Welcome and Reject.
func FuzzParseServerReply(f *testing.F) {
	f.Add(transport.Welcome{ClientID: 3, Payload: []byte("tick=60")}.Append(nil))
	f.Add(transport.Reject{Code: transport.CodeRejected, Version: 1, ProtocolHash: 2, Reason: "full"}.Append(nil))
	f.Add([]byte{0x03, 0, 4, 0, 1, 0, 0, 0, 0, 0, 0, 0, 2, 0xff, 0xff, 0xff, 0xff, 0x0f})
	// Rejects with the application's protocol description (a hash mismatch).
	f.Add(transport.Reject{Code: transport.CodeHandshakeFailed, Version: 4, ProtocolHash: 9, Reason: "protocol hash mismatch",
		Protocol: []byte{1, 1, 'A', 0, 0, 0, 0, 0, 0, 0, 7, 0}}.Append(nil))
	f.Add([]byte{0x03, 0, 4, 0, 1, 0, 0, 0, 0, 0, 0, 0, 2, 0, 65})
	f.Fuzz(func(t *testing.T, b []byte) {
		switch transport.TypeOf(b) {
		case transport.MessageWelcome:
			w, err := transport.ParseWelcome(b)
			if err != nil {
				return
			}
			w2, err := transport.ParseWelcome(w.Append(nil))
			if err != nil || w2.ClientID != w.ClientID || !bytes.Equal(w2.Payload, w.Payload) || len(w.Append(nil)) != w.Len() {
				t.Fatalf("welcome does not round-trip: %v", err)
			}
		default:
			r, err := transport.ParseReject(b)
			if err != nil {
				return
			}
			if len(r.Reason) > transport.MaxReasonLen {
				t.Fatalf("reason of %d bytes accepted", len(r.Reason))
			}
			if len(r.Protocol) > transport.MaxRejectProtocolLen {
				t.Fatalf("protocol description of %d bytes accepted", len(r.Protocol))
			}
			r2, err := transport.ParseReject(r.Append(nil))
			if err != nil || !reflect.DeepEqual(r2, r) || len(r.Append(nil)) != r.Len() {
				t.Fatalf("reject does not round-trip: %v", err)
			}
		}
	})
}
