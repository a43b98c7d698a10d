package retrytest

import (
	"context"
	"sync"
	"time"
)

// Clock is a fake clock for a [github.com/backoff-jitter/retry.Transport]
// (give it with retry.WithClock): sleeping advances it at once and records
// the wait, so a test never really sleeps and can assert exact waits. It
// is safe for concurrent use.
type Clock struct {
	mu    sync.Mutex
	t     time.Time
	slept []time.Duration
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
// done already.
func (c *Clock) Sleep(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.slept = append(c.slept, d)
	c.t = c.t.Add(d)
	return nil
}

// Advance moves the clock by d without recording a wait: time that passed
// doing something else.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// Waits returns the waits slept so far, in order.
func (c *Clock) Waits() []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]time.Duration(nil), c.slept...)
}
