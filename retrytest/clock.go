package retrytest

import (
	"context"
	"slices"
	"sync"
	"time"
)

// Clock is a fake clock for a [github.com/backoff-jitter/retry.Transport]
// (give it with retry.WithClock), and for a pace.Pacer or breaker.Breaker
// beside it (their Clock fields): sleeping advances it at once and records
// the wait, so a test never really sleeps and can assert exact waits. Its
// timers (AfterFunc: the Transport's attempt timeouts and drain bounds)
// run when Sleep or Advance moves it past their time, so a test ends a
// hung attempt by advancing the clock. It is safe for concurrent use.
type Clock struct {
	mu     sync.Mutex
	t      time.Time
	slept  []time.Duration
	timers []*clockTimer // pending, in no order
	// added is closed, and replaced, when a timer is added.
	added chan struct{}
}

// clockTimer is a call of f due at at; done once it ran or was stopped.
type clockTimer struct {
	at   time.Time
	f    func()
	done bool
}

// NewClock returns a clock that reads start. Start it at time.Now() when
// the requests under test carry context deadlines, which net/http and the
// Transport hold against the real clock.
func NewClock(start time.Time) *Clock { return &Clock{t: start} }

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// Sleep advances the clock by d at once and records d, unless ctx is
// done already. Timers due by then run before it returns.
func (c *Clock) Sleep(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	c.mu.Lock()
	c.slept = append(c.slept, d)
	c.move(d)
	return nil
}

// Advance moves the clock by d without recording a wait: time that passed
// doing something else. Timers due by then run, in the order of their
// times, before it returns.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.move(d)
}

// move moves the clock by d, unlocks it, and runs the timers due: outside
// the lock, since a timer's function may read the clock.
func (c *Clock) move(d time.Duration) {
	c.t = c.t.Add(max(d, 0))
	var due []*clockTimer
	c.timers = slices.DeleteFunc(c.timers, func(t *clockTimer) bool {
		if t.at.After(c.t) {
			return false
		}
		t.done = true
		due = append(due, t)
		return true
	})
	c.mu.Unlock()
	slices.SortStableFunc(due, func(a, b *clockTimer) int { return a.at.Compare(b.at) })
	for _, t := range due {
		t.f()
	}
}

// AfterFunc calls f once the clock has moved d past now, from the
// goroutine that moves it (d ≤ 0: from a goroutine of its own, at once).
// stop cancels the call and reports whether it did. With it the Clock is a
// retry.TimerClock.
func (c *Clock) AfterFunc(d time.Duration, f func()) (stop func() bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &clockTimer{at: c.t.Add(d), f: f}
	if d <= 0 {
		t.done = true
		go f()
	} else {
		c.timers = append(c.timers, t)
		if c.added != nil {
			close(c.added)
			c.added = nil
		}
	}
	return func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		if t.done {
			return false
		}
		t.done = true
		c.timers = slices.DeleteFunc(c.timers, func(p *clockTimer) bool { return p == t })
		return true
	}
}

// AwaitTimers returns once at least n timers are pending, or with ctx's
// error: a test waits for an attempt to set its timeout before advancing
// the clock past it.
func (c *Clock) AwaitTimers(ctx context.Context, n int) error {
	for {
		c.mu.Lock()
		if len(c.timers) >= n {
			c.mu.Unlock()
			return nil
		}
		if c.added == nil {
			c.added = make(chan struct{})
		}
		added := c.added
		c.mu.Unlock()
		select {
		case <-added:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Waits returns the waits slept so far, in order.
func (c *Clock) Waits() []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]time.Duration(nil), c.slept...)
}
