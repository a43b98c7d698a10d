// Package redispace is a [retry.Pacer] for a fleet: many processes that
// share one quota (Route 53 allows five requests a second for a whole AWS
// account, whatever the number of tools and replicas calling it) learn one
// rate per key, kept in Redis, and take turns from one schedule, so that
// together they pace at the limit instead of each at a rate of its own.
//
// Each key's state is one Redis hash changed only by Lua scripts, so every
// change is atomic across the fleet. A turn is a number in one queue per
// key that drains at the rate in force (as GCRA: an idle key's turn goes
// at once, the next one interval later); a turn keeps its place while it
// waits, and a cut or growth of the rate meanwhile slows or speeds the
// whole queue. The rate is learned from throttling as package pace's
// Pacer learns it: a throttle engages the key below the rate the fleet
// was sending at (once a CUSUM of its answers tells a limit's share from
// refusals now and then, or at random up to a quarter or so, which engage
// nothing), a throttle of an attempt paced before the last cut cuts
// nothing, a lone throttle is taken for the jitter of the fleet's clocks,
// and successes grow the rate back along CUBIC's curve. A chain of cuts is tested for shedding, as pace's is: a
// server that refuses a share of requests whatever their rate (a load
// balancer shedding, a flaky backend) refuses as often at two lower
// rates, and the key goes back to idle and remembers the share, so that
// those refusals pace no one. An outage (every request refused for a
// second and a half or more, then a success) restarts the key in slow
// start rather than leave the fleet at the rate the outage cut it to;
// the silence of a fixed window limiter, spent at the start of each
// window, is cut through at the rate the successes since the first
// throttle allow, and its end resumes the rate the windows accepted. A
// key nobody throttled is not paced: a turn costs one script call and no
// wait. docs/fleet.md in the repository gives the rules with their
// figures and the measurements.
//
// Redis must never make a call fail or stall. Every script call has a
// time limit (Timeout); when one fails or runs out, the Pacer reports it
// to OnFallback and paces that attempt with Fallback, an in-process
// Pacer. A refused or failed call (Redis down), or calls that keep running
// out for two Timeouts (Redis hung), turn the whole Pacer to Fallback for
// RetryAfter before it tries Redis again; a single slow call does not, as
// the first calls on connections still being dialled are slow when a
// whole fleet starts at once. Open the connections before the first
// request (go-redis's MinIdleConns, or a Ping per connection) to spare
// those attempts the wait.
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
	"math/rand/v2"
	"net/http"
	"sync"
	"time"

	"github.com/backoff-jitter/retry"
	"github.com/backoff-jitter/retry/internal/clock"
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
	// slotPoll is about how often an attempt waiting for a slot of slow
	// start asks again at first; it asks less often the longer it waits,
	// up to slotPollMax.
	slotPoll    = 5 * time.Millisecond
	slotPollMax = 40 * time.Millisecond
	// heldPoll is about how often an attempt whose wait a rate held
	// through an outage would take past its deadline asks whether the
	// hold has ended: 75 ms on average, spread over the interval.
	heldPoll = 100 * time.Millisecond
	// tripAfter-1 Timeouts is how long calls must have been outliving
	// Timeout, none answering in time, before the Pacer turns to
	// Fallback for RetryAfter; see trip.
	tripAfter = 3
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
	// [pace.Pacer.Key]. Nil means the request's host. It must be safe
	// for concurrent use.
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

	// Refusal, if not nil, reports whether a throttled outcome refused the
	// attempt for the rate, as [pace.Pacer.Refusal]: the others (a
	// conflict, such as Route 53's PriorRequestNotComplete) teach the
	// fleet nothing. Nil means every throttled outcome did. The default
	// Fallback has it too. It must be safe for concurrent use.
	Refusal func(retry.Feedback) bool

	// InitialWindow is how many attempts a key new to the fleet may have
	// unanswered at once, in slow start, as [pace.Pacer.InitialWindow]:
	// every success opens one slot more, a throttle ends it, and it lasts
	// a second at most. Zero means 10; a negative value turns it off.
	InitialWindow int

	// RetryAfter is how long the Pacer keeps to Fallback after Redis
	// failed (an error, or calls past Timeout for two Timeouts) before it
	// tries Redis again. Zero means one second.
	RetryAfter time.Duration

	// OnFallback, if not nil, is called with Redis's error each time the
	// call that takes a turn, one that reports an outcome, or one that
	// gives a turn back (Abandon) fails or outlives Timeout. An attempt whose turn was not taken is paced by
	// Fallback; the whole Pacer keeps to Fallback for RetryAfter after an
	// error, or after calls timing out for two Timeouts. (A failed check
	// of a turn already taken keeps to the wait it had.)
	OnFallback func(error)

	once      sync.Once
	fallback  retry.Pacer
	mu        sync.Mutex
	downTill  time.Time // Fallback paces until then
	slowSince time.Time // the first of the timeouts since the last answer

	// sleep and now are seams for tests.
	sleep func(ctx context.Context, d time.Duration) error
	now   func() time.Time
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
// the fleet's schedule for req's key. The turn keeps its place in the
// queue, which drains at the rate in force while it waits: a cut meanwhile
// makes it wait longer, growth brings it forward (a long wait is checked
// again at half of it). A wait that would end past ctx's deadline is not
// begun and takes no turn; a turn given up while it waits (a cut pushed
// it past the deadline) goes to the next caller while it is to come.
// While the key holds its rate through an outage (refused from its first
// attempt on), such a wait is a probe's, no forecast: the attempt asks
// again, about every 75 ms and with no turn, until the hold ends (a
// success restarts the key) or ctx does. It implements [retry.Pacer].
func (p *Pacer) Wait(ctx context.Context, req *http.Request) (retry.Turn, error) {
	if p.usingFallback() {
		return p.fallbackPacer().Wait(ctx, req)
	}
	key := p.prefix() + p.key(req)
	for polls := 0; ; polls++ {
		r, err := p.reserve(ctx, key)
		if err != nil {
			return p.turnToFallback(ctx, req, err)
		}
		switch r.wait {
		case waitPastDeadline:
			return nil, pastDeadline(time.Duration(r.late) * time.Microsecond)
		case waitHeld:
			// Past the deadline at a rate held through an outage,
			// which is a probe's, no forecast: the first success
			// restarts the key. Ask again until the hold ends, or
			// until ctx does.
			if err := p.doSleep(ctx, spread(heldPoll)); err != nil {
				return nil, err
			}
			continue
		case waitNoSlot:
			// Slow start's window is full: look again shortly, the
			// waiters of the fleet spread over the interval.
			if err := p.doSleep(ctx, pollInterval(polls)); err != nil {
				return nil, err
			}
			continue
		}
		t, err := p.await(ctx, key, r)
		if err == errSlowStart {
			continue // the key restarted while the turn waited: take a slot
		}
		return t, err
	}
}

