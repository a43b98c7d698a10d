// Package redispace is a [retry.Pacer] for a fleet: many processes that
// share one quota (Route 53 allows five requests a second for a whole AWS
// account, whatever the number of tools and replicas calling it) learn one
// rate per key, kept in Redis, and take turns from one schedule, so that
// together they pace at the limit instead of each at a rate of its own.
//
// It is package pace's Pacer, the same decisions by the same code, over
// a state that the fleet shares: each key's state is one Redis hash, and
// every step of it (an attempt asking for a turn, an answer) reads the
// state, steps it in Go with the time on Redis's clock, and writes it back
// only if no other process wrote it meanwhile, else steps again from what
// that process wrote (compare-and-set). What differs is only how a
// process learns that a turn it waits for was made void: it looks halfway
// through a long wait and just before the turn, where pace's waiters are
// woken. A key nobody refused is not paced: a turn costs one script call
// and no wait, and a success one more while the key weighs refusals.
//
// Redis must never make a call fail or stall. Every call has a time limit
// (Timeout); when one fails or runs out, the Pacer reports it to
// OnFallback and paces that attempt with Fallback, an in-process Pacer. A
// refused or failed call (Redis down), or calls that keep running out for
// two Timeouts (Redis hung), turn the whole Pacer to Fallback for
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
	"math"
	"net/http"
	"sync"
	"time"

	"github.com/backoff-jitter/retry"
	"github.com/backoff-jitter/retry/internal/clock"
	"github.com/backoff-jitter/retry/internal/keytable"
	"github.com/backoff-jitter/retry/internal/pacecore"
	"github.com/backoff-jitter/retry/internal/pacefb"
	"github.com/backoff-jitter/retry/pace"
	"github.com/redis/go-redis/v9"
)

// Defaults of a Pacer whose fields are zero.
const (
	defaultPrefix     = "retry:pace:"
	defaultTimeout    = 50 * time.Millisecond
	defaultRetryAfter = time.Second
	// slotPoll is about how often an attempt waiting for a slot of slow
	// start asks again, spread over the interval so that a fleet's
	// waiters do not ask together.
	slotPoll = 10 * time.Millisecond
	// commitRounds bounds the compare-and-set rounds of one step: past
	// them, the step fails as a call to Redis would, and Fallback paces.
	commitRounds = 8
	// leaseSuffix names a key's lease, and leaseWait is about how long a
	// process that finds it held waits before it looks again.
	leaseSuffix = ":lease"
	leaseWait   = 500 * time.Microsecond
	// recheckAbove is the longest wait for a turn slept whole; a longer
	// one is slept in halves, each followed by a look at whether the turn
	// was made void meanwhile. goAhead before the turn, the attempt looks
	// at it once more and is counted as sent, so that it leaves at the
	// turn's time, not a call to Redis later (see await).
	recheckAbove = 40 * time.Millisecond
	goAhead      = 2 * time.Millisecond
	// tripAfter-1 Timeouts is how long calls must have been outliving
	// Timeout, none answering in time, before the Pacer turns to
	// Fallback for RetryAfter; see trip.
	tripAfter = 3
	// keyTTL is how long a key's state outlives its last use.
	keyTTL = time.Hour
)

// Pacer is a [retry.Pacer] whose rates and turns live in Redis, shared by
// every process that uses the same Redis and Prefix. Every process of a
// fleet must give its Pacer the same settings (Key, MinRate, Adapt,
// InitialWindow, Refusal): they decide together. Fields must not be
// changed after first use; a Pacer is safe for concurrent use.
type Pacer struct {
	// Client is the Redis the fleet shares. It must not be nil.
	Client redis.UniversalClient

	// Key maps a request to the limit it counts against, as
	// [pace.Pacer.Key]. Nil means [retry.RequestKey]: the Transport's
	// key, by default the request's host. It must be safe for concurrent
	// use.
	Key func(*http.Request) string

	// Prefix is put before every key in Redis. Empty means "retry:pace:".
	Prefix string

	// MinRate is the slowest a key is paced, in requests per second, as
	// [pace.Pacer.MinRate]. Zero means 0.5.
	MinRate float64

	// Adapt chooses how the rate is adjusted, as [pace.Pacer.Adapt].
	// Zero means [pace.AdaptCubic].
	Adapt pace.Adapt

	// InitialWindow is how many attempts a key new to the fleet may have
	// unanswered at once, in slow start, as [pace.Pacer.InitialWindow].
	// Zero means [pace.DefaultInitialWindow]: a fleet shares a quota it
	// knows to be limited, and its first burst should not run into it. A
	// negative value turns slow start off.
	InitialWindow int

	// Refusal, if not nil, reports whether a throttled outcome refused the
	// attempt for the rate, as [pace.Pacer.Refusal]: the others (a
	// conflict, such as Route 53's PriorRequestNotComplete) teach the
	// fleet nothing. Nil means [retry.RateLimited]. The default Fallback
	// has it too. It must be safe for concurrent use.
	Refusal func(retry.Feedback) bool

	// Timeout bounds each call to Redis. Zero means 50ms.
	Timeout time.Duration

	// Fallback paces while Redis fails. Nil means a [pace.Pacer] of the
	// Pacer's own, with the same Key, MinRate, Adapt, InitialWindow and
	// Refusal.
	Fallback retry.Pacer

	// RetryAfter is how long the Pacer keeps to Fallback after Redis
	// failed (an error, or calls past Timeout for two Timeouts) before it
	// tries Redis again. Zero means one second.
	RetryAfter time.Duration

	// OnFallback, if not nil, is called with Redis's error each time a
	// call to Redis fails or outlives Timeout: one that takes a turn,
	// reports an outcome or gives a turn back. An attempt whose turn was
	// not taken is paced by Fallback; the whole Pacer keeps to Fallback
	// for RetryAfter after an error, or after calls timing out for two
	// Timeouts. (A failed look at a turn already taken keeps to the wait
	// it had.)
	OnFallback func(error)

	once      sync.Once
	locks     keytable.Table[sync.Mutex] // each key's steps in this process, one at a time
	keyOf     func(*http.Request) string // Key, or the Transport's key
	cfg       pacecore.Config
	fleet     fleetClock
	fallback  retry.Pacer
	mu        sync.Mutex
	downTill  time.Time // Fallback paces until then
	slowSince time.Time // the first of the timeouts since the last answer

	// Seams for tests: the sleep, the process's clock, and the fleet's
	// clock instead of Redis's TIME.
	sleep    func(ctx context.Context, d time.Duration) error
	now      func() time.Time
	redisNow func() time.Time
}

