package redispace

import (
	"context"
	"errors"
	"net"
	"net/http"
	"time"

	"github.com/backoff-jitter/retry"
	"github.com/backoff-jitter/retry/pace"
	"github.com/redis/go-redis/v9"
)

// Redis must never make a call fail or stall: every call has a time
// limit (Timeout), and a Pacer whose calls fail or keep running out paces
// with Fallback for a while (see trip).

// run runs script on key with args, within Timeout, and records the
// outcome for trip.
func (p *Pacer) run(ctx context.Context, script *redis.Script, key string, args ...any) (any, error) {
	return p.runKeys(ctx, script, []string{key}, args...)
}

// runKeys is run on several keys.
func (p *Pacer) runKeys(ctx context.Context, script *redis.Script, keys []string, args ...any) (any, error) {
	res, err := bound(ctx, p.timeout(), func(ctx context.Context) (any, error) {
		return script.Run(ctx, p.Client, keys, args...).Result()
	})
	p.record(err)
	return res, err
}

// record resets the time the calls to Redis have been timing out for
// (see trip) when err is nil: Redis answered in time.
func (p *Pacer) record(err error) {
	if err != nil {
		return
	}
	p.mu.Lock()
	p.slowSince = time.Time{}
	p.mu.Unlock()
}

// errTimeout is what a call to Redis that outlived Timeout returns.
var errTimeout = errors.New("redispace: Redis did not answer within the Pacer's Timeout")

// bound calls f with a context limited to timeout, and returns after
// timeout whatever f does: a go-redis client heeds a context's deadline
// only with ContextTimeoutEnabled, and else waits for its own ReadTimeout
// (3 seconds by default). A call that outlives timeout finishes on its own
// goroutine, within the client's own time limits, its result dropped.
func bound(ctx context.Context, timeout time.Duration, f func(context.Context) (any, error)) (any, error) {
	type result struct {
		v   any
		err error
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
	done := make(chan result, 1)
	go func() {
		defer cancel()
		v, err := f(ctx)
		done <- result{v, err}
	}()
	var r result
	select {
	case r = <-done:
	case <-ctx.Done():
		select {
		case r = <-done: // both were ready
		default:
			return nil, errTimeout
		}
	}
	if r.err != nil && (ctx.Err() == context.DeadlineExceeded || timedOut(r.err)) {
		// The client gave up on the deadline, or on a read timeout of
		// its own: Redis is slow, not failing.
		return nil, errTimeout
	}
	return r.v, r.err
}

// timedOut reports whether err says a call ran out of time.
func timedOut(err error) bool {
	var ne net.Error
	return errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ne) && ne.Timeout()
}

// turnToFallback reports err and paces req with Fallback.
func (p *Pacer) turnToFallback(ctx context.Context, req *http.Request, err error) (retry.Turn, error) {
	p.trip(err)
	return p.fallbackPacer().Wait(ctx, req)
}

// trip reports err, a failed call to Redis, and turns the Pacer to
// Fallback for RetryAfter: at once if Redis refused or failed the call;
// if it was slow, once calls have been running out of Timeout, none
// answering in time, for tripAfter-1 Timeouts. A call on a connection
// still being dialled can outlive Timeout, and a fleet that starts at
// once makes many such calls together, all slow at the same moment; that
// is no reason to leave Redis for the whole process. A Redis that hangs
// goes on timing out and trips the Pacer once that has lasted
// tripAfter-1 Timeouts.
func (p *Pacer) trip(err error) {
	p.mu.Lock()
	now := p.clock()
	slow := errors.Is(err, errTimeout)
	if slow && p.slowSince.IsZero() {
		p.slowSince = now
	}
	if !slow || now.Sub(p.slowSince) >= time.Duration(tripAfter-1)*p.timeout() {
		p.downTill = now.Add(p.retryAfter())
		p.slowSince = time.Time{}
	}
	p.mu.Unlock()
	if h := p.OnFallback; h != nil {
		h(err)
	}
}

func (p *Pacer) usingFallback() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.clock().Before(p.downTill)
}

// fallbackPacer returns Fallback, or its default: an in-process Pacer
// with the same settings.
func (p *Pacer) fallbackPacer() retry.Pacer {
	p.once.Do(p.init)
	return p.fallback
}

// defaultFallback is Fallback's default: an in-process Pacer with the
// same settings.
func (p *Pacer) defaultFallback() retry.Pacer {
	return &pace.Pacer{Key: p.Key, MinRate: p.MinRate, Adapt: p.Adapt, Refusal: p.Refusal, InitialWindow: p.cfg.InitialWindow}
}
