package retry

import (
	"fmt"
	"sync/atomic"
)

// Budget limits retries across requests: when retries fail everywhere it
// refuses them, so that clients stop multiplying the load on a struggling
// server. [TokenBucket] is the one this package provides. Implementations
// must be safe for concurrent use, must not block, and should make Success
// cheap: it is called on every successful request. If a Budget also has a
// Validate() error method, the Transport calls it once, at first use, and
// refuses every request with its error.
//
// The Transport asks AllowRetry last, after the retry's wait, its Pacer
// turn, its Breaker and its BeforeAttempt hook, just before the retry is
// sent: a retry that one of those refuses costs nothing. If a Budget also
// has an Affords(c Class) bool method, reporting without taking anything
// whether it holds the cost of a retry after an outcome of class c, the
// Transport asks it too when it decides to retry, and stops at once,
// rather than wait out the backoff only to be refused.
type Budget interface {
	// AllowRetry reports whether a retry after an outcome of class c may
	// be made, and takes its cost when it may. c is the class the retry
	// is charged as: the outcome's, but Transient for a [Throttled]
	// outcome that refused no rate (a 503 that names no wait, see
	// [RateLimited]), which says the server is overloaded.
	AllowRetry(c Class) bool
	// Success records an attempt answered by a server able to answer:
	// a success, or a response returned as [Permanent] (a 404 after a
	// 503 shows the server up, as gRPC's retry throttling counts any
	// answer it would not retry a success). retried is the class of the
	// outcome that attempt was a retry of, or Undecided when it was the
	// first attempt, so a budget can give a retry that reached the
	// server its cost back.
	Success(retried Class)
}

// Defaults of a [TokenBucket] whose fields are zero. They are the AWS SDKs'
// retry quota with the costs of their 2026 rules (500 tokens; a retry costs
// 14, 5 after a throttle; a success returns 1 and a retry that succeeds
// gets its cost back). The open-loop overload benchmark (bench/metastable)
// chose the transient price over the older 10, and a bucket over a share
// of traffic.
const (
	defaultBudgetCapacity = 500
	defaultThrottledCost  = 5
	defaultUnsentCost     = 5
	defaultTransientCost  = 14
	defaultBudgetRefill   = 1
)

// NoBudget is a [Budget] that allows every retry: a [Transport] whose
// Budget is NoBudget ([WithBudget](NoBudget)) retries without a budget. A
// nil Budget is not this: it means the default budget.
var NoBudget Budget = noBudget{}

type noBudget struct{}

func (noBudget) AllowRetry(Class) bool { return true }
func (noBudget) Success(Class)         {}

// TokenBucket is a retry budget: a bucket of tokens that retries spend and
// successes refill, in the spirit of the AWS SDK's retry quota and gRPC's
// retry throttling. It starts full. A retry is allowed while the bucket
// holds at least its cost, which is then taken. A success, or an answer
// not worth retrying (see [Budget]), puts Refill tokens back and, when it
// was a retry, that retry's cost too: only the retries that fail are paid
// for. The bucket never holds more than
// Capacity. When retries fail everywhere it empties, and failures are
// returned at once instead of retried, so that clients stop multiplying
// the load on a server that is already down; as successes return, so do
// retries.
//
// The defaults never bite a healthy client. A request that succeeds on its
// first or second attempt costs nothing (it adds a token), so the bucket
// only drains when retries themselves fail: by 5 tokens for each retry of
// a rate limit's refusal (a 429) or of an unsent attempt that fails, 14
// for a transient one or one after a 503 that names no wait, against 1
// for each success. A full bucket pays for 100 failed throttled retries
// (35 transient ones) with no success between them, and it stays full as
// long as at most one retry fails for every 5 successes (every 14,
// transient).
// What it stops is a client whose retries keep failing: a server that is
// down, or one refusing far more than it serves. A client that means to
// run against a rate limit for long, retrying throttled requests until
// they pass (a batch job, say), wants a larger Capacity, or no budget.
//
// The zero value is usable and holds the defaults; every zero field means
// the default stated on it. Fields must not be changed after first use. A
// TokenBucket may be shared by several Transports (pass it to each with
// [WithBudget]) and is safe for concurrent use by multiple goroutines: it is
// one atomic counter, never locks, and never blocks. A success on a full
// bucket, the healthy case, is a single atomic load.
type TokenBucket struct {
	// Capacity is the number of tokens in a full bucket. Zero means 500.
	Capacity int

	// ThrottledCost is the price of a retry after a [Throttled] outcome
	// that refused the request for its rate (a 429; see [RateLimited]).
	// Zero means 5.
	ThrottledCost int

	// UnsentCost is the price of a retry after an [Unsent] outcome: the
	// server did no work, as for a throttled one. Zero means 5.
	UnsentCost int

	// TransientCost is the price of a retry after a [Transient] outcome
	// (or any class the Transport retries that is not one of the others),
	// and after a 503 that names no wait. The server may have done the
	// work, or is overloaded, so a retry may add to its load: it costs
	// almost three times as much by default, as in the AWS SDKs' 2026
	// rules. Zero means 14.
	TransientCost int

	// Refill is the number of tokens a success puts back. Zero means 1.
	Refill int

	// spent is the number of tokens missing from a full bucket, so that
	// the zero value is a full bucket.
	spent atomic.Int64
}

