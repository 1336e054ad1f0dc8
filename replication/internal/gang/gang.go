package gang

import (
	"cmp"
	"runtime"
	"sync/atomic"
	"time"
)

// Gang is the goroutines that run the parallel parts of a net tick: the
// caller's and helpers that live as long as the server. Waking a parked
// goroutine's thread takes long on virtual machines (0.1-0.2 ms measured
// on this project's 2-core test machines, a tenth of a tick's work), so
// the server wakes the helpers ahead of its parallel phases ([Gang.Wake]:
// when Send starts, or when Receive starts if the step between them is
// short); they spin (yielding the processor now and then) until the tick's
// jobs come, then park again ([Gang.Rest]).
//
// A job ([Gang.Run]) runs on the caller at once and on every helper that
// joins it while it is open, so it must hand its work out dynamically (an
// atomic counter): a helper that comes late finds nothing left, and the job
// never waits for one that does not come.
type Gang struct {
	helpers []helper
	want    atomic.Bool   // a tick's jobs are near: helpers spin, not park
	gen     atomic.Uint32 // job generation: odd while the job is open
	joined  atomic.Int32  // helpers inside the open job
	job     func(i int)
	// items is the open eachOn's (each: one of fn1 and fn2 is set), whose
	// job is runItems: kept here, not in a closure, so that handing out
	// items allocates nothing
	items struct {
		n    int
		next atomic.Int32
		fn1  func(i int)
		fn2  func(wi, i int)
		job  func(wi int)
	}
	shares shareJob // the open Shares job (shares.go)
	quit   chan struct{}
	awake  atomic.Int64  // nanoseconds the helpers spent awake, summed
	idle   time.Duration // how long a helper spins without a job; 0: Spin
}

type helper struct {
	wake   chan struct{} // buffered: a token when woken
	asleep atomic.Bool
}

// Spin bounds how long a woken helper spins without a job before it
// parks (the next job wakes it again).
const Spin = 500 * time.Microsecond

// Start starts n helpers (once).
func (g *Gang) Start(n int) {
	if g.quit != nil || n <= 0 {
		return
	}
	g.quit = make(chan struct{})
	g.helpers = make([]helper, n)
	for i := range g.helpers {
		h := &g.helpers[i]
		h.wake = make(chan struct{}, 1)
		h.asleep.Store(true)
		go g.loop(i+1, h, g.quit, g.gen.Load())
	}
}

// Stop ends the helpers (they finish a job they are in first).
func (g *Gang) Stop() {
	g.want.Store(false)
	if g.quit != nil {
		close(g.quit)
		g.quit = nil
	}
}

// Wake tells the helpers that jobs are near: parked ones are woken and
// spin until [Gang.Rest].
func (g *Gang) Wake() {
	g.want.Store(true)
	g.rouse()
}

// AwakeTime returns how long the helpers were awake (spinning or working)
// in all, up to their last park: the CPU time they used.
func (g *Gang) AwakeTime() time.Duration { return time.Duration(g.awake.Load()) }

// Rest lets the helpers park once the tick's jobs are done.
func (g *Gang) Rest() { g.want.Store(false) }

// rouse wakes the parked helpers.
func (g *Gang) rouse() {
	for i := range g.helpers {
		h := &g.helpers[i]
		if h.asleep.CompareAndSwap(true, false) {
			h.wake <- struct{}{} // (the one token: it was asleep)
		}
	}
}

// Run runs fn(0) on the caller's goroutine and fn(i) on helper i if it
// joins while the caller runs fn(0); it returns when every fn has
// returned. fn must tolerate any set of helpers (see [gang]).
func (g *Gang) Run(fn func(i int)) {
	if len(g.helpers) == 0 {
		fn(0)
		return
	}
	g.job = fn
	g.gen.Add(1) // open
	defer func() {
		// Closed (also when fn panics, so that open stays odd): no helper
		// joins any more; wait for those in it.
		g.gen.Add(1)
		for g.joined.Load() != 0 {
			runtime.Gosched()
		}
		g.job = nil
	}()
	g.rouse()
	fn(0)
}

// Each runs fn(i) for i in [0, n), the items handed out one at a time to
// the caller and the helpers that join (one item runs on the caller alone).
// It allocates nothing (fn itself may, if it is a closure made for the
// call: the callers keep theirs). Jobs do not nest.
func (g *Gang) Each(n int, fn func(i int)) {
	if n == 1 {
		fn(0)
		return
	}
	g.items.fn1, g.items.fn2 = fn, nil
	g.runItems(n)
}

// EachOn is each, telling fn which goroutine runs item i: 0 the caller, j
// helper j.
func (g *Gang) EachOn(n int, fn func(wi, i int)) {
	if n == 1 {
		fn(0, 0)
		return
	}
	g.items.fn1, g.items.fn2 = nil, fn
	g.runItems(n)
}

// runItems runs the n items of the function each or eachOn set.
func (g *Gang) runItems(n int) {
	it := &g.items
	if it.job == nil {
		it.job = g.takeItems // (once: a method value is a closure)
	}
	it.n = n
	it.next.Store(0)
	g.Run(it.job)
	it.fn1, it.fn2 = nil, nil
}

// takeItems is runItems' job on goroutine wi: items until none is left.
func (g *Gang) takeItems(wi int) {
	it := &g.items
	for {
		i := int(it.next.Add(1)) - 1
		if i >= it.n {
			return
		}
		if it.fn1 != nil {
			it.fn1(i)
		} else {
			it.fn2(wi, i)
		}
	}
}

// loop is helper i's goroutine, until quit closes; last is the job
// generation when it started.
func (g *Gang) loop(i int, h *helper, quit <-chan struct{}, last uint32) {
	for {
		select {
		case <-h.wake:
		case <-quit:
			return
		}
		for {
			t0 := time.Now()
			var idle bool
			last, idle = g.spin(i, last)
			g.awake.Add(int64(time.Since(t0)))
			h.asleep.Store(true)
			// A wake or a job that came between spin's last look and the
			// store above found the helper awake and sent no token: look
			// again. It stays up for a job that opened meanwhile, and for
			// a wake unless it stopped for lack of work (the next job
			// rouses it); unless a rouse took it meanwhile (then a token
			// is on its way).
			newJob := g.gen.Load() != last
			if !newJob && (idle || !g.want.Load()) || !h.asleep.CompareAndSwap(true, false) {
				break
			}
		}
	}
}

// spin takes the jobs that open (last: the newest it has seen) until the
// tick's jobs are done or none came for Spin; it returns the newest
// job generation it saw, and idle if it stopped for lack of work. Between
// checks of the clock it polls the job generation in a tight loop and
// yields the processor (other goroutines may need it), a few times per
// 0.1 ms.
func (g *Gang) spin(i int, last uint32) (uint32, bool) {
	since := time.Now()
	for {
		for range gangPolls {
			if gen := g.gen.Load(); gen != last {
				last = gen
				if gen&1 == 1 && g.join(gen) {
					g.job(i)
					g.joined.Add(-1)
				}
				since = time.Now()
			}
		}
		if !g.want.Load() {
			return last, false
		}
		if time.Since(since) > cmp.Or(g.idle, Spin) {
			return last, true
		}
		runtime.Gosched()
	}
}

// gangPolls is how many times a spinning helper polls for a job between
// yields (about 20 µs).
const gangPolls = 4096

// join enters open job gen; false if it closed meanwhile.
func (g *Gang) join(gen uint32) bool {
	g.joined.Add(1)
	if g.gen.Load() != gen {
		g.joined.Add(-1)
		return false
	}
	return true
}
