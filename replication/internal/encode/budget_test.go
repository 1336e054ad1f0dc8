package encode

import (
	"math/rand/v2"
	"testing"
	"unsafe"

	"github.com/archenet/archenet/components"
	"github.com/archenet/archenet/replication/internal/baseline"
	"github.com/archenet/archenet/replication/internal/congestion"
	"github.com/archenet/archenet/replication/internal/entity"
	"github.com/archenet/archenet/replication/internal/receive"
	"github.com/archenet/archenet/replication/internal/store"
	"github.com/archenet/archenet/replication/internal/wire"
	"github.com/archenet/archenet/replication/schema"
	"github.com/stretchr/testify/require"
)

type propShip struct {
	Pos components.Vec3 `net:"world,step=0.01"`
	Rot components.Quat `net:"quat,bits=9"`
	HP  uint16          `net:"range=0:1000"`
}

type propTag struct {
	Team uint8 `net:"range=0:7"`
}

// For random scenes, per-datagram budgets, byte rates, part limits, acks
// that lag, lose parts or never come, and input extensions at their clamp
// limits: every datagram is within its budget and decodes on the client,
// and the client's view of every tick whose datagrams all arrived is what
// the server believes it holds.
func TestDatagramsFitTheirBudgetAndDecode(t *testing.T) {
	datagrams, checked := 0, 0
	defer func() { t.Logf("%d datagrams, %d views checked", datagrams, checked) }()
	for seed := range uint64(30) {
		rng := rand.New(rand.NewPCG(seed, 77))
		reg := schema.NewRegistry()
		schema.MustRegister[propShip](reg)
		schema.MustRegister[propTag](reg)
		w := store.New(reg, 0)
		enc := newEncoder(w)
		c := baseline.NewTracker(3, 0)
		rcv := receive.NewReceiver(reg, 3, 0)
		mtu := MinBudget + rng.IntN(1500)
		maxParts := 1 + rng.IntN(8)
		var rate congestion.Bucket // (the server's rate control keeps one)
		if rng.IntN(3) == 0 {
			rate.Set(2000+rng.IntN(100000), mtu*2)
		}
		n := 20 + rng.IntN(400)
		ships := make([]propShip, n)
		tags := make([]propTag, n)
		owner := make([]uint8, n)
		alive := make([]bool, n)
		for i := range ships {
			ships[i].Pos = components.Vec3{X: rng.Float64() * 500, Z: rng.Float64() * 500}
			ships[i].Rot = components.QuatIdentity()
			owner[i] = uint8(rng.IntN(5))
			alive[i] = rng.IntN(4) != 0
		}
		var pk Packets
		var acks []wire.Ack
		lag := rng.IntN(4)
		for tick := uint32(1); tick <= 60; tick++ {
			for i := range ships {
				if rng.IntN(3) == 0 {
					ships[i].Pos.X += rng.Float64() - 0.5
					ships[i].Rot = components.QuatAxisAngle(components.Vec3{Y: 1}, rng.Float64()*6)
					ships[i].HP = uint16(rng.IntN(1001))
				}
				if rng.IntN(50) == 0 {
					alive[i] = !alive[i]
				}
			}
			w.Begin(tick)
			ptrs := make([]unsafe.Pointer, 2)
			for i := range ships {
				if !alive[i] {
					continue
				}
				ptrs[0], ptrs[1] = unsafe.Pointer(&ships[i]), unsafe.Pointer(&tags[i])
				set := uint64(1)
				p := ptrs[:1]
				if i%3 == 0 {
					set, p = 3, ptrs
				}
				w.Put(uint32(i), entity.Meta{Owner: owner[i], Set: set}, p)
			}
			w.Commit()
			rate.Refill(1.0 / 30)
			opt := BuildOptions{Budget: mtu, MaxParts: maxParts}
			switch rng.IntN(4) {
			case 0:
			case 1: // extension at its clamp limits
				opt.InputAck, opt.HasInputAck, opt.HasInputFeedback = rng.Uint32(), true, true
				opt.InputHeld, opt.InputDepth = opt.InputAck+wire.MaxInputLead+uint32(rng.IntN(10)), -wire.MaxInputDepth-rng.IntN(10)
			default:
				opt.InputAck, opt.HasInputAck = 1000+tick, true
				opt.InputHeld, opt.InputDepth, opt.HasInputFeedback = opt.InputAck-wire.MaxInputLead, wire.MaxInputDepth, true
			}
			opt.Allowance, opt.Limited = rate.Allowance(1<<30), rate.Limited()
			info := enc.Build(c, opt, &pk)
			rate.Spend(info.Bytes)
			w.EndTick()
			require.LessOrEqual(t, pk.Len(), maxParts)
			require.Equal(t, info.Bytes, pk.Bytes())
			lost := uint64(0)
			for i := range pk.Len() {
				d := pk.At(i)
				datagrams++
				require.LessOrEqual(t, len(d), mtu, "seed %d tick %d part %d", seed, tick, i)
				if rng.IntN(8) == 0 {
					lost |= 1 << i // this datagram is lost
					continue
				}
				_, err := rcv.Decode(d)
				require.NoError(t, err, "seed %d tick %d part %d", seed, tick, i)
			}
			if slots, lanes, ok := expectedView(w, c, tick); pk.Len() > 0 && lost == 0 && ok {
				checked++
				v := rcv.View(tick)
				require.Equal(t, slots, v.Slots, "seed %d tick %d", seed, tick)
				for i := range slots {
					require.Equal(t, lanes[i], v.EntityLanes(i))
				}
			}
			acks = append(acks, rcv.Ack())
			if len(acks) > lag && rng.IntN(6) != 0 {
				c.Ack(&acks[len(acks)-1-lag])
			}
		}
	}
}