// pastDeadline is Wait's error for a wait of d that would end past the
// context's deadline.
func pastDeadline(d time.Duration) error {
	return &retry.TurnTooLate{Wait: d}
}

// errSlowStart tells Wait that the key restarted in slow start while a
// turn waited (after an outage): the turn's attempt takes a slot, as a new
// one would, instead of leaving with every other waiting turn at once.
var errSlowStart = errors.New("redispace: the key restarted in slow start")

// recheckAbove is the longest wait slept whole, to the turn; a longer one
// is slept in halves, each followed by a check of the turn's wait at the
// rate then in force. The last stretch is slept whole so that the attempt
// leaves on time, not a call to Redis later.
const recheckAbove = 40 * time.Millisecond

// await sleeps until the turn r took comes.
func (p *Pacer) await(ctx context.Context, key string, r reservation) (retry.Turn, error) {
	t := &turn{p: p, key: key, gen: r.gen, slot: r.slot, n: r.n}
	d := time.Duration(r.wait) * time.Microsecond
	for d > 0 {
		if dl, ok := ctx.Deadline(); ok && d > time.Until(dl) {
			p.run(ctx, cancelScript, key, r.n, 0) // best effort: the turn goes back
			return nil, pastDeadline(d)
		}
		s := d
		if d > recheckAbove {
			s = d / 2
		}
		if err := p.doSleep(ctx, s); err != nil {
			p.run(ctx, cancelScript, key, r.n, 0)
			return nil, err
		}
		if s == d {
			break
		}
		wait, gen, err := p.check(ctx, key, r.n)
		if err != nil {
			// Redis failed meanwhile: keep to the wait as it stood.
			if err := p.doSleep(ctx, d-s); err != nil {
				return nil, err
			}
			return t, nil
		}
		if wait < 0 {
			return nil, errSlowStart
		}
		d, t.gen = time.Duration(wait)*time.Microsecond, gen
	}
	return t, nil
}

