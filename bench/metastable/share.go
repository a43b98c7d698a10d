package main

import (
	"net/http"
	"sync"
	"time"

	"github.com/backoff-jitter/retry"
)

// shareBudget is the shape the default budget was measured against: a
// share of traffic, as Finagle's RetryBudget is. Retries over the last window may
// number ratio of the first attempts sent over it, plus perSecond a
// second of the window, so that a client sending little can still retry.
// It counts in one-second buckets. Safe for concurrent use.
//
// retry.Budget never sees first attempts; this one counts them through a
// BeforeAttempt hook, which sees every attempt as it goes.
type shareBudget struct {
	ratio     float64
	perSecond float64
	now       func() time.Time

	mu       sync.Mutex
	newest   int64 // the Unix second of the newest bucket
	requests [shareWindow]int
	retries  [shareWindow]int
}

// shareWindow is the window's length in one-second buckets: Finagle's
// 10 s.
const shareWindow = 10

// newShareBudget returns Finagle's defaults: 20 % of the requests of the
// last 10 s, plus 10 retries a second.
func newShareBudget() *shareBudget {
	return &shareBudget{ratio: 0.2, perSecond: 10, now: time.Now}
}

// roll moves the newest bucket to the second of now, emptying the
// buckets it passes. b.mu must be held.
func (b *shareBudget) roll() int {
	sec := b.now().Unix()
	if d := sec - b.newest; d > 0 {
		for i := int64(1); i <= min(d, shareWindow); i++ {
			k := int((b.newest + i) % shareWindow)
			b.requests[k], b.retries[k] = 0, 0
		}
		b.newest = sec
	}
	return int(b.newest % shareWindow)
}

// request counts a first attempt.
func (b *shareBudget) request() {
	b.mu.Lock()
	b.requests[b.roll()]++
	b.mu.Unlock()
}

// AllowRetry allows a retry while the window's retries stay within their
// share, whatever the outcome's class.
func (b *shareBudget) AllowRetry(retry.Class) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	k := b.roll()
	var requests, retries int
	for i := range shareWindow {
		requests += b.requests[i]
		retries += b.retries[i]
	}
	if float64(retries+1) > b.ratio*float64(requests)+b.perSecond*shareWindow {
		return false
	}
	b.retries[k]++
	return true
}

// Success is nothing to a share of traffic: answers do not refill it.
func (b *shareBudget) Success(retry.Class) {}

// withShareBudget is a Transport with the share budget,
// and the hook that shows it the first attempts.
func withShareBudget(base http.RoundTripper) http.RoundTripper {
	b := newShareBudget()
	return retry.New(base, retry.WithBudget(b), retry.WithBeforeAttempt(func(p retry.Prepare) error {
		if p.Attempt == 1 {
			b.request()
		}
		return nil
	}))
}
