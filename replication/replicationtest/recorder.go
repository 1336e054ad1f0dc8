package replicationtest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sort"

	"github.com/archenet/archenet/replication/internal/wire"
	"github.com/archenet/archenet/transport"
)

// Recorder is a transport.Conn that records the snapshot datagrams its first ticks
// bring, for comparing what two clients were sent: per tick, the view its records are
// coded against and a digest of its bytes. Not safe for concurrent receives (a
// replication client polls from one goroutine).
type Recorder struct {
	transport.Conn
	max   int
	ticks map[uint32]*tickParts
}

type tickParts struct {
	head  wire.Header // of part 0
	parts map[int][]byte
	want  int
}

// TickRecord is what one client received of one snapshot tick, all its parts.
type TickRecord struct {
	Tick uint32 `json:"tick"`
	// View names what the tick's records are coded against and the header
	// fields the server sets per client (baseline and prediction views, the
	// input extension): two clients sent the same View for a tick must get the
	// same bytes from the same codec.
	View   string `json:"view"`
	Parts  int    `json:"parts"`
	Bytes  int    `json:"bytes"`
	Digest string `json:"digest"` // SHA-256 of the parts' bytes in part order
}

// NewRecorder records the snapshot datagrams of the first maxTicks ticks c receives.
func NewRecorder(c transport.Conn, maxTicks int) *Recorder {
	return &Recorder{Conn: c, max: maxTicks, ticks: map[uint32]*tickParts{}}
}

// PollDatagram implements transport.Conn, recording what it returns.
func (r *Recorder) PollDatagram() ([]byte, bool) {
	b, ok := r.Conn.PollDatagram()
	if ok {
		r.note(b)
	}
	return b, ok
}

// ReceiveDatagram implements transport.Conn, recording what it returns.
func (r *Recorder) ReceiveDatagram(ctx context.Context) ([]byte, error) {
	b, err := r.Conn.ReceiveDatagram(ctx)
	if err == nil {
		r.note(b)
	}
	return b, err
}

func (r *Recorder) note(b []byte) {
	h, err := wire.ParseHeader(b)
	if err != nil {
		return
	}
	t := r.ticks[h.Tick]
	if t == nil {
		if len(r.ticks) >= r.max {
			return
		}
		t = &tickParts{parts: map[int][]byte{}, want: h.Parts}
		r.ticks[h.Tick] = t
	}
	if h.Part == 0 {
		t.head = h
	}
	t.parts[h.Part] = append([]byte(nil), b...)
}

// Records returns the ticks received in full, in tick order.
func (r *Recorder) Records() []TickRecord {
	var out []TickRecord
	for tick, t := range r.ticks {
		if len(t.parts) != t.want {
			continue
		}
		sum := sha256.New()
		n := 0
		for i := range t.want {
			sum.Write(t.parts[i])
			n += len(t.parts[i])
		}
		h := t.head
		view := fmt.Sprintf("baseline %d predict %v/%d/%v input %v/%v/%d feedback %v/%d/%d",
			h.Baseline, h.Predict, h.PredictGap, h.Quad, h.HasInputAck, h.InputAckRelative, h.InputAck, h.HasInputFeedback, h.InputLead, h.InputDepth)
		out = append(out, TickRecord{Tick: tick, View: view, Parts: t.want, Bytes: n, Digest: hex.EncodeToString(sum.Sum(nil))})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Tick < out[j].Tick })
	return out
}
