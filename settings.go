package retry

import (
	"cmp"
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"time"

	"github.com/backoff-jitter/retry/internal/clock"
	"github.com/hashicorp/go-cleanhttp"
)

// settings is everything a call of RoundTrip reads: a Transport's fields,
// resolved once at first use with their defaults filled in, or those with
// a request's options applied over them (see withOptions). The retry loop
// reads nothing else, so a field changed after first use changes nothing,
// and a request's options cannot change another request's settings.
type settings struct {
	base           http.RoundTripper
	maxAttempts    int
	backoff        Backoff
	classifier     Classifier // nil: DefaultClassifier alone
	maxRetryAfter  time.Duration
	maxBuffered    int64
	attemptTimeout time.Duration
	stallTimeout   time.Duration
	resumes        int // 0: off
	onResume       func(ResumeEvent)
	rateLimitReset ResetFormat
	longWait       LongWait
	serverJitter   Jitter // nil: none
	waitFloor      func(Outcome) time.Duration
	attemptHeader  string
	budget         Budget                     // nil: no budget
	pacer          Pacer                      // nil: no pacing
	breaker        Breaker                    // nil: no circuit breaking
	key            func(*http.Request) string // nil: URL.Host
	onRetry        func(Event)
	onGiveUp       func(Event)
	onDone         func(Summary)
	beforeAttempt  func(Prepare) error
	hedge          Hedge
	onHedge        func(Event)
	latencies      *latencies // each host's recent answers, for hedge.Percentile; never nil

	// The seams, never nil: the real clock, sleep and random source, or a
	// test's.
	now   func() time.Time
	sleep func(ctx context.Context, d time.Duration) error
	rand  func() float64
	// timers runs the attempt timeouts and drain bounds; nil: the real
	// clock's.
	timers TimerClock
}

// timed reports whether the times of a call are measured: a hook wants
// them, or the hedge delay is taken from latencies.
func (s *settings) timed() bool {
	return s.onRetry != nil || s.onGiveUp != nil || s.onDone != nil || s.hedge.Percentile != 0
}

// settings returns t's settings, resolving them on the first call: the
// first use of t.
func (t *Transport) settings() (*settings, error) {
	t.once.Do(func() { t.resolved, t.resolveErr = t.resolve() })
	return &t.resolved, t.resolveErr
}

// resolve reads t's fields into settings, defaults filled in.
func (t *Transport) resolve() (settings, error) {
	s := settings{
		base:           t.Base,
		maxAttempts:    cmp.Or(t.MaxAttempts, DefaultMaxAttempts),
		backoff:        t.Backoff,
		classifier:     t.Classifier,
		maxRetryAfter:  cmp.Or(t.MaxRetryAfter, DefaultMaxRetryAfter),
		maxBuffered:    cmp.Or(t.MaxBufferedBody, DefaultMaxBufferedBody),
		attemptTimeout: t.AttemptTimeout,
		stallTimeout:   t.StallTimeout,
		resumes:        resumes(t.Resumes, DefaultResumes),
		onResume:       t.OnResume,
		rateLimitReset: t.RateLimitReset,
		longWait:       t.LongWait,
		serverJitter:   t.ServerWaitJitter,
		waitFloor:      t.WaitFloor,
		attemptHeader:  t.AttemptHeader,
		pacer:          t.Pacer,
		breaker:        t.Breaker,
		key:            t.Key,
		onRetry:        t.OnRetry,
		onGiveUp:       t.OnGiveUp,
		onDone:         t.OnDone,
		beforeAttempt:  t.BeforeAttempt,
		hedge:          t.Hedge,
		onHedge:        t.OnHedge,
		now:            t.now,
		sleep:          t.sleep,
		rand:           t.rand,
	}
	if s.base == nil {
		s.base = ownBase()
	}
	if s.backoff == nil {
		s.backoff = DefaultBackoff
	}
	switch t.Budget.(type) {
	case nil:
		s.budget = new(TokenBucket)
	case noBudget:
		// No budget: the loop skips it.
	default:
		s.budget = t.Budget
	}
	if t.Clock != nil {
		s.now, s.sleep = t.Clock.Now, t.Clock.Sleep
		s.timers, _ = t.Clock.(TimerClock)
	}

	if t.Random != nil {
		s.rand = t.Random
	}
	if s.now == nil {
		s.now = time.Now
	}
	if s.sleep == nil {
		s.sleep = clock.Sleep
	}
	if s.rand == nil {
		s.rand = rand.Float64
	}
	s.latencies = newLatencies(s.now)
	switch t.Pacer.(type) {
	case nil:
		s.pacer = newOwnPacer(&s)
	case noPacer:
		s.pacer = nil // no pacing: the loop skips it
	}
	return s, t.check()
}

// ownBase returns the base transport of a Transport whose Base is nil: a
// pooled cleanhttp transport that reports a proxy's refusal of a tunnel
// as a [ProxyConnectError].
func ownBase() *http.Transport {
	b := cleanhttp.DefaultPooledTransport()
	b.OnProxyConnectResponse = ProxyConnectResponse
	return b
}

