package gang

// MaxShares bounds the shares Shares cuts its items into (and so the
// goroutines it uses).
const MaxShares = 64

// shareJob is the state of an open Shares job, kept in the Gang so that
// handing out items allocates nothing.
type shareJob struct {
	n, items int // shares, items
	fn       func(wi, i int)
	done     func(wi int)
	taken    [MaxShares]Claims
	run      func(wi int) // runShares, made once
}

// Shares runs fn(wi, i) for every item i in [0, items), spread over the
// caller's goroutine (wi 0) and the helpers: goroutine wi takes the items
// of the wi-th contiguous share one by one, then helps with the others'
// shares (a helper that comes late finds its share taken); then each
// goroutine that took part runs done(wi) (if set). fn and done must only
// touch state of their item and goroutine, and what is read-only for the
// duration.
//
// Owners of even shares take their items first to last, of odd shares
// last to first, and helpers take a share's items from the other end: with
// the items ordered by locality (clients by where they look), two
// goroutines both end up near the middle, whose items need much the same
// data, so less of it is worked twice (measured on the server's peers:
// 254 clients × 2000 entities on two workers encoded 1.22× the records one
// worker does, against 1.31× with both taking from the front).
func (g *Gang) Shares(items int, fn func(wi, i int), done func(wi int)) {
	n := min(len(g.helpers)+1, items, MaxShares)
	if n <= 1 {
		for i := range items {
			fn(0, i)
		}
		if done != nil {
			done(0)
		}
		return
	}
	j := &g.shares
	j.n, j.items, j.fn, j.done = n, items, fn, done
	for i := range j.taken {
		j.taken[i].Reset()
	}
	if j.run == nil {
		j.run = g.runShares // (once: a method value is a closure)
	}
	g.Run(j.run)
	j.fn, j.done = nil, nil
}

// runShares is Shares' job on goroutine wi.
func (g *Gang) runShares(wi int) {
	j := &g.shares
	n, items := j.n, j.items
	for k := range n {
		si := (wi + k) % n
		lo, hi := si*items/n, (si+1)*items/n
		fromBack := si%2 == 1 // the owner's end...
		if k > 0 {
			fromBack = !fromBack // ...and a helper's
		}
		for {
			i, ok := j.taken[si].Claim(lo, hi, fromBack)
			if !ok {
				break
			}
			j.fn(wi, i)
		}
	}
	if j.done != nil {
		j.done(wi)
	}
}
