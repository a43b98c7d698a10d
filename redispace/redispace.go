// Package redispace is a [retry.Pacer] for a fleet: many processes that
// share one quota (Route 53 allows five requests a second for a whole AWS
// account, whatever the number of tools and replicas calling it) learn one
// rate per key, kept in Redis, and take turns from one schedule, so that
// together they pace at the limit instead of each at a rate of its own.
//
// Each key's state is one Redis hash changed only by Lua scripts, so every
// change is atomic across the fleet: a turn is taken by GCRA (the
// theoretical arrival time advances one interval per turn), and the rate
// is learned from throttling as package pace's Pacer learns it — the first
// cut goes to 0.9 times the rate the fleet is accepted at, a throttle of
// an attempt paced before the last cut cuts nothing, and successes grow
// the rate back along CUBIC's curve. A key nobody throttled is not paced:
// a turn costs one script call and no wait.
//
// Redis must never make a call fail or stall. Every script call has a
// time limit (Timeout); when one fails or runs out, the Pacer reports it
// to OnFallback and paces with Fallback, an in-process Pacer, for
// RetryAfter before it tries Redis again.
//
//	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"})
//	rt := retry.New(nil, retry.WithPacer(&redispace.Pacer{Client: rdb}))
//
// It is a module of its own, so that package retry keeps its single
// run-time dependency.
package redispace

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/backoff-jitter/retry"
	"github.com/backoff-jitter/retry/pace"
	"github.com/redis/go-redis/v9"
)

// Defaults of a Pacer whose fields are zero.
const (
	defaultPrefix        = "retry:pace:"
	defaultTimeout       = 50 * time.Millisecond
	defaultRetryAfter    = time.Second
	defaultMinRate       = 0.5
	defaultInitialWindow = 10
	// slotPoll is how often an attempt waiting for a slot of slow start
	// asks again.
	slotPoll = 5 * time.Millisecond
	// keyTTL is how long a key's state outlives its last use.
	keyTTL = time.Hour
)

// Pacer is a [retry.Pacer] whose rates and turns live in Redis, shared by
// every process that uses the same Redis and Prefix. Fields must not be
// changed after first use; a Pacer is safe for concurrent use.
type Pacer struct {
	// Client is the Redis the fleet shares. It must not be nil.
	Client redis.UniversalClient

	// Key maps a request to the limit it counts against, as
	// [pace.Pacer.Key]. Nil means the request's host.
	Key func(*http.Request) string

	// Prefix is put before every key in Redis. Empty means "retry:pace:".
	Prefix string

	// MinRate is the slowest a key is paced, in requests per second. Zero
	// means 0.5.
	MinRate float64

	// Timeout bounds each call to Redis. Zero means 50ms.
	Timeout time.Duration

	// Fallback paces while Redis fails. Nil means a [pace.Pacer] of the
	// Pacer's own, with the same Key and MinRate.
	Fallback retry.Pacer

	// InitialWindow is how many attempts a key new to the fleet may have
	// unanswered at once, in slow start, as [pace.Pacer.InitialWindow]:
	// every answer opens one slot more, a throttle ends it, and it lasts
	// a second at most. Zero means 10; a negative value turns it off.
	InitialWindow int

	// RetryAfter is how long the Pacer keeps to Fallback after Redis
	// failed before it tries Redis again. Zero means one second.
	RetryAfter time.Duration

	// OnFallback, if not nil, is called with Redis's error each time the
	// Pacer turns to Fallback.
	OnFallback func(error)

	once     sync.Once
	fallback retry.Pacer
	mu       sync.Mutex
	downTill time.Time // Fallback paces until then

	// sleep is a seam for tests.
	sleep func(ctx context.Context, d time.Duration) error
}

// Validate reports invalid settings.
func (p *Pacer) Validate() error {
	switch {
	case p.Client == nil:
		return errors.New("retry: redispace.Pacer.Client is nil")
	case p.MinRate < 0:
		return fmt.Errorf("retry: redispace.Pacer.MinRate %v is negative", p.MinRate)
	case p.Timeout < 0 || p.RetryAfter < 0:
		return errors.New("retry: redispace.Pacer.Timeout and RetryAfter must not be negative")
	}
	return nil
}

// Wait returns when the next attempt of req may be sent, at its turn in
// the fleet's schedule for req's key; a turn the fleet's rate was cut
// under while the attempt waited is taken again. A wait that would end
// past ctx's deadline is not begun. It implements [retry.Pacer].
func (p *Pacer) Wait(ctx context.Context, req *http.Request) (retry.Turn, error) {
	if p.usingFallback() {
		return p.fallbackPacer().Wait(ctx, req)
	}
	key := p.prefix() + p.key(req)
	for {
		res, err := p.run(ctx, reserveScript, key, keyTTL.Milliseconds(), p.initialWindow())
		if err != nil {
			return p.turnToFallback(ctx, req, err)
		}
		v, ok := res.([]any)
		if !ok || len(v) != 4 {
			return p.turnToFallback(ctx, req, fmt.Errorf("redispace: unexpected reply %v", res))
		}
		wait, gen, slot, tat := asInt(v[0]), asInt(v[1]), asInt(v[2]) == 1, asInt(v[3])
		if wait < 0 {
			// Slow start's window is full: look again shortly.
			if err := p.doSleep(ctx, slotPoll); err != nil {
				return nil, err
			}
			continue
		}
		d := time.Duration(wait) * time.Microsecond
		if d <= 0 {
			return &turn{p: p, key: key, gen: gen, slot: slot}, nil
		}
		if dl, ok := ctx.Deadline(); ok && d > time.Until(dl) {
			p.run(ctx, cancelScript, key, tat, 0) // best effort: the turn goes back
			return nil, fmt.Errorf("retry: pacing wait of %v would end past the context's deadline: %w", d, context.DeadlineExceeded)
		}
		if err := p.doSleep(ctx, d); err != nil {
			return nil, err
		}
		// A cut while the attempt slept voids its turn: at the old rate it
		// would arrive among the refusals.
		now, err := p.generation(ctx, key)
		if err != nil || now == gen {
			return &turn{p: p, key: key, gen: gen}, nil
		}
	}
}

