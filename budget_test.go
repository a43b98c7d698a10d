package retry

import (
	"net/http"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// op is one step of a token arithmetic script: a retry after an outcome
// of class c, or, when success is set, a success that retried c.
type op struct {
	success bool
	c       Class
	allowed bool // AllowRetry's answer; ignored for a success
	tokens  int  // Tokens() afterwards
}

func retryOp(c Class, allowed bool, tokens int) op { return op{c: c, allowed: allowed, tokens: tokens} }
func successOp(retried Class, tokens int) op       { return op{success: true, c: retried, tokens: tokens} }

func TestTokenBucketArithmetic(t *testing.T) {
	tests := []struct {
		name   string
		bucket *TokenBucket
		ops    []op
	}{
		{
			name:   "defaults",
			bucket: &TokenBucket{},
			ops: []op{
				successOp(Undecided, 500), // full: nothing to refill
				retryOp(Throttled, true, 495),
				retryOp(Unsent, true, 490),
				retryOp(Transient, true, 476),
				retryOp(Class(42), true, 462), // an unknown class pays the transient price
				successOp(Undecided, 463),
				successOp(Transient, 478), // 1 and the transient retry's 14 back
				successOp(Throttled, 484),
				successOp(Unsent, 490),
				successOp(Throttled, 496),
				successOp(Throttled, 500), // capped
			},
		},
		{
			name:   "drained by throttled retries",
			bucket: &TokenBucket{Capacity: 12, ThrottledCost: 5, Refill: 2},
			ops: []op{
				retryOp(Throttled, true, 7),
				retryOp(Throttled, true, 2),
				retryOp(Throttled, false, 2), // refused: nothing is taken
				successOp(Undecided, 4),
				retryOp(Throttled, false, 4),
				successOp(Undecided, 6),
				retryOp(Throttled, true, 1),
				successOp(Throttled, 8), // the retry worked: 2 and its 5 back
			},
		},
		{
			name:   "exact cost is allowed",
			bucket: &TokenBucket{Capacity: 10, TransientCost: 10},
			ops: []op{
				retryOp(Transient, true, 0),
				retryOp(Transient, false, 0),
				retryOp(Unsent, false, 0),
			},
		},
		{
			name:   "refill stops at capacity",
			bucket: &TokenBucket{Capacity: 10, UnsentCost: 3, Refill: 4},
			ops: []op{
				retryOp(Unsent, true, 7),
				successOp(Undecided, 10),
				successOp(Undecided, 10),
				retryOp(Unsent, true, 7),
				successOp(Unsent, 10),
			},
		},
		{
			name:   "cost above capacity is never allowed",
			bucket: &TokenBucket{Capacity: 4, TransientCost: 5, ThrottledCost: 4},
			ops: []op{
				retryOp(Transient, false, 4),
				retryOp(Throttled, true, 0),
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := tt.bucket
			for i, o := range tt.ops {
				if o.success {
					b.Success(o.c)
				} else if got := b.AllowRetry(o.c); got != o.allowed {
					t.Errorf("step %d: AllowRetry(%v) = %v; want %v", i, o.c, got, o.allowed)
				}
				if got := b.Tokens(); got != o.tokens {
					t.Errorf("step %d (%+v): Tokens() = %d; want %d", i, o, got, o.tokens)
				}
			}
		})
	}
}

func TestTokenBucketValidate(t *testing.T) {
	require.NoError(t, (&TokenBucket{}).Validate())
	for _, b := range []*TokenBucket{
		{Capacity: -1}, {ThrottledCost: -1}, {UnsentCost: -1}, {TransientCost: -1}, {Refill: -1},
	} {
		assert.Error(t, b.Validate(), "%+v", b)
	}
	rt := New(staticTransport{}, WithBudget(&TokenBucket{Refill: -2}))
	_, err := rt.RoundTrip(mustRequest(t, "GET", "http://127.0.0.1/", nil))
	assert.EqualError(t, err, "retry: invalid Budget: TokenBucket.Refill -2 is negative")
}

// TestTokenBucketConcurrentSpend checks that racing retries take exactly
// the tokens there are: no more retries are allowed than the bucket pays for.
func TestTokenBucketConcurrentSpend(t *testing.T) {
	b := &TokenBucket{Capacity: 1000, ThrottledCost: 3}
	var allowed atomic.Int64
	var wg sync.WaitGroup
	for range 50 {
		wg.Go(func() {
			for range 100 {
				if b.AllowRetry(Throttled) {
					allowed.Add(1)
				}
			}
		})
	}
	wg.Wait()
	assert.Equal(t, int64(333), allowed.Load())
	assert.Equal(t, 1, b.Tokens())
}

// TestTokenBucketConcurrentRefill checks that racing successes lose no
// refill: below capacity every success puts back exactly Refill tokens.
func TestTokenBucketConcurrentRefill(t *testing.T) {
	b := &TokenBucket{Capacity: 10000, TransientCost: 10000, Refill: 2}
	require.True(t, b.AllowRetry(Transient))
	var wg sync.WaitGroup
	for range 40 {
		wg.Go(func() {
			for range 100 {
				b.Success(Undecided)
			}
		})
	}
	wg.Wait()
	assert.Equal(t, 8000, b.Tokens())
}

// TestTokenBucketConcurrentMixed races retries and successes and checks
// the balance: every token is either in the bucket or was paid for a
// retry, less the refills that fitted.
func TestTokenBucketConcurrentMixed(t *testing.T) {
	b := &TokenBucket{Capacity: 100, ThrottledCost: 5, TransientCost: 7, Refill: 3}
	var allowed, successes atomic.Int64
	var wg sync.WaitGroup
	for g := range 32 {
		wg.Go(func() {
			for i := range 500 {
				switch (g + i) % 3 {
				case 0:
					b.Success(Undecided)
					successes.Add(1)
				case 1:
					if b.AllowRetry(Throttled) {
						allowed.Add(5)
					}
				default:
					if b.AllowRetry(Transient) {
						allowed.Add(7)
					}
				}
				if n := b.Tokens(); n < 0 || n > 100 {
					t.Errorf("Tokens() = %d; want within [0, 100]", n)
					return
				}
			}
		})
	}
	wg.Wait()
	// Refills are capped, so the bucket holds at most what was never
	// spent plus every refill, and retries spent at most that much.
	spent, refilled := allowed.Load(), 3*successes.Load()
	assert.LessOrEqual(t, int64(b.Tokens()), 100-spent+refilled)
	assert.LessOrEqual(t, spent, 100+refilled)
}

func TestTokenBucketSuccessAllocations(t *testing.T) {
	b := &TokenBucket{}
	var budget Budget = b
	if n := testing.AllocsPerRun(100, func() { budget.Success(Undecided) }); n != 0 {
		t.Errorf("Success on a full bucket allocates %v times; want 0", n)
	}
	budget.AllowRetry(Throttled)
	if n := testing.AllocsPerRun(100, func() { budget.Success(Throttled) }); n != 0 {
		t.Errorf("Success on a bucket being refilled allocates %v times; want 0", n)
	}
}

// failing is a base transport that answers 503 while down is set and 200
// otherwise, and counts the attempts it sees.
type failing struct {
	down     atomic.Bool
	attempts atomic.Int32
}

func (f *failing) RoundTrip(r *http.Request) (*http.Response, error) {
	f.attempts.Add(1)
	code := http.StatusOK
	if f.down.Load() {
		code = http.StatusServiceUnavailable
	}
	return &http.Response{StatusCode: code, Body: http.NoBody, Request: r}, nil
}

// recorded is a Transport under test that remembers why it last gave up.
type recorded struct {
	*Transport
	reason StopReason
}

func newRecorded(base http.RoundTripper, opts ...Option) *recorded {
	r := new(recorded)
	r.Transport, _ = testTransport(base, append(opts, WithOnGiveUp(func(e Event) { r.reason = e.Reason }))...)
	return r
}

// attemptsOf sends one GET through rt and returns how many attempts base
// saw and why rt gave up (StopNone for a success).
func attemptsOf(t *testing.T, rt *recorded, base *failing) (int, StopReason) {
	t.Helper()
	rt.reason = StopNone
	before := base.attempts.Load()
	resp, err := rt.RoundTrip(mustRequest(t, "GET", "http://127.0.0.1/", nil))
	require.NoError(t, err)
	resp.Body.Close()
	return int(base.attempts.Load() - before), rt.reason
}

// TestDefaultBudget checks the budget every Transport has unless told
// otherwise: 500 tokens, 14 a transient retry, of its own.
func TestDefaultBudget(t *testing.T) {
	base := &failing{}
	base.down.Store(true)
	// MaxAttempts 4: 3 retries of a bare 503, charged as transient ones:
	// 42 tokens a request.
	rt := newRecorded(base)
	for i := range 11 {
		n, reason := attemptsOf(t, rt, base)
		require.Equal(t, 4, n, "request %d", i)
		require.Equal(t, StopAttempts, reason, "request %d", i)
	}
	// 38 tokens are left: two more retries, then the budget says no.
	n, reason := attemptsOf(t, rt, base)
	assert.Equal(t, 3, n)
	assert.Equal(t, StopBudget, reason)
	n, reason = attemptsOf(t, rt, base)
	assert.Equal(t, 1, n)
	assert.Equal(t, StopBudget, reason)

	// Another Transport has a bucket of its own.
	other := newRecorded(base)
	n, reason = attemptsOf(t, other, base)
	assert.Equal(t, 4, n)
	assert.Equal(t, StopAttempts, reason)
}

func TestNoBudget(t *testing.T) {
	base := &failing{}
	base.down.Store(true)
	rt := newRecorded(base, WithBudget(NoBudget))
	require.Equal(t, NoBudget, rt.Budget)
	for i := range 200 {
		n, reason := attemptsOf(t, rt, base)
		require.Equal(t, 4, n, "request %d", i)
		require.Equal(t, StopAttempts, reason, "request %d", i)
	}
}

// WithBudget(nil) sets the field to nil, which means the default budget,
// as a Transport whose field was never set has: nil means one thing.
func TestNilBudgetIsTheDefault(t *testing.T) {
	for _, opts := range [][]Option{nil, {WithBudget(nil)}} {
		base := &failing{}
		base.down.Store(true)
		rt := newRecorded(base, opts...)
		stopped := false
		for range 200 {
			if _, reason := attemptsOf(t, rt, base); reason == StopBudget {
				stopped = true
				break
			}
		}
		assert.True(t, stopped, "a default budget stops the retries of a service that is down")
	}
}

func TestSharedBudget(t *testing.T) {
	base := &failing{}
	base.down.Store(true)
	shared := &TokenBucket{Capacity: 14}
	a := newRecorded(base, WithBudget(shared))
	b := newRecorded(base, WithBudget(shared))
	n, _ := attemptsOf(t, a, base) // one retry of a bare 503: 14 tokens
	assert.Equal(t, 2, n)
	n, reason := attemptsOf(t, b, base)
	assert.Equal(t, 1, n)
	assert.Equal(t, StopBudget, reason)
	base.down.Store(false)
	for range 5 {
		attemptsOf(t, b, base)
	}
	assert.Equal(t, 5, shared.Tokens(), "successes through b refill the budget of a")
}

// firstFails is a base transport that throttles the first attempt of
// every request and lets the second through.
type firstFails struct{}

func (firstFails) RoundTrip(r *http.Request) (*http.Response, error) {
	code := http.StatusOK
	if Attempt(r.Context()) == 1 {
		code = http.StatusTooManyRequests
	}
	return &http.Response{StatusCode: code, Body: http.NoBody, Request: r}, nil
}

// TestRetryThatWorksIsRefunded checks that only failed retries drain the
// budget: a request that succeeds on its second attempt gets the retry's
// cost back and adds a token, like any success.
func TestRetryThatWorksIsRefunded(t *testing.T) {
	budget := &TokenBucket{Capacity: 10, Refill: 1}
	rt, _ := testTransport(firstFails{}, WithBudget(budget))
	require.True(t, budget.AllowRetry(Unsent)) // 5 left
	for i, want := range []int{6, 7, 8} {
		resp, err := rt.RoundTrip(mustRequest(t, "GET", "http://127.0.0.1/", nil))
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, 200, resp.StatusCode)
		assert.Equal(t, want, budget.Tokens(), "after request %d", i)
	}
}

