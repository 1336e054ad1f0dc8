package input

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/archenet/archenet/input/internal/frames"
	"github.com/archenet/archenet/input/internal/inputlog"
	"github.com/archenet/archenet/input/internal/predict"
	"github.com/archenet/archenet/replication/bitio"
	"github.com/archenet/archenet/replication/schema"
)

// The parts Player and Authority are built from, driven by hand: what the
// helpers do each tick, with its output pinned.

// partsInput is the game's input frame: plain fields with precision tags.
type partsInput struct {
	Keys    uint16  `net:"range=0:65535"`            // held keys, one bit each
	DX      float32 `net:"range=-512:512,step=0.25"` // mouse delta
	DY      float32 `net:"range=-512:512,step=0.25"`
	Buttons uint8   `net:"range=0:7"`
}

// Client sends its newest frames each tick; the server stores them and
// consumes one per tick.
func TestPartsSectionExample(t *testing.T) {
	var out strings.Builder
	codec, err := frames.New[partsInput](frames.Config{}) // N = 4 frames per datagram
	if err != nil {
		panic(err)
	}
	sender := frames.NewSender(codec)
	log, err := inputlog.New(codec, inputlog.Config{})
	if err != nil {
		panic(err)
	}
	var w bitio.Writer
	var got partsInput
	for tick := uint32(100); tick < 110; tick++ {
		in := partsInput{Keys: 0b1001, DX: float32(tick%3) + 0.3}
		sender.Push(tick, &in) // rounds in.DX to the 0.25 step the server sees
		w.Reset(nil)
		sender.AppendFrames(&w) // the input section of this tick's datagram
		server := tick - 2      // the client runs 2 ticks ahead of the server
		if tick != 104 {        // datagram 104 is lost: 105 repeats its frame
			if _, err := log.Receive(bitio.NewReader(w.Bytes()), server); err != nil {
				panic(err)
			}
		}
		st := log.Consume(server, &got)
		sender.Ack(log.Feedback().Ack) // in a game: carried back in the snapshot
		if server >= 102 && server <= 104 {
			fmt.Fprintf(&out, "tick %d: %v keys=%04b dx=%.2f\n", server, st, got.Keys, got.DX)
		}
	}
	st := log.Stats()
	fmt.Fprintf(&out, "received %d, missing %d, last section %d bytes\n", st.Received, st.Missing, w.Len())
	require.Equal(t, `tick 102: received keys=1001 dx=0.25
tick 103: received keys=1001 dx=1.25
tick 104: received keys=1001 dx=2.25
received 8, missing 0, last section 8 bytes
`, out.String())
}

// A server-side consume with no frame for the tick repeats the last input
// and reports it; the client is told how deep its input buffer was.
func TestPartsFeedbackExample(t *testing.T) {
	var out strings.Builder
	codec, _ := frames.New[partsInput](frames.Config{})
	sender := frames.NewSender(codec)
	log, _ := inputlog.New(codec, inputlog.Config{})
	for tick := uint32(1); tick <= 6; tick++ {
		in := partsInput{Keys: uint16(tick)}
		sender.Push(tick, &in)
	}
	var w bitio.Writer
	sender.AppendFrames(&w) // ticks 3..6
	log.Receive(bitio.NewReader(w.Bytes()), 3)
	var in partsInput
	log.Consume(3, &in)
	f := log.Feedback()
	fmt.Fprintf(&out, "ack %d depth %d\n", f.Ack, f.Depth)
	w.Reset(nil)
	inputlog.AppendFeedback(&w, f)
	back, _ := inputlog.ReadFeedback(bitio.NewReader(w.Bytes()), 6)
	fmt.Fprintf(&out, "on the wire: %d bits, %+v\n", w.BitLen(), back)
	require.Equal(t, `ack 6 depth 3
on the wire: 24 bits, {Ack:6 HasAck:true Depth:3}
`, out.String())
}

// partsPlayer is the predicted state of this client's own entity.
type partsPlayer struct {
	X  float32 `net:"range=-1000:1000,step=0.001"`
	VX float32 `net:"range=-50:50,step=0.001"`
}

func partsStep(s *partsPlayer, in *partsInput, dt float64) {
	if in.Keys&1 != 0 {
		s.VX = 5
	} else {
		s.VX = 0
	}
	s.X += s.VX * float32(dt)
}

// The client predicts with its own input; when the server's state for a
// tick differs (here: a push the client could not know about), it rewinds
// and replays the later ticks.
func TestPartsPredictorExample(t *testing.T) {
	var out strings.Builder
	plan := schema.MustRegister[partsPlayer](schema.NewRegistry())
	pred, _ := predict.New(plan, partsStep, predict.Config{})
	rounder, _ := predict.NewRounder[partsPlayer](plan) // server side

	var server partsPlayer
	pred.Reset(0, &server)
	fwd := partsInput{Keys: 1}
	for tick := uint32(1); tick <= 10; tick++ {
		pred.Predict(tick, &fwd)
	}
	// The server simulates tick 1..4 with the same input, then tick 5 with a
	// push, rounding at the end of each tick.
	for tick := uint32(1); tick <= 5; tick++ {
		partsStep(&server, &fwd, 1.0/60)
		if tick == 5 {
			server.X += 0.5
		}
		rounder.Round(&server)
		if tick == 4 {
			fmt.Fprintln(&out, "tick 4:", pred.Reconcile(4, 4, &server).Status)
		}
	}
	c := pred.Reconcile(5, 5, &server)
	fmt.Fprintf(&out, "tick 5: %v, replayed %d, X %.3f -> %.3f\n", c.Status, c.Replayed, c.Old.X, c.New.X)
	require.Equal(t, `tick 4: match
tick 5: corrected, replayed 5, X 0.830 -> 1.330
`, out.String())
}
