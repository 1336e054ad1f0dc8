package interp

// Track is the snapshot buffer of an entity's components that are
// interpolated in place (replication.ClientConfig.InterpolatedComponents):
// the quantized lanes of the last [BufferSize] authoritative states, ordered
// by server network tick like a [Buffer]. The replication client pushes
// into it and samples it; the schema plan turns two states and a fraction
// into field values (schema.Plan.Interpolate). Used as an arche component;
// its storage is allocated once by [Track.Init].
type Track struct {
	r     ring[trackEntry, *trackEntry]
	nl    int
	lanes []uint64 // BufferSize states of nl lanes, by slot
}

type trackEntry struct {
	tick uint32
	slot uint8
}

func (e *trackEntry) tickOf() uint32 { return e.tick }

// Init empties the track and sizes it for states of n lanes (reusing its
// storage when large enough).
func (t *Track) Init(n int) {
	t.r, t.nl = ring[trackEntry, *trackEntry]{}, n
	if cap(t.lanes) < BufferSize*n {
		t.lanes = make([]uint64, BufferSize*n)
	}
	t.lanes = t.lanes[:BufferSize*n]
}

// Lanes returns the number of lanes of one state.
func (t *Track) Lanes() int { return t.nl }

// Len returns the number of states held.
func (t *Track) Len() int { return int(t.r.n) }

// Newest returns the newest tick held and false if the track is empty.
func (t *Track) Newest() (uint32, bool) { return t.r.newest() }

// Push stores the state of tick (len(lanes) == Lanes(); copied), with the
// ordering and replacement rules of [Buffer.Push], and reports whether it
// was stored. Never allocates.
func (t *Track) Push(tick uint32, lanes []uint64) bool {
	if len(lanes) != t.nl {
		return false
	}
	n := t.r.n
	e, old, evicted, ok := t.r.put(tick)
	if !ok {
		return false
	}
	switch {
	case evicted:
		e.slot = old.slot // the dropped state's storage
	case t.r.n > n:
		e.slot = n // a new entry while not full: slots 0..n-1 are in use
	}
	e.tick = tick
	copy(t.lanes[int(e.slot)*t.nl:], lanes)
	return true
}

// Sample finds renderTick among the states, as [Buffer.Sample] does: the
// value there is a + f·(b − a) with f in [0, 1] between two states and
// f > 1 when extrapolating (at most maxExtrapTicks ticks, then holding);
// a and b are the same state when holding or on a state. ModeEmpty: nothing
// held (nil lanes). The lanes are valid until the next Push.
func (t *Track) Sample(renderTick, maxExtrapTicks float64) (a, b []uint64, f float64, mode Mode) {
	ea, eb, f, mode := t.r.sample(renderTick, maxExtrapTicks)
	if mode == ModeEmpty {
		return nil, nil, 0, mode
	}
	return t.state(ea.slot), t.state(eb.slot), f, mode
}

func (t *Track) state(slot uint8) []uint64 {
	return t.lanes[int(slot)*t.nl : (int(slot)+1)*t.nl]
}
