package ecs

import (
	"sync"
	"time"
)

// Clock is the source of time for [Scheduler.Run]. Injecting it keeps
// tests deterministic: use [ManualClock] in tests and [RealClock] in
// production.
type Clock interface {
	// Now returns the current time.
	Now() time.Time
	// After returns a channel that receives the time once d has passed on
	// this clock.
	After(d time.Duration) <-chan time.Time
}

// RealClock is the wall clock. Its zero value is ready to use.
type RealClock struct{}

// Now returns time.Now().
func (RealClock) Now() time.Time { return time.Now() }

// After returns time.After(d). It allocates a timer.
func (RealClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

// ManualClock is a [Clock] that only moves when told to. It is safe for
// concurrent use, so a test can drive [Scheduler.Run] from another goroutine.
//
// Create it with [NewManualClock].
type ManualClock struct {
	mu      sync.Mutex
	cond    *sync.Cond
	now     time.Time
	waiters []manualWaiter
}

type manualWaiter struct {
	at time.Time
	ch chan time.Time
}

// NewManualClock returns a clock standing at start.
func NewManualClock(start time.Time) *ManualClock {
	c := &ManualClock{now: start}
	c.cond = sync.NewCond(&c.mu)
	return c
}

// Now returns the clock's current time.
func (c *ManualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// After returns a channel that receives the clock's time once [ManualClock.Advance]
// has moved it at least d forward. A d ≤ 0 fires at once.
func (c *ManualClock) After(d time.Duration) <-chan time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	ch := make(chan time.Time, 1)
	if d <= 0 {
		ch <- c.now
		return ch
	}
	c.waiters = append(c.waiters, manualWaiter{at: c.now.Add(d), ch: ch})
	c.cond.Broadcast()
	return ch
}

// Advance moves the clock forward by d and fires every [ManualClock.After]
// channel that has come due. A negative d panics.
func (c *ManualClock) Advance(d time.Duration) {
	if d < 0 {
		panic("ecs: ManualClock.Advance with a negative duration")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	kept := c.waiters[:0]
	for _, w := range c.waiters {
		if !w.at.After(c.now) {
			w.ch <- c.now
			continue
		}
		kept = append(kept, w)
	}
	clear(c.waiters[len(kept):])
	c.waiters = kept
}

// Waiters returns how many [ManualClock.After] channels are pending.
func (c *ManualClock) Waiters() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.waiters)
}

// BlockUntilWaiters blocks until at least n [ManualClock.After] channels are
// pending. Tests use it to know that a goroutine driven by this clock has
// finished its work and is waiting for time to pass.
func (c *ManualClock) BlockUntilWaiters(n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for len(c.waiters) < n {
		c.cond.Wait()
	}
}