// withOptions returns s with opts applied over it, for one request. The
// clock and the random source are the Transport's alone. The
// options are applied to an empty Transport, whose fields then say what
// changes: a non-zero field replaces s's (so a zero one, such as
// WithMaxAttempts(0) or WithBudget(nil), keeps the Transport's setting),
// and a hook runs after the Transport's own, never instead of it.
// NoBudget turns the budget off for the request.
func (s *settings) withOptions(opts []Option) (*settings, error) {
	var o Transport
	for _, opt := range opts {
		if opt != nil {
			opt(&o)
		}
	}
	if err := o.check(); err != nil {
		return nil, err
	}
	c := *s
	c.base = cmp.Or(o.Base, s.base)
	c.maxAttempts = cmp.Or(o.MaxAttempts, s.maxAttempts)
	c.backoff = cmp.Or(o.Backoff, s.backoff)
	if o.Classifier != nil {
		c.classifier = o.Classifier
	}
	c.maxRetryAfter = cmp.Or(o.MaxRetryAfter, s.maxRetryAfter)
	c.maxBuffered = cmp.Or(o.MaxBufferedBody, s.maxBuffered)
	c.attemptTimeout = cmp.Or(o.AttemptTimeout, s.attemptTimeout)
	c.stallTimeout = cmp.Or(o.StallTimeout, s.stallTimeout)
	if o.Resumes != 0 {
		c.resumes = resumes(o.Resumes, 0)
	}
	c.onResume = bothHooks(s.onResume, o.OnResume)
	c.rateLimitReset = cmp.Or(o.RateLimitReset, s.rateLimitReset)
	c.longWait = cmp.Or(o.LongWait, s.longWait)
	if o.ServerWaitJitter != nil {
		c.serverJitter = o.ServerWaitJitter
	}
	c.attemptHeader = cmp.Or(o.AttemptHeader, s.attemptHeader)
	switch o.Budget.(type) {
	case nil:
	case noBudget:
		c.budget = nil
	default:
		c.budget = o.Budget
	}
	switch o.Pacer.(type) {
	case nil:
	case noPacer:
		c.pacer = nil
	default:
		c.pacer = o.Pacer
	}
	c.breaker = cmp.Or(o.Breaker, s.breaker)
	if o.Key != nil {
		c.key = o.Key
	}
	c.onRetry = bothHooks(s.onRetry, o.OnRetry)
	c.onGiveUp = bothHooks(s.onGiveUp, o.OnGiveUp)
	c.onDone = bothHooks(s.onDone, o.OnDone)
	c.beforeAttempt = bothPrepares(s.beforeAttempt, o.BeforeAttempt)
	if o.hedgeSet {
		c.hedge = o.Hedge // NoHedge too: it turns hedging off
	}
	c.onHedge = bothHooks(s.onHedge, o.OnHedge)
	c.waitFloor = bothFloors(s.waitFloor, o.WaitFloor)
	return &c, nil
}

// bothHooks returns a hook that calls first and then second, either of
// which may be nil.
func bothHooks[T any](first, second func(T)) func(T) {
	switch {
	case second == nil:
		return first
	case first == nil:
		return second
	}
	return func(e T) { first(e); second(e) }
}

// bothFloors returns a WaitFloor that gives the longer of first's and
// second's floors; either may be nil.
func bothFloors(first, second func(Outcome) time.Duration) func(Outcome) time.Duration {
	switch {
	case second == nil:
		return first
	case first == nil:
		return second
	}
	return func(o Outcome) time.Duration { return max(first(o), second(o)) }
}

// check validates the fields as the user set them.
func (t *Transport) check() error {
	switch {
	case t.MaxAttempts < 0:
		return fmt.Errorf("retry: MaxAttempts %d is negative", t.MaxAttempts)
	case t.MaxRetryAfter < 0:
		return fmt.Errorf("retry: MaxRetryAfter %v is negative", t.MaxRetryAfter)
	case t.MaxBufferedBody < 0:
		return fmt.Errorf("retry: MaxBufferedBody %d is negative", t.MaxBufferedBody)
	case t.AttemptTimeout < 0:
		return fmt.Errorf("retry: AttemptTimeout %v is negative", t.AttemptTimeout)
	case t.StallTimeout < 0:
		return fmt.Errorf("retry: StallTimeout %v is negative", t.StallTimeout)
	case t.RateLimitReset > ResetUnixMillis:
		return fmt.Errorf("retry: RateLimitReset %d is not a known format", t.RateLimitReset)
	case t.LongWait > CapLongWait:
		return fmt.Errorf("retry: LongWait %d is not a known mode", t.LongWait)
	case t.AttemptHeader != "" && !isToken(t.AttemptHeader):
		return fmt.Errorf("retry: AttemptHeader %q is not a valid header name", t.AttemptHeader)
	}
	if err := t.Hedge.check(); err != nil {
		return err
	}
	if v, ok := t.Breaker.(interface{ Validate() error }); ok {
		if err := v.Validate(); err != nil {
			return err
		}
	}
	if v, ok := t.Pacer.(interface{ Validate() error }); ok {
		if err := v.Validate(); err != nil {
			return err
		}
	}
	if v, ok := t.Backoff.(interface{ Validate() error }); ok {
		if err := v.Validate(); err != nil {
			return invalid("Backoff", err)
		}
	}
	if v, ok := t.Budget.(interface{ Validate() error }); ok {
		if err := v.Validate(); err != nil {
			return invalid("Budget", err)
		}
	}
	return nil
}

// invalid returns err, the Validate error of the Transport's field, said
// to be that field's: "retry: invalid Backoff: ...", with err's own
// "retry: " prefix, if any, not said twice. It wraps err.
func invalid(field string, err error) error {
	return &invalidField{field: field, err: err}
}

type invalidField struct {
	field string
	err   error
}

func (e *invalidField) Error() string {
	return "retry: invalid " + e.field + ": " + strings.TrimPrefix(e.err.Error(), "retry: ")
}

func (e *invalidField) Unwrap() error { return e.err }

// resumes resolves a Resumes setting: zero is def, a negative number 0
// (off).
func resumes(n, def int) int {
	switch {
	case n == 0:
		return def
	case n < 0:
		return 0
	}
	return n
}
