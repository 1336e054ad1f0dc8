package input_test

import (
	"fmt"
	"time"

	"github.com/archenet/archenet/input"
	"github.com/archenet/archenet/replication/bitio"
	"github.com/archenet/archenet/replication/schema"
)

// Input is the game's input frame: plain fields with precision tags.
type Input struct {
	Keys    uint16  `net:"range=0:65535"`            // held keys, one bit each
	DX      float32 `net:"range=-512:512,step=0.25"` // mouse delta
	DY      float32 `net:"range=-512:512,step=0.25"`
	Buttons uint8   `net:"range=0:7"`
}

// Client sends its newest frames each tick; the server stores them and
// consumes one per tick.
func Example() {
	codec, err := input.NewCodec[Input](input.Config{}) // N = 4 frames per datagram
	if err != nil {
		panic(err)
	}
	sender := input.NewSender(codec)
	log, err := input.NewLog(codec, input.LogConfig{})
	if err != nil {
		panic(err)
	}
	var w bitio.Writer
	var got Input
	for tick := uint32(100); tick < 110; tick++ {
		in := Input{Keys: 0b1001, DX: float32(tick%3) + 0.3}
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
			fmt.Printf("tick %d: %v keys=%04b dx=%.2f\n", server, st, got.Keys, got.DX)
		}
	}
	st := log.Stats()
	fmt.Printf("received %d, missing %d, last section %d bytes\n", st.Received, st.Missing, w.Len())
	// Output:
	// tick 102: received keys=1001 dx=0.25
	// tick 103: received keys=1001 dx=1.25
	// tick 104: received keys=1001 dx=2.25
	// received 8, missing 0, last section 8 bytes
}

// A server-side consume with no frame for the tick repeats the last input
// and reports it; the client is told how deep its input buffer was.
func ExampleLog_Feedback() {
	codec, _ := input.NewCodec[Input](input.Config{})
	sender := input.NewSender(codec)
	log, _ := input.NewLog(codec, input.LogConfig{})
	for tick := uint32(1); tick <= 6; tick++ {
		in := Input{Keys: uint16(tick)}
		sender.Push(tick, &in)
	}
	var w bitio.Writer
	sender.AppendFrames(&w) // ticks 3..6
	log.Receive(bitio.NewReader(w.Bytes()), 3)
	var in Input
	log.Consume(3, &in)
	f := log.Feedback()
	fmt.Printf("ack %d depth %d\n", f.Ack, f.Depth)
	w.Reset(nil)
	input.AppendFeedback(&w, f)
	back, _ := input.ReadFeedback(bitio.NewReader(w.Bytes()), 6)
	fmt.Printf("on the wire: %d bits, %+v\n", w.BitLen(), back)
	// Output:
	// ack 6 depth 3
	// on the wire: 24 bits, {Ack:6 HasAck:true Depth:3}
}

// Player is the predicted state of this client's own entity.
type Player struct {
	X  float32 `net:"range=-1000:1000,step=0.001"`
	VX float32 `net:"range=-50:50,step=0.001"`
}

func step(s *Player, in *Input, dt float64) {
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
func ExamplePredictor() {
	plan := schema.MustRegister[Player](schema.NewRegistry())
	pred, _ := input.NewPredictor(plan, step, input.PredictorConfig{})
	rounder, _ := input.NewRounder[Player](plan) // server side

	var server Player
	pred.Reset(0, &server)
	fwd := Input{Keys: 1}
	for tick := uint32(1); tick <= 10; tick++ {
		pred.Predict(tick, &fwd)
	}
	// The server simulates tick 1..4 with the same input, then tick 5 with a
	// push, rounding at the end of each tick.
	for tick := uint32(1); tick <= 5; tick++ {
		step(&server, &fwd, 1.0/60)
		if tick == 5 {
			server.X += 0.5
		}
		rounder.Round(&server)
		if tick == 4 {
			fmt.Println("tick 4:", pred.Reconcile(4, 4, &server).Status)
		}
	}
	c := pred.Reconcile(5, 5, &server)
	fmt.Printf("tick 5: %v, replayed %d, X %.3f -> %.3f\n", c.Status, c.Replayed, c.Old.X, c.New.X)
	// Output:
	// tick 4: match
	// tick 5: corrected, replayed 5, X 0.830 -> 1.330
}

// The client clock: observe snapshots, then each frame ask which input
// ticks to sample.
func ExampleTickSync() {
	ts, _ := input.NewTickSync(input.SyncConfig{})
	start := time.Unix(0, 0)
	ts.ObserveRTT(100 * time.Millisecond)
	// Snapshots of ticks 500, 501, ... arrive 50 ms after the server ran them.
	for i := 0; i < 60; i++ {
		ts.ObserveSnapshot(uint32(500+i), start.Add(time.Duration(i)*time.Second/60+50*time.Millisecond))
	}
	now := start.Add(time.Second + 50*time.Millisecond)
	first, n := ts.Advance(now)
	fmt.Printf("server ≈ %.0f, stamp input tick %d (%d tick), lead %.1f ticks\n", ts.ServerTick(now), first, n, ts.Lead())
	// Output:
	// server ≈ 563, stamp input tick 568 (1 tick), lead 5.0 ticks
}
