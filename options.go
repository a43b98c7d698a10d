package retry

import (
	"context"
	"net/http"
	"slices"
	"time"
)

// Option configures a [Transport]; each sets the field of the same name.
type Option func(*Transport)

// WithMaxAttempts sets [Transport.MaxAttempts]: total tries, the first included.
func WithMaxAttempts(n int) Option { return func(t *Transport) { t.MaxAttempts = n } }

// WithBackoff sets [Transport.Backoff].
func WithBackoff(b Backoff) Option { return func(t *Transport) { t.Backoff = b } }

// WithClassifier sets [Transport.Classifier].
func WithClassifier(c Classifier) Option { return func(t *Transport) { t.Classifier = c } }

// WithMaxRetryAfter sets [Transport.MaxRetryAfter]: the longest
// server-requested wait honoured.
func WithMaxRetryAfter(d time.Duration) Option { return func(t *Transport) { t.MaxRetryAfter = d } }

// WithMaxBufferedBody sets [Transport.MaxBufferedBody]: the largest body
// buffered for replay.
func WithMaxBufferedBody(n int64) Option { return func(t *Transport) { t.MaxBufferedBody = n } }

// WithAttemptTimeout sets [Transport.AttemptTimeout].
func WithAttemptTimeout(d time.Duration) Option { return func(t *Transport) { t.AttemptTimeout = d } }

// WithResume sets [Transport.Resumes]: at most n resumes of one
// response's body; a negative n turns resuming off.
func WithResume(n int) Option { return func(t *Transport) { t.Resumes = n } }

// WithOnResume sets [Transport.OnResume].
func WithOnResume(f func(ResumeEvent)) Option { return func(t *Transport) { t.OnResume = f } }

// WithStallTimeout sets [Transport.StallTimeout].
func WithStallTimeout(d time.Duration) Option { return func(t *Transport) { t.StallTimeout = d } }

// WithRateLimitReset sets [Transport.RateLimitReset].
func WithRateLimitReset(f ResetFormat) Option { return func(t *Transport) { t.RateLimitReset = f } }

// WithLongWait sets [Transport.LongWait].
func WithLongWait(w LongWait) Option { return func(t *Transport) { t.LongWait = w } }

// WithWaitFloor sets [Transport.WaitFloor]. Given per request
// ([ContextWithOptions]), it adds to the Transport's: the longer floor
// holds.
func WithWaitFloor(f func(Outcome) time.Duration) Option {
	return func(t *Transport) { t.WaitFloor = f }
}

// WithServerWaitJitter sets [Transport.ServerWaitJitter].
func WithServerWaitJitter(j Jitter) Option { return func(t *Transport) { t.ServerWaitJitter = j } }

// WithClock sets [Transport.Clock]: a fake clock for tests. Given per
// request (ContextWithOptions), it changes nothing: the clock is the
// Transport's.
func WithClock(c Clock) Option { return func(t *Transport) { t.Clock = c } }

// WithRandom sets [Transport.Random]: the uniform source jitter draws. Like
// WithClock, it is the Transport's alone.
func WithRandom(f func() float64) Option { return func(t *Transport) { t.Random = f } }

// WithAttemptHeader sets [Transport.AttemptHeader].
func WithAttemptHeader(name string) Option { return func(t *Transport) { t.AttemptHeader = name } }

// WithBudget sets [Transport.Budget]: WithBudget(NoBudget) turns the
// budget off, and WithBudget(nil), like a nil field, means the default
// one.
func WithBudget(b Budget) Option { return func(t *Transport) { t.Budget = b } }

// WithPacer sets [Transport.Pacer].
func WithPacer(p Pacer) Option { return func(t *Transport) { t.Pacer = p } }

// WithBreaker sets [Transport.Breaker].
func WithBreaker(b Breaker) Option { return func(t *Transport) { t.Breaker = b } }

// WithKey sets [Transport.Key]. Among a request's options
// ([ContextWithOptions]) it keys that request.
func WithKey(f func(*http.Request) string) Option { return func(t *Transport) { t.Key = f } }

// WithOnRetry sets [Transport.OnRetry].
func WithOnRetry(f func(Event)) Option { return func(t *Transport) { t.OnRetry = f } }

// WithOnGiveUp sets [Transport.OnGiveUp].
func WithOnGiveUp(f func(Event)) Option { return func(t *Transport) { t.OnGiveUp = f } }

// WithOnDone sets [Transport.OnDone].
func WithOnDone(f func(Summary)) Option { return func(t *Transport) { t.OnDone = f } }

// WithHedge sets [Transport.Hedge]. Among a request's options
// ([ContextWithOptions]) it replaces the Transport's Hedge even when h is
// zero: WithHedge(NoHedge) turns hedging off for the request.
func WithHedge(h Hedge) Option {
	return func(t *Transport) { t.Hedge, t.hedgeSet = h, true }
}

// WithOnHedge sets [Transport.OnHedge].
func WithOnHedge(f func(Event)) Option { return func(t *Transport) { t.OnHedge = f } }

// WithBeforeAttempt sets [Transport.BeforeAttempt].
func WithBeforeAttempt(f func(Prepare) error) Option {
	return func(t *Transport) { t.BeforeAttempt = f }
}

type optionsKey struct{}

// ContextWithOptions returns a copy of ctx that carries opts: a Transport
// sending a request with that context applies them over its own settings,
// for that request only. So one Transport (one connection pool, one
// budget) can turn retries off for one call (WithMaxAttempts(1)), give
// another more attempts or its own backoff or classifier, or hooks of its
// own. Options given this way to a context that already carries some are
// applied after those.
//
// The options are applied to an empty Transport, and each field they set
// to a value other than its zero value replaces the Transport's setting
// for the request; a zero value (WithMaxAttempts(0), WithBudget(nil),
// WithPacer(nil)) keeps the Transport's; WithHedge is the exception, and
// WithHedge(NoHedge) turns hedging off. So what the options leave unset
// is the Transport's own: its base transport, its budget, its Pacer.
// WithBudget(NoBudget) turns the budget off for the request. A hook given
// this way runs after the Transport's hook of the same kind, not instead
// of it, so the Transport's metrics see every call. Invalid settings fail
// the request, as they would fail every request of a Transport. opts is
// copied: changing its elements afterwards changes nothing.
func ContextWithOptions(ctx context.Context, opts ...Option) context.Context {
	// A copy: the caller may append to opts' array afterwards.
	prev, _ := ctx.Value(optionsKey{}).([]Option)
	return context.WithValue(ctx, optionsKey{}, slices.Concat(prev, opts))
}
