package retry

import (
	"context"
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

// WithRateLimitReset sets [Transport.RateLimitReset].
func WithRateLimitReset(f ResetFormat) Option { return func(t *Transport) { t.RateLimitReset = f } }

// WithAttemptHeader sets [Transport.AttemptHeader].
func WithAttemptHeader(name string) Option { return func(t *Transport) { t.AttemptHeader = name } }

// WithBudget sets [Transport.Budget]: WithBudget(NoBudget) turns the
// budget off, and WithBudget(nil), like a nil field, means the default
// one.
func WithBudget(b Budget) Option { return func(t *Transport) { t.Budget = b } }

// WithPacer sets [Transport.Pacer].
func WithPacer(p Pacer) Option { return func(t *Transport) { t.Pacer = p } }

// WithOnRetry sets [Transport.OnRetry].
func WithOnRetry(f func(Event)) Option { return func(t *Transport) { t.OnRetry = f } }

// WithOnGiveUp sets [Transport.OnGiveUp].
func WithOnGiveUp(f func(Event)) Option { return func(t *Transport) { t.OnGiveUp = f } }

// WithOnDone sets [Transport.OnDone].
func WithOnDone(f func(Summary)) Option { return func(t *Transport) { t.OnDone = f } }

type optionsKey struct{}

// ContextWithOptions returns a copy of ctx that carries opts: a Transport
// sending a request with that context applies them over its own settings,
// for that request only. So one Transport (one connection pool, one
// budget) can turn retries off for one call (WithMaxAttempts(1)), give
// another more attempts or its own backoff or classifier, or hooks of its
// own. Options given this way to a context that already carries some are
// applied after those.
//
// What the options leave unset is the Transport's own: its base
// transport, its budget (a per-request WithBudget(nil) means that one
// too), its Pacer and hooks. Invalid settings fail the request, as they
// would fail every request of a Transport.
func ContextWithOptions(ctx context.Context, opts ...Option) context.Context {
	if prev, ok := ctx.Value(optionsKey{}).([]Option); ok {
		opts = append(slices.Clip(prev), opts...)
	}
	return context.WithValue(ctx, optionsKey{}, opts)
}
