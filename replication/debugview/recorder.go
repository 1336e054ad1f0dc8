package debugview

import (
	"sync"
	"time"

	arche "github.com/mlange-42/arche/ecs"

	"github.com/archenet/archenet/ecs"
	"github.com/archenet/archenet/replication"
)

// Options configures a [Recorder].
type Options struct {
	// Interval is the time between two samples; zero: 500 ms.
	Interval time.Duration
	// Window is how much history the recorder keeps (and the page plots);
	// zero: 2 minutes. The recorder holds Window/Interval samples at most.
	Window time.Duration
	// NoComponentBits leaves the server's bit accounting
	// ([replication.Server.SetBitAccounting]) off: the page then has no
	// bytes per component type, and the encoder saves the accounting's
	// small cost per record.
	NoComponentBits bool
	// Now is the clock of the samples' times; nil: time.Now. Tick times
	// are always wall time.
	Now func() time.Time
}

// resolve returns o with its defaults filled in (a zero or negative
// duration means its default, as documented; nothing else is invalid).
func (o Options) resolve() Options {
	if o.Interval <= 0 {
		o.Interval = 500 * time.Millisecond
	}
	if o.Window <= 0 {
		o.Window = 2 * time.Minute
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return o
}

// Recorder samples a [replication.Server] on the server's own goroutine and
// keeps a bounded history of samples that HTTP handlers read from any
// goroutine. The server is not safe for concurrent use, so only
// [Recorder.Sample] (and [Recorder.TickTime]) touch it or the recorder's
// sampling state; everything else reads the history under a mutex.
type Recorder struct {
	srv  *replication.Server
	opts Options

	// Sampling state: the server's goroutine only.
	start    time.Time
	last     time.Time
	prev     replication.ServerStats
	prevTick uint32
	prevAcct []uint64 // bits per component, framing, headers, unattributed
	prevDown map[replication.ClientID]uint64
	accts    bool
	tickN    int
	tickSum  time.Duration
	tickMax  time.Duration

	mu      sync.Mutex
	comps   []string
	samples []Sample // ring, oldest first from head once full
	head    int
	seq     uint64
}

// NewRecorder returns a recorder of srv. Unless opts.NoComponentBits is
// set, it turns on srv's bit accounting (so call it on the server's
// goroutine, before or between ticks).
func NewRecorder(srv *replication.Server, opts Options) *Recorder {
	opts = opts.resolve()
	r := &Recorder{srv: srv, opts: opts, prevDown: map[replication.ClientID]uint64{}}
	for _, p := range srv.Registry().Plans() {
		r.comps = append(r.comps, p.Name)
	}
	if !opts.NoComponentBits {
		srv.SetBitAccounting(true)
		r.accts = true
	}
	n := int(opts.Window / opts.Interval)
	r.samples = make([]Sample, 0, max(n, 2))
	return r
}

// System returns a system that calls [Recorder.Sample]: add it to the
// server's scheduler as a net-tick system after the server's SendSystem.
func (r *Recorder) System() ecs.System {
	return ecs.Func(func(*arche.World) { r.Sample() })
}

// TickTime reports the wall time one simulation tick of the game took (the
// game measures it, e.g. with a system added first and one added last);
// the page plots the mean and the largest per sample. Call it on the
// server's goroutine. Without it the page shows only the server's Send time.
func (r *Recorder) TickTime(d time.Duration) {
	r.tickN++
	r.tickSum += d
	r.tickMax = max(r.tickMax, d)
}

// Sample adds a sample to the history once Options.Interval has passed
// since the last one: it reads the server's counters, so call it on the
// server's goroutine, after [replication.Server.Send] (add [Recorder.System]
// after the server's SendSystem) or once per frame of a loop that runs the
// server's ticks. Per-tick figures count the net ticks by the server's tick
// number. Cheap between samples.
func (r *Recorder) Sample() {
	now := r.opts.Now()
	if r.start.IsZero() {
		r.start, r.last = now, now
		r.prev, r.prevTick = r.srv.Stats, r.srv.Tick()
		r.prevAcct = r.account(r.prevAcct[:0])
		return
	}
	dt := now.Sub(r.last)
	if dt < r.opts.Interval {
		return
	}
	s := r.build(now, dt.Seconds())
	r.last = now
	r.tickN, r.tickSum, r.tickMax = 0, 0, 0
	r.mu.Lock()
	r.seq++
	s.Seq = r.seq
	if len(r.samples) < cap(r.samples) {
		r.samples = append(r.samples, s)
	} else {
		r.samples[r.head] = s
		r.head = (r.head + 1) % len(r.samples)
	}
	r.mu.Unlock()
}

// account appends the server's bit account: bits per component, then
// framing, headers and unattributed bits.
func (r *Recorder) account(dst []uint64) []uint64 {
	a, ok := r.srv.BitAccount()
	if !ok {
		return dst
	}
	for i := range r.comps {
		var v uint64
		if i < len(a.Components) {
			v = a.Components[i]
		}
		dst = append(dst, v)
	}
	return append(dst, a.Records, a.Headers, a.Unattributed)
}

func (r *Recorder) build(now time.Time, secs float64) Sample {
	st := r.srv.Stats
	p := &r.prev
	tick := r.srv.Tick()
	netTicks := max(int(int32(tick-r.prevTick)), 0)
	ticks := float64(netTicks)
	perTick := func(cur, old uint64) float64 {
		if ticks == 0 {
			return 0
		}
		return float64(cur-old) / ticks
	}
	s := Sample{
		T:            now.Sub(r.start).Seconds(),
		Tick:         tick,
		NetTicks:     netTicks,
		SnapshotBps:  float64(st.SnapshotBytes-p.SnapshotBytes) / secs,
		SpawnBps:     float64(st.SpawnBytes-p.SpawnBytes) / secs,
		Deltas:       perTick(st.Deltas, p.Deltas),
		Fulls:        perTick(st.Fulls, p.Fulls),
		Removals:     perTick(st.Removals, p.Removals),
		Deferred:     perTick(st.Deferred, p.Deferred),
		Datagrams:    perTick(st.SnapshotDatagrams, p.SnapshotDatagrams),
		SnapshotB:    st.SnapshotBytes,
		SpawnB:       st.SpawnBytes,
		Connected:    st.Connected,
		Disconnected: st.Disconnected,
		Rejected:     st.Rejected,
		Suspended:    st.Suspended, Resumed: st.Resumed, SeatsExpired: st.SeatsExpired,
		SeatsSuspended: len(r.srv.Suspended()),
		Clients:        []ClientSample{},
		Clamps:         []Clamp{},
	}
	if ticks > 0 {
		send := (st.BuildFrame + st.BuildClients) - (p.BuildFrame + p.BuildClients)
		s.SendMS = ms(send) / ticks
	}
	if r.tickN > 0 {
		s.TickMS = ms(r.tickSum) / float64(r.tickN)
		s.TickMaxMS = ms(r.tickMax)
		s.HasTickTime = true
	}
	if r.accts {
		r.sampleAccounts(&s, secs)
	}
	r.sampleClients(&s, secs)
	for _, c := range r.srv.Clamps() {
		s.Clamps = append(s.Clamps, Clamp{Component: c.Type, Field: c.Field, OutOfRange: c.OutOfRange, NaN: c.NaN, Inf: c.Inf})
	}
	r.prev, r.prevTick = st, s.Tick
	return s
}

// sampleAccounts fills s's bytes per component from the server's bit
// accounting since the last sample.
func (r *Recorder) sampleAccounts(s *Sample, secs float64) {
	cur := r.account(nil)
	if len(cur) == len(r.prevAcct) && len(cur) == len(r.comps)+3 {
		n := len(r.comps)
		s.ComponentBps = make([]float64, n)
		s.ComponentBytes = make([]uint64, n)
		rate := func(i int) float64 {
			if cur[i] < r.prevAcct[i] {
				return 0 // accounting was restarted (SetBitAccounting)
			}
			return float64(cur[i]-r.prevAcct[i]) / 8 / secs
		}
		for i := 0; i < n; i++ {
			s.ComponentBps[i] = rate(i)
			s.ComponentBytes[i] = cur[i] / 8
		}
		s.FramingBps, s.HeaderBps, s.UnattributedBps = rate(n), rate(n+1), rate(n+2)
	}
	r.prevAcct = cur
}

// sampleClients fills s's per-client figures since the last sample.
func (r *Recorder) sampleClients(s *Sample, secs float64) {
	seen := make(map[replication.ClientID]uint64, len(r.prevDown))
	for _, id := range append(r.srv.Clients(), r.srv.Suspended()...) {
		ci, ok := r.srv.Client(id)
		if !ok {
			continue
		}
		down := ci.SnapshotBytes + ci.SpawnBytes
		c := ClientSample{
			ID: id, Ready: ci.Ready, Suspended: ci.Suspended,
			RTTMS: ms(ci.RTT), AckDelayMS: ms(ci.AckDelay), Loss: ci.Loss,
			BudgetBps: ci.BytesPerSecond, Relevant: ci.Relevant, Spawned: ci.Spawned,
			SendDropped: ci.Transport.DatagramsSendDropped, Backlog: ci.Transport.MessageBacklog,
		}
		if old, ok := r.prevDown[id]; ok && down >= old { // (less: a new client with the id)
			c.DownBps = float64(down-old) / secs
		}
		seen[id] = down
		s.Clients = append(s.Clients, c)
	}
	r.prevDown = seen
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// Stats returns the samples after sequence number since (0: all kept), oldest
// first. Safe for concurrent use.
func (r *Recorder) Stats(since uint64) Stats {
	r.mu.Lock()
	defer r.mu.Unlock()
	st := Stats{
		IntervalMS: ms(r.opts.Interval), WindowS: r.opts.Window.Seconds(),
		Components: r.comps, ComponentBits: r.accts, Seq: r.seq,
		Samples: []Sample{},
	}
	n := len(r.samples)
	for i := 0; i < n; i++ {
		s := r.samples[(r.head+i)%n]
		if s.Seq > since {
			st.Samples = append(st.Samples, s)
		}
	}
	return st
}