// Validate reports invalid settings.
func (p *Pacer) Validate() error {
	switch {
	case p.Client == nil:
		return errors.New("redispace: Pacer.Client is nil")
	case p.Timeout < 0:
		return fmt.Errorf("redispace: Pacer.Timeout %v is negative", p.Timeout)
	case p.RetryAfter < 0:
		return fmt.Errorf("redispace: Pacer.RetryAfter %v is negative", p.RetryAfter)
	}
	s := pacecore.Config{MinRate: p.MinRate, Adapt: pacecore.Adapt(p.Adapt)}
	return s.Validate("redispace: Pacer")
}

// init resolves the settings once.
func (p *Pacer) init() {
	window := p.InitialWindow
	if window == 0 {
		window = pace.DefaultInitialWindow
	}
	p.keyOf = p.Key
	if p.keyOf == nil {
		p.keyOf = retry.RequestKey
	}
	s := pacecore.Config{MinRate: p.MinRate, Adapt: pacecore.Adapt(p.Adapt), InitialWindow: window}
	p.locks.New = func(string) *sync.Mutex { return new(sync.Mutex) }
	p.cfg = s.Defaulted()
	p.fallback = p.Fallback
	if p.fallback == nil {
		p.fallback = p.defaultFallback()
	}
}

// Wait returns when the next attempt of req may be sent: at once while
// its key is idle; at its turn in the fleet's schedule once the key has
// engaged (a turn made void while the attempt waits is given up for a new
// one, as the attempt finds at the looks it takes halfway through a long
// wait and just before the turn). A wait that would end past ctx's
// deadline is not begun and takes no turn: Wait returns a
// [*retry.TurnTooLate] at once. It implements [retry.Pacer].
func (p *Pacer) Wait(ctx context.Context, req *http.Request) (retry.Turn, error) {
	p.once.Do(p.init)
	if p.usingFallback() {
		return p.fallbackPacer().Wait(ctx, req)
	}
	h := &handle{p: p, key: p.prefix() + p.keyOf(req)}
	t, err := pacecore.Wait(ctx, h)
	var late *pacecore.TooLate
	switch {
	case err == nil:
		return &turn{p: p, t: t}, nil
	case errors.As(err, &late), ctx.Err() != nil:
		return nil, pacefb.TurnError(err)
	}
	return p.turnToFallback(ctx, req, err)
}

// turn is an attempt's turn in the fleet's schedule, or its slot of slow
// start.
type turn struct {
	p *Pacer
	t pacecore.Turn
}

// Done tells the fleet what the attempt met; a call to Redis that fails
// is reported (see trip).
func (t *turn) Done(f retry.Feedback) {
	pacecore.Done(t.t, pacefb.Signal(f, t.p.Refusal))
	t.tripped()
}

// Abandon gives a slot of slow start back; a turn in the schedule is
// given back if no later one was handed out.
func (t *turn) Abandon() {
	pacecore.Abandon(t.t)
	t.tripped()
}

func (t *turn) tripped() {
	if h := t.t.H.(*handle); h.err != nil {
		t.p.trip(h.err)
	}
}

// Paced reports whether the attempt waited for a turn at a rate the fleet
// learned (see [retry.Budget]).
func (t *turn) Paced() bool { return t.t.Gen != 0 }

// Rate returns the rate at which the fleet paces key now, in requests
// per second, and whether it paces key at all (+Inf when not), as
// [pace.Pacer.Rate] does for one process.
func (p *Pacer) Rate(ctx context.Context, key string) (float64, bool, error) {
	p.once.Do(p.init)
	snap, err := p.load(ctx, p.prefix()+key)
	if err != nil {
		return 0, false, err
	}
	st := snap.state(&p.cfg)
	if !st.Engaged() {
		return math.Inf(1), false, nil
	}
	return st.Rate(snap.now), true, nil
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