// AllowRetry reports whether the bucket holds the cost of a retry after an
// outcome of class c, and takes it if so.
func (b *TokenBucket) AllowRetry(c Class) bool {
	cost, capacity := b.cost(c), b.capacity()
	for {
		s := b.spent.Load()
		if s+cost > capacity {
			return false
		}
		if b.spent.CompareAndSwap(s, s+cost) {
			return true
		}
	}
}

// Affords reports whether the bucket holds the cost of a retry after an
// outcome of class c, without taking it.
func (b *TokenBucket) Affords(c Class) bool {
	return b.spent.Load()+b.cost(c) <= b.capacity()
}

// Success puts Refill tokens back in the bucket, and the cost of a retry
// after an outcome of class retried unless retried is Undecided, up to the
// bucket's capacity.
func (b *TokenBucket) Success(retried Class) {
	s := b.spent.Load()
	if s == 0 {
		return // full: the healthy case writes nothing
	}
	refill := b.refill()
	if retried != Undecided {
		refill += b.cost(retried)
	}
	for !b.spent.CompareAndSwap(s, max(s-refill, 0)) {
		if s = b.spent.Load(); s == 0 {
			return
		}
	}
}

// Tokens returns the number of tokens in the bucket now.
func (b *TokenBucket) Tokens() int {
	return int(b.capacity() - b.spent.Load())
}

// Validate reports an error if a field is negative. A [Transport] whose
// Budget is invalid returns the error from RoundTrip without sending
// anything.
func (b *TokenBucket) Validate() error {
	for _, f := range [...]struct {
		name string
		v    int
	}{
		{"Capacity", b.Capacity},
		{"ThrottledCost", b.ThrottledCost},
		{"UnsentCost", b.UnsentCost},
		{"TransientCost", b.TransientCost},
		{"Refill", b.Refill},
	} {
		if f.v < 0 {
			return fmt.Errorf("retry: TokenBucket.%s %d is negative", f.name, f.v)
		}
	}
	return nil
}

// orDefault returns v, or def when v is not positive.
func orDefault(v, def int) int64 {
	if v <= 0 {
		return int64(def)
	}
	return int64(v)
}

func (b *TokenBucket) capacity() int64 { return orDefault(b.Capacity, defaultBudgetCapacity) }
func (b *TokenBucket) refill() int64   { return orDefault(b.Refill, defaultBudgetRefill) }

func (b *TokenBucket) cost(c Class) int64 {
	switch c {
	case Throttled:
		return orDefault(b.ThrottledCost, defaultThrottledCost)
	case Unsent:
		return orDefault(b.UnsentCost, defaultUnsentCost)
	}
	return orDefault(b.TransientCost, defaultTransientCost)
}
