package encode

import (
	"github.com/archenet/archenet/replication/internal/entity"
	"github.com/archenet/archenet/replication/internal/lanes"
	"github.com/archenet/archenet/replication/internal/store"
)

// recordCache holds every record the encoder encoded for the current
// tick: two ways per slot, each tagged with the frame tick and the id of
// its record key (what the record depends on: the client's baseline value,
// the prediction views, the owner view), so that clients with the same key
// share the record's bits ("encode once, copy many"). The records' bits
// live in the encoder's arena (lanes.Coder.arena).
type recordCache struct {
	tick uint32 // tick the cache belongs to
	// keyIDs numbers the record keys of the tick (cache tags); lastKeys
	// and lastTags: the common keys of the last Build and their tags
	keyIDs   map[recKey]uint32
	lastKeys [3]recKey
	lastTags [3]uint64
	// memoKeys and memoTags remember the keys keyTag looked up last (a
	// Build's records use a few keys each, over and over: comparing them
	// is cheaper than hashing one), memoN how many are valid, memoNext the
	// one the next new key replaces
	memoKeys        [memoLen]recKey
	memoTags        [memoLen]uint64
	memoN, memoNext uint8
	// entries holds two cache ways per slot (entries[2·slot+way]), tags
	// their tags (apart: a lookup reads 16 bytes, not two entries); evict
	// says which way of a slot the next encode replaces
	entries []cacheEntry
	tags    []uint64
	evict   []uint8
	// pins marks the ways of each slot that hold a record of the kept
	// Build (bit way): never replaced while it is kept (shared builds)
	pins    []uint8
	present entity.Bitset // slots present in the current frame
	// owned: slots of the current frame with an owner and owner-only
	// groups (their records depend on the client: see ownerView)
	owned entity.Bitset
	// owners: the owner ids of the entities in owned
	owners [4]uint64
	// presentLayout is the frame layout present and owned were made for
	// (frames of one layout share their entries and Metas)
	presentLayout uint32

	// Cache statistics since the last Begin.
	CacheHits, CacheMisses int
	// Predicted counts records (since the last Begin) whose residuals are
	// against the linear extrapolation.
	Predicted int
}

type cacheEntry struct {
	usePred  bool        // the body's residuals are against the extrapolation
	maskPred bool        // (with usePred) the field masks are the predicted ones: sent as one bit
	saved    int32       // bits that prediction saved against the plain residuals (< 0: cost)
	stats    lanes.Stats // its residuals, counted for each client it is sent to
	sends    uint32      // times sent since its stats were last counted
	kind     uint8       // codec.KindDelta or codec.KindFull
	maskBits uint16
	mask     uint64 // mask bits when maskBits ≤ 64
	maskOff  uint32 // arena offset of the mask when maskBits > 64
	bodyOff  uint32 // arena byte offset of the body
	bodyBits uint32
	// short holds the body itself when hasShort (at most 56 bits): the
	// datagram writer takes it from here, not from the arena
	short    uint64
	hasShort bool
	arena    uint8 // of a pre-encoded record: its encoder's arena (pre.go)
}

// begin readies the cache for frame f (a new tick): it forgets the last
// tick's keys and counts, grows to the ring's slots, and finds the slots
// present in f and those owned with owner-only groups (ownerComps), unless
// f has the layout they were found for.
func (rc *recordCache) begin(f *store.Frame, slots int, ownerComps uint64) {
	rc.tick = f.Tick
	clear(rc.keyIDs)
	rc.lastTags = [3]uint64{}
	rc.memoN, rc.memoNext = 0, 0
	rc.CacheHits, rc.CacheMisses, rc.Predicted = 0, 0, 0
	if len(rc.evict) < slots {
		rc.entries = append(rc.entries, make([]cacheEntry, 2*slots-len(rc.entries))...)
		rc.tags = append(rc.tags, make([]uint64, 2*slots-len(rc.tags))...)
		rc.pins = append(rc.pins, make([]uint8, slots-len(rc.evict))...)
		rc.evict = append(rc.evict, make([]uint8, slots-len(rc.evict))...)
	}
	if f.Layout() == rc.presentLayout {
		return // (same entries and Metas as when present and owned were made)
	}
	rc.presentLayout = f.Layout()
	rc.present.Reset()
	rc.owned.Reset()
	rc.owners = [4]uint64{}
	for i, s := range f.Slots {
		rc.present.Set(s)
		if m := f.Metas[i]; m.Owner != 0 && m.Set&ownerComps != 0 {
			rc.owned.Set(s)
			rc.owners[m.Owner>>6] |= 1 << (m.Owner & 63)
		}
	}
}

