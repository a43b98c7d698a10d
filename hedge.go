package retry

import (
	"errors"
	"fmt"
	"math"
	"time"
)

// Hedge says when a [Transport] sends copies of an attempt that is slow to
// answer, hedged requests as "The Tail at Scale" describes them: the first
// answer that is not to be retried (a success, or a failure another
// attempt would not fix) is returned, and the copies still in flight are
// cancelled, their responses drained and closed. When every copy fails in
// a way worth retrying, the call retries as it would have without them.
//
// Only a request that is safe to replay is hedged, by the rule of
// retries: an idempotent method or an Idempotency-Key header. An unsafe
// request is never sent twice at once.
//
// A copy is an attempt like the others, which keeps hedging from
// multiplying the load on a server that is struggling: it has a number
// of its own ([Attempt], AttemptHeader), counts towards MaxAttempts,
// waits for the Pacer's turn, asks the Breaker, and costs the Budget what
// a retry after a [Transient] outcome costs (given back when the copy's
// answer is the one returned). When any of them refuses, or a copy is
// throttled (the server says it is overloaded), no further copy is sent
// for that attempt, and the ones in flight carry on. A request
// body the Transport buffers itself (one without GetBody) is hedged only
// once the first attempt has read all of it.
//
// The zero value is no hedging.
type Hedge struct {
	// Delay is how long an attempt goes unanswered before a copy is
	// sent, and before each further copy. Zero means no hedging.
	Delay time.Duration

	// Percentile, if not zero, takes the delay from the latencies of the
	// key's latest attempts ([RequestKey]: the host's by default) (up to 64, answered or failed; a copy
	// cancelled counts the time it ran): their Percentile-th percentile,
	// 0 < Percentile < 100, once 16 are known, and never shorter than
	// Delay, which is the delay until then. 95 hedges about one attempt
	// in twenty, where the host's 95th percentile is above Delay.
	Percentile float64

	// MaxHedges is the most copies sent of one attempt. Zero means 1.
	MaxHedges int
}

// DefaultMaxHedges is the number of copies of a [Hedge] whose MaxHedges
// is zero.
const DefaultMaxHedges = 1

// NoHedge, given to [ContextWithOptions] through [WithHedge], turns
// hedging off for one request. (Anywhere else it is the zero Hedge: no
// hedging.)
var NoHedge = Hedge{}

func (h Hedge) on() bool { return h.Delay > 0 }

func (h Hedge) maxHedges() int {
	if h.MaxHedges == 0 {
		return DefaultMaxHedges
	}
	return h.MaxHedges
}

// check reports a Hedge that makes no sense.
func (h Hedge) check() error {
	switch {
	case h.Delay < 0:
		return fmt.Errorf("retry: Hedge.Delay %v is negative", h.Delay)
	case h.MaxHedges < 0:
		return fmt.Errorf("retry: Hedge.MaxHedges %d is negative", h.MaxHedges)
	case math.IsNaN(h.Percentile) || h.Percentile < 0 || h.Percentile >= 100:
		return fmt.Errorf("retry: Hedge.Percentile %v is not in (0, 100)", h.Percentile)
	case h.Delay == 0 && (h.Percentile != 0 || h.MaxHedges != 0):
		// A percentile needs a delay for the time before it is known,
		// and a floor: without one a cold host would be hedged at once.
		return errors.New("retry: Hedge without a Delay: set Delay to hedge, or leave the Hedge zero")
	}
	return nil
}

// hedgeDelay returns how long the current attempt of r goes unanswered
// before a copy is sent.
func (r *roundTrip) hedgeDelay() time.Duration {
	h := r.s.hedge
	if h.Percentile == 0 {
		return h.Delay
	}
	if d, ok := r.s.latencies.percentile(RequestKey(r.req), h.Percentile); ok {
		return max(d, h.Delay)
	}
	return h.Delay
}

// recordLatency adds the latency of an answer to its host's window, when
// the call's hedge reads it.
func (r *roundTrip) recordLatency(took time.Duration) {
	if r.s.hedge.Percentile != 0 {
		r.s.latencies.record(RequestKey(r.req), took)
	}
}

// hedges returns how many copies the attempt about to be sent may have: 0
// unless the call hedges and attempts are left for copies.
func (r *roundTrip) hedges() int {
	if !r.s.hedge.on() || !r.safe {
		return 0
	}
	return max(min(r.s.hedge.maxHedges(), r.s.maxAttempts-r.sent-1), 0)
}
