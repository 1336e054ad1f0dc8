package websocket

import (
	"bytes"
	"testing"
	"time"

	"github.com/archenet/archenet/transport"
	"github.com/archenet/archenet/transport/internal/ratelimit"
)

// fakeSink records what the reader hands the core.
type fakeSink struct {
	maxMessage int
	messages   [][]byte
	datagrams  int
	violation  string
	code       transport.CloseCode
}

func (f *fakeSink) MessageLimit(first bool) int {
	if first {
		return min(f.maxMessage, transport.MaxHandshakeMessageSize)
	}
	return f.maxMessage
}
func (f *fakeSink) TakeMessage(b []byte, _ bool) bool {
	f.messages = append(f.messages, b)
	return true
}
func (f *fakeSink) TakeDatagram(lim *ratelimit.TokenBucket, b []byte, maxSize int) bool {
	if !lim.Allow(time.Unix(0, 0)) || len(b) > maxSize {
		f.Violation(transport.CodeFlood, "flood")
		return false
	}
	f.datagrams++
	return true
}
func (f *fakeSink) Violation(code transport.CloseCode, reason string) {
	f.code, f.violation = code, reason
}

// FuzzHandle feeds the reader's handling of WebSocket messages arbitrary
// messages (the input split at 0xff bytes, the first byte of each its type:
// even binary, odd text): it never panics, takes no message above its
// bound, stops at the first violation (with a reason) or close, and what it
// takes is exactly the messages' payloads.
func FuzzHandle(f *testing.F) {
	f.Add([]byte{0, kindMessage, 'h', 'i', 0xff, 0, kindDatagram, 1, 2, 0xff, 0, kindClose, 0, 5, 'b', 'y', 'e'})
	f.Add([]byte{0, kindMessage})
	f.Add([]byte{1, kindMessage, 'x'})
	f.Add([]byte{0, 9})
	f.Add([]byte{0, kindClose, 1})
	f.Fuzz(func(t *testing.T, in []byte) {
		s := &fakeSink{maxMessage: 64}
		lim := ratelimit.New(100, 100, time.Unix(0, 0))
		first := true
		var want [][]byte
		for _, part := range bytes.Split(in, []byte{0xff}) {
			if len(part) == 0 {
				continue
			}
			binary := part[0]%2 == 0
			body := part[1:]
			more, remote, err := handle(s, &lim, binary, bytes.NewReader(body), &first)
			if err != nil {
				t.Fatalf("a reader of bytes failed: %v", err)
			}
			if binary && len(body) > 0 && body[0] == kindMessage && s.violation == "" {
				want = append(want, body[1:])
			}
			if remote != nil && (more || s.violation != "" || len(remote.Reason) > transport.MaxReasonLen) {
				t.Fatalf("close %+v with more %v, violation %q", remote, more, s.violation)
			}
			if !more {
				if remote == nil && s.violation == "" {
					t.Fatal("stopped without a reason")
				}
				break
			}
		}
		if len(want) != len(s.messages) {
			t.Fatalf("%d messages taken, %d sent", len(s.messages), len(want))
		}
		for i, m := range s.messages {
			if !bytes.Equal(m, want[i]) || len(m) > s.maxMessage {
				t.Fatalf("message %d: %q, sent %q", i, m, want[i])
			}
		}
	})
}