// TestBudgetStopsAndResumes shows a Transport against a real server: once
// failures have spent its budget it stops retrying, and successes that
// refill the budget let it retry again.
func TestBudgetStopsAndResumes(t *testing.T) {
	var down atomic.Bool
	s := newScript(t, func(w http.ResponseWriter, r *http.Request) {
		if down.Load() {
			status(http.StatusServiceUnavailable)(w, r)
			return
		}
		status(http.StatusOK)(w, r)
	})
	// A bare 503's retry is charged as a transient one.
	budget := &TokenBucket{Capacity: 10, TransientCost: 5, Refill: 1}
	var reasons []StopReason
	rt, _ := testTransport(nil, WithBudget(budget), WithMaxAttempts(10),
		WithOnGiveUp(func(e Event) { reasons = append(reasons, e.Reason) }))
	defer rt.CloseIdleConnections()
	get := func() int {
		t.Helper()
		before := len(s.requests())
		_, _, err := do(t, rt, mustRequest(t, "GET", s.srv.URL, nil))
		require.NoError(t, err)
		return len(s.requests()) - before
	}

	down.Store(true)
	assert.Equal(t, 3, get(), "two retries spend the 10 tokens")
	assert.Equal(t, 1, get(), "an empty budget allows no retry")
	assert.Equal(t, []StopReason{StopBudget, StopBudget}, reasons)

	down.Store(false)
	for range 5 {
		assert.Equal(t, 1, get())
	}
	assert.Equal(t, 5, budget.Tokens())

	down.Store(true)
	assert.Equal(t, 2, get(), "five successes paid for one retry")
	assert.Equal(t, 0, budget.Tokens())
	assert.Equal(t, int32(1), s.newConn.Load(), "every attempt reused one connection")
}

// BenchmarkTokenBucketSuccess measures a success on a full bucket shared by
// every goroutine: the healthy case, which must not contend.
func BenchmarkTokenBucketSuccess(b *testing.B) {
	budget := &TokenBucket{}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			budget.Success(Undecided)
		}
	})
}

// BenchmarkTokenBucketRetry measures retries and successes racing on one
// bucket: the contended case.
func BenchmarkTokenBucketRetry(b *testing.B) {
	budget := &TokenBucket{}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if !budget.AllowRetry(Throttled) {
				budget.Success(Throttled)
			}
		}
	})
}