// turn is an attempt's turn in the fleet's schedule, or its slot of slow
// start.
type turn struct {
	p    *Pacer
	key  string
	gen  int64
	slot bool
}

// Done tells the fleet what the attempt met: a throttle may cut the rate,
// a success grows it, and the server's requested wait pauses the key.
func (t *turn) Done(f retry.Feedback) {
	class := "other"
	switch f.Class {
	case retry.Success:
		class = "ok"
	case retry.Throttled:
		class = "throttled"
	default:
		if !t.slot {
			return // says nothing about the rate limit, and holds no slot
		}
	}
	hint := int64(-1)
	if f.Hinted {
		hint = f.Wait.Microseconds()
	}
	p := t.p
	if _, err := p.run(context.Background(), feedbackScript, t.key, class, t.gen, hint, p.minRate(), keyTTL.Milliseconds(), boolArg(t.slot)); err != nil {
		p.trip(err)
	}
}

// Abandon gives a slot of slow start back; a turn stays spent (the
// schedule moves on).
func (t *turn) Abandon() {
	if t.slot {
		if _, err := t.p.run(context.Background(), cancelScript, t.key, 0, 1); err != nil {
			t.p.trip(err)
		}
	}
}

func boolArg(b bool) int {
	if b {
		return 1
	}
	return 0
}

// run runs script on key with args, within Timeout.
func (p *Pacer) run(ctx context.Context, s *redis.Script, key string, args ...any) (any, error) {
	return bound(ctx, p.timeout(), func(ctx context.Context) (any, error) {
		return s.Run(ctx, p.Client, []string{key}, args...).Result()
	})
}

// generation reads the generation of key's rate, within Timeout.
func (p *Pacer) generation(ctx context.Context, key string) (int64, error) {
	return bound(ctx, p.timeout(), func(ctx context.Context) (int64, error) {
		return p.Client.HGet(ctx, key, "gen").Int64()
	})
}

// errTimeout is what a call to Redis that outlived Timeout returns.
var errTimeout = errors.New("redispace: Redis did not answer within the Pacer's Timeout")

// bound calls f with a context limited to timeout, and returns after
// timeout whatever f does: a go-redis client heeds a context's deadline
// only with ContextTimeoutEnabled, and else waits for its own ReadTimeout
// (3 seconds by default). A call that outlives timeout finishes on its own
// goroutine, within the client's own time limits, and its result is
// dropped.
func bound[T any](ctx context.Context, timeout time.Duration, f func(context.Context) (T, error)) (T, error) {
	type result struct {
		v   T
		err error
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
	done := make(chan result, 1)
	go func() {
		defer cancel()
		v, err := f(ctx)
		done <- result{v, err}
	}()
	select {
	case r := <-done:
		return r.v, r.err
	case <-ctx.Done():
		select {
		case r := <-done: // both were ready
			return r.v, r.err
		default:
		}
		var zero T
		return zero, errTimeout
	}
}

// turnToFallback reports err and paces req with Fallback.
func (p *Pacer) turnToFallback(ctx context.Context, req *http.Request, err error) (retry.Turn, error) {
	p.trip(err)
	return p.fallbackPacer().Wait(ctx, req)
}

// trip turns the Pacer to Fallback for RetryAfter.
func (p *Pacer) trip(err error) {
	p.mu.Lock()
	p.downTill = time.Now().Add(p.retryAfter())
	p.mu.Unlock()
	if h := p.OnFallback; h != nil {
		h(err)
	}
}

func (p *Pacer) usingFallback() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return time.Now().Before(p.downTill)
}

func (p *Pacer) fallbackPacer() retry.Pacer {
	p.once.Do(func() {
		p.fallback = p.Fallback
		if p.fallback == nil {
			p.fallback = &pace.Pacer{Key: p.Key, MinRate: p.MinRate}
		}
	})
	return p.fallback
}

func (p *Pacer) key(req *http.Request) string {
	switch {
	case p.Key != nil:
		return p.Key(req)
	case req.URL != nil:
		return req.URL.Host
	}
	return ""
}

func (p *Pacer) prefix() string {
	if p.Prefix == "" {
		return defaultPrefix
	}
	return p.Prefix
}

func (p *Pacer) timeout() time.Duration {
	if p.Timeout > 0 {
		return p.Timeout
	}
	return defaultTimeout
}

func (p *Pacer) retryAfter() time.Duration {
	if p.RetryAfter > 0 {
		return p.RetryAfter
	}
	return defaultRetryAfter
}

func (p *Pacer) initialWindow() int {
	switch {
	case p.InitialWindow == 0:
		return defaultInitialWindow
	case p.InitialWindow < 0:
		return 0
	}
	return p.InitialWindow
}

func (p *Pacer) minRate() float64 {
	if p.MinRate > 0 {
		return p.MinRate
	}
	return defaultMinRate
}

func (p *Pacer) doSleep(ctx context.Context, d time.Duration) error {
	if p.sleep != nil {
		return p.sleep(ctx, d)
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-timer.C:
		return nil
	}
}

// asInt reads an integer of a script's reply.
func asInt(v any) int64 {
	n, _ := v.(int64)
	return n
}