// ownerHas reports whether owner id owns an entity with owner-only groups
// in the current frame.
func (rc *recordCache) ownerHas(id uint8) bool { return rc.owners[id>>6]>>(id&63)&1 != 0 }

// indexOf returns the index in rc.entries of ce, one of slot's entries.
func (rc *recordCache) indexOf(slot uint32, ce *cacheEntry) uint32 {
	if ce == &rc.entries[2*slot] {
		return 2 * slot
	}
	return 2*slot + 1
}

// find returns the index in rc.entries of slot's record of tag, or −1.
func (rc *recordCache) find(slot uint32, tag uint64) int {
	i := 2 * int(slot)
	switch tag {
	case rc.tags[i]:
		return i
	case rc.tags[i+1]:
		return i + 1
	}
	return -1
}

// victim returns the index of the entry of slot the next record replaces,
// tagged tag: the way used least recently, unless the kept Build's record
// is there (pinned). Its old content is the caller's to count (its sends)
// and reset.
func (rc *recordCache) victim(slot uint32, tag uint64) uint32 {
	w := uint32(rc.evict[slot])
	if rc.pins[slot]>>w&1 != 0 {
		w ^= 1
	} else {
		rc.evict[slot] ^= 1
	}
	x := 2*slot + w
	rc.tags[x] = tag
	return x
}

// pin keeps entry x (a record of the kept Build) from being replaced until
// unpin.
func (rc *recordCache) pin(x uint32) { rc.pins[x/2] |= 1 << (x & 1) }

// unpin lets entry x be replaced again.
func (rc *recordCache) unpin(x uint32) { rc.pins[x/2] &^= 1 << (x & 1) }

// keyTag returns the cache tag of key k in the current tick: the tick and
// the key's number among the tick's keys.
func (rc *recordCache) keyTag(k recKey) uint64 {
	for i := range rc.memoN {
		if rc.memoKeys[i] == k {
			return rc.memoTags[i]
		}
	}
	id, ok := rc.keyIDs[k]
	if !ok {
		id = uint32(len(rc.keyIDs)) + 1
		rc.keyIDs[k] = id
	}
	tag := uint64(rc.tick)<<32 | uint64(id)
	i := rc.memoNext
	rc.memoKeys[i], rc.memoTags[i] = k, tag
	rc.memoNext = (i + 1) % memoLen
	rc.memoN = max(rc.memoN, i+1)
	return tag
}

// memoLen is how many keys keyTag remembers.
const memoLen = 4

// setTags sets tags to the tags of a Build's common keys, reusing the last
// Build's where the keys are the same.
func (rc *recordCache) setTags(keys *[3]recKey, tags *[3]uint64) {
	for i := range keys {
		if rc.lastTags[i] == 0 || rc.lastKeys[i] != keys[i] {
			rc.lastKeys[i], rc.lastTags[i] = keys[i], rc.keyTag(keys[i])
		}
		tags[i] = rc.lastTags[i]
	}
}

// entryTick returns the frame tick of a cache entry (0: none).
func (rc *recordCache) entryTick(x uint32) uint32 { return uint32(rc.tags[x] >> 32) }

// memberBits estimates a record's size in a datagram, for a slot the
// client holds (gap code aside): kind, masks unless predicted, body.
func memberBits(ce *cacheEntry) int {
	b := int(ce.bodyBits) + 4
	if ce.kind == kindDelta && !ce.maskPred {
		b += int(ce.maskBits) - 1
	} else if ce.kind == kindDelta {
		b -= 3
	}
	return b
}