// turn is an attempt's turn in the fleet's schedule, or its slot of slow
// start.
type turn struct {
	p    *Pacer
	key  string
	gen  int64
	slot bool
	n    int64 // the turn's number in the schedule; -1: none
}

// Done tells the fleet what the attempt met: a throttle may cut the rate,
// a success grows it, and the server's requested wait pauses the key.
func (t *turn) Done(f retry.Feedback) {
	class := "other"
	switch f.Class {
	case retry.Success:
		class = "ok"
	case retry.Throttled:
		if t.p.Refusal == nil || t.p.Refusal(f) {
			class = "throttled"
			break
		}
		// Refused, but not for the rate: its wait is the request's own
		// (a conflict's), not the fleet's.
		f.Hinted = false
		fallthrough
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
	if _, err := p.run(context.Background(), feedbackScript, t.key, class, t.gen, hint, p.minRate(), keyTTL.Milliseconds(), boolArg(t.slot), p.initialWindow()); err != nil {
		p.trip(err)
	}
}

// Abandon gives a slot of slow start back, or the turn's place in the
// schedule if no later turn was taken since (else it stays spent: the
// schedule moves on).
func (t *turn) Abandon() {
	if !t.slot && t.n < 0 {
		return
	}
	if _, err := t.p.run(context.Background(), cancelScript, t.key, t.n, boolArg(t.slot)); err != nil {
		t.p.trip(err)
	}
}

func boolArg(b bool) int {
	if b {
		return 1
	}
	return 0
}

// run runs script on key with args, within Timeout, and records the
// outcome for trip.
func (p *Pacer) run(ctx context.Context, script *redis.Script, key string, args ...any) (any, error) {
	return p.runLate(ctx, script, key, nil, args...)
}

// runLate is run whose reply, if it comes after Timeout, goes to late
// (when late is not nil).
func (p *Pacer) runLate(ctx context.Context, script *redis.Script, key string, late func(any), args ...any) (any, error) {
	res, err := bound(ctx, p.timeout(), func(ctx context.Context) (any, error) {
		return script.Run(ctx, p.Client, []string{key}, args...).Result()
	}, late)
	p.record(err)
	return res, err
}

// reservation is reserveScript's reply.
type reservation struct {
	// wait in microseconds, or waitNoSlot or waitPastDeadline (late is
	// then the wait); n: the turn's number, -1: none.
	wait, gen, n, late int64
	slot               bool
}

// reserveScript's waits that are not one.
const (
	waitNoSlot       = -1 // slow start's window is full: ask again shortly
	waitPastDeadline = -2 // the turn would come past the deadline; none was taken
	waitHeld         = -3 // so would it, at a rate held through an outage: ask again later
)

// reserve takes a turn or a slot of slow start for key, within Timeout. A
// reply that comes after Timeout, when the attempt has gone on with
// Fallback, gives its turn or slot back: a slot left held would narrow
// slow start's window for the whole fleet.
func (p *Pacer) reserve(ctx context.Context, key string) (reservation, error) {
	giveBack := func(res any) {
		v, err := ints(res, 4)
		switch {
		case err != nil || v[0] == waitPastDeadline || v[0] == waitHeld:
		case v[2] == 1:
			p.run(context.Background(), cancelScript, key, -1, 1)
		case v[3] >= 0:
			p.run(context.Background(), cancelScript, key, v[3], 0)
		}
	}
	within := int64(-1)
	if dl, ok := ctx.Deadline(); ok {
		within = max(time.Until(dl).Microseconds(), 0)
	}
	res, err := p.runLate(ctx, reserveScript, key, giveBack, keyTTL.Milliseconds(), p.initialWindow(), within)
	if err != nil {
		return reservation{}, err
	}
	v, err := ints(res, 4)
	if err != nil {
		return reservation{}, err
	}
	if v[0] == waitPastDeadline || v[0] == waitHeld {
		return reservation{wait: v[0], gen: v[1], late: v[2], n: -1}, nil
	}
	return reservation{wait: v[0], gen: v[1], slot: v[2] == 1, n: v[3]}, nil
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

// check asks how much longer turn n of key waits, within Timeout: the
// wait in microseconds and the rate's generation.
func (p *Pacer) check(ctx context.Context, key string, n int64) (wait, gen int64, err error) {
	res, err := p.run(ctx, checkScript, key, n, keyTTL.Milliseconds())
	if err != nil {
		return 0, 0, err
	}
	v, err := ints(res, 2)
	if err != nil {
		return 0, 0, err
	}
	return v[0], v[1], nil
}

// errTimeout is what a call to Redis that outlived Timeout returns.
var errTimeout = errors.New("redispace: Redis did not answer within the Pacer's Timeout")

// bound calls f with a context limited to timeout, and returns after
// timeout whatever f does: a go-redis client heeds a context's deadline
// only with ContextTimeoutEnabled, and else waits for its own ReadTimeout
// (3 seconds by default). A call that outlives timeout finishes on its own
// goroutine, within the client's own time limits, and its result goes to
// late if it succeeded and late is not nil (else it is dropped).
func bound(ctx context.Context, timeout time.Duration, f func(context.Context) (any, error), late func(any)) (any, error) {
	type result struct {
		v   any
		err error
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
	done := make(chan result, 1)
	var mu sync.Mutex
	abandoned := false
	go func() {
		defer cancel()
		v, err := f(ctx)
		mu.Lock()
		defer mu.Unlock()
		if abandoned {
			if err == nil && late != nil {
				late(v)
			}
			return
		}
		done <- result{v, err}
	}()
	select {
	case r := <-done:
		return r.v, r.err
	case <-ctx.Done():
		mu.Lock()
		defer mu.Unlock()
		select {
		case r := <-done: // both were ready
			return r.v, r.err
		default:
		}
		abandoned = true
		return nil, errTimeout
	}
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

func (p *Pacer) fallbackPacer() retry.Pacer {
	p.once.Do(func() {
		p.fallback = p.Fallback
		if p.fallback == nil {
			p.fallback = &pace.Pacer{Key: p.Key, MinRate: p.MinRate, Refusal: p.Refusal}
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

func (p *Pacer) clock() time.Time {
	if p.now != nil {
		return p.now()
	}
	return time.Now()
}

func (p *Pacer) doSleep(ctx context.Context, d time.Duration) error {
	if p.sleep != nil {
		return p.sleep(ctx, d)
	}
	return clock.Sleep(ctx, d)
}

// pollInterval is how long an attempt waits for a slot of slow start
// before it asks again, the polls-th time: from slotPoll, doubling up to
// slotPollMax, spread.
func pollInterval(polls int) time.Duration {
	return spread(min(slotPoll<<min(polls, 8), slotPollMax))
}

// spread draws a wait at random from half to all of d, so that the
// fleet's waiters do not ask Redis together.
func spread(d time.Duration) time.Duration {
	return d/2 + rand.N(d/2+1)
}

// ints reads a script's reply of n integers.
func ints(res any, n int) ([]int64, error) {
	v, ok := res.([]any)
	if !ok || len(v) != n {
		return nil, fmt.Errorf("redispace: unexpected reply %v", res)
	}
	out := make([]int64, n)
	for i, x := range v {
		if out[i], ok = x.(int64); !ok {
			return nil, fmt.Errorf("redispace: unexpected reply %v", res)
		}
	}
	return out, nil
}
