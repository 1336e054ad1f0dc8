package baseline

import (
	"math/bits"

	"github.com/archenet/archenet/replication/internal/wire"
)

// Ack records the client's acknowledgement (see wire.Ack): the views it
// names become baselines the server may code against, each exactly as the
// client holds it: the records of parts the client lacks are undone (their
// entities keep the values they had before, or are absent if they were
// new). Acks for ticks that were never sent, or whose views were
// overwritten, are ignored, and parts that were never sent are ignored, so
// a hostile ack can make the server use only baselines built from what it
// sent that client.
//
// It returns the ticks the Ack acknowledged for the first time: bit i is
// tick a.Newest−i. Ticks an earlier Ack named are skipped at the cost of a
// shift, so a client's steady stream of Acks costs one tick each.
func (t *Tracker) Ack(a *wire.Ack) (fresh uint64) {
	if a.Newest == 0 {
		return 0
	}
	named := uint64(1) | uint64(a.Mask)<<1
	// What earlier Acks named, as seen from a.Newest.
	var seen uint64
	if t.coverNewest != 0 {
		switch d := int32(a.Newest - t.coverNewest); {
		case d >= 0 && d < 64:
			seen = t.cover << uint(d)
		case d < 0 && d > -64:
			seen = t.cover >> uint(-d)
		}
	}
	fresh = named &^ seen
	for f := fresh; f != 0; f &= f - 1 {
		i := uint32(bits.TrailingZeros64(f))
		if a.Newest > i {
			t.ackOne(a.Newest-i, a)
		}
	}
	if t.coverNewest == 0 || int32(a.Newest-t.coverNewest) >= 0 {
		t.cover, t.coverNewest = seen|named, a.Newest
	} else {
		t.cover |= named << uint(t.coverNewest-a.Newest)
	}
	if t.NewestAck == 0 || int32(a.Newest-t.NewestAck) > 0 {
		t.NewestAck = a.Newest
	}
	return fresh
}

func (t *Tracker) ackOne(tick uint32, a *wire.Ack) {
	v := &t.views[tick%uint32(len(t.views))]
	if !v.used || v.Tick != tick || v.acked {
		return
	}
	held, all := a.Holds(tick)
	sent := uint64(1)<<v.Parts - 1
	partial := !all && held&sent != sent
	if partial && v.Parts <= 1 {
		// The tick's only datagram did not arrive (an honest client
		// does not ack that): the view is not one the client holds.
		return
	}
	v.acked = true
	t.Acked++
	if t.bestAck == 0 || int32(tick-t.bestAck) > 0 {
		t.bestAck = tick
	}
	if partial {
		t.AckedPartial++
		t.undo(v, held)
	}
	t.releaseRecs(v) // (needed only to undo what an ack says was lost)
}

// undo takes the records of the parts not in held out of view v.
func (t *Tracker) undo(v *View, held uint64) {
	t.undoBuf = t.undoBuf[:0]
	l := t.listsOf(v)
	for _, r := range l.recs {
		if held>>r.Part&1 != 0 {
			continue
		}
		switch {
		case r.Mem:
			// The client keeps the value it had (a removal did not happen).
			t.SetMember(v, r.Slot, true)
			t.undoBuf = append(t.undoBuf, Behind{Slot: r.Slot, Src: r.Src})
		default:
			t.SetMember(v, r.Slot, false) // a spawn that did not arrive
		}
	}
	if len(t.undoBuf) == 0 {
		return
	}
	// Merge the two sorted, disjoint lists.
	behind := t.Behind(v)
	merged := t.mergeBuf[:0]
	i, j := 0, 0
	for i < len(behind) || j < len(t.undoBuf) {
		if j == len(t.undoBuf) || (i < len(behind) && behind[i].Slot < t.undoBuf[j].Slot) {
			merged = append(merged, behind[i])
			i++
		} else {
			merged = append(merged, t.undoBuf[j])
			j++
		}
	}
	t.mergeBuf, l.behind = l.behind, merged
	v.hasBehind, v.behindArr = true, true
}
