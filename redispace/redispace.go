// Package redispace is a [retry.Pacer] for a fleet: many processes that
// share one quota (Route 53 allows five requests a second for a whole AWS
// account, whatever the number of tools and replicas calling it) learn one
// rate per key, kept in Redis, and take turns from one schedule, so that
// together they pace at the limit instead of each at a rate of its own.
//
// It runs the decision core of package pace's Pacer, the same code, over
// a state that the fleet shares: each key's state is one Redis hash, and
// every step of it (an attempt asking for a turn, an answer) reads the
// state, steps it in Go with the time on Redis's clock, and writes it back
// only if no other process wrote it meanwhile, else steps again from
// what that process wrote (compare-and-set). So the fleet learns a rate,
// holds through an outage, tells random shedding from a limit and waits
// for slow start's window as one [pace.Pacer] would, with every rule of
// its doc; what differs is only how a process learns that a turn it waits
// for was made void (it looks halfway through a long wait and just
// before the turn, where pace's waiters are woken), and that waits for a
// slot or for a hold to end poll. A
// key nobody throttled is not paced: a turn costs one script call and no
// wait, and a success one more.
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
	"math"
	"net/http"
	"sync"
	"time"

	"github.com/backoff-jitter/retry"
	"github.com/backoff-jitter/retry/internal/clock"
	"github.com/backoff-jitter/retry/internal/pacecore"
	"github.com/backoff-jitter/retry/pace"
	"github.com/redis/go-redis/v9"
)

// Defaults of a Pacer whose fields are zero.
const (
	defaultPrefix     = "retry:pace:"
	defaultTimeout    = 50 * time.Millisecond
	defaultRetryAfter = time.Second
	// slotPoll is about how often an attempt waiting for a slot of slow
	// start asks again at first; it asks less often the longer it waits,
	// up to slotPollMax.
	slotPoll    = 5 * time.Millisecond
	slotPollMax = 40 * time.Millisecond
	// heldPoll is about how often an attempt whose wait a rate held
	// through an outage would take past its deadline asks whether the
	// hold has ended: 75 ms on average, spread over the interval.
	heldPoll = 100 * time.Millisecond
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
	// [pace.Pacer.Key]. Nil means the request's host. It must be safe
	// for concurrent use.
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
	// unanswered at once, in slow start, as [pace.Pacer.InitialWindow]:
	// every answer opens one slot more, and it ends as pace's does. Zero
	// means 10; a negative value turns it off.
	InitialWindow int

	// Refusal, if not nil, reports whether a throttled outcome refused the
	// attempt for the rate, as [pace.Pacer.Refusal]: the others (a
	// conflict, such as Route 53's PriorRequestNotComplete) teach the
	// fleet nothing. Nil means every throttled outcome did. The default
	// Fallback has it too. It must be safe for concurrent use.
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
	rounds    rounds
	fleet     fleetClock
	cfg       pacecore.Config
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
		return errors.New("retry: redispace.Pacer.Client is nil")
	case p.MinRate < 0 || math.IsNaN(p.MinRate) || math.IsInf(p.MinRate, 0):
		return fmt.Errorf("retry: redispace.Pacer.MinRate %v is not a finite positive rate", p.MinRate)
	case p.Adapt > pace.AdaptAIMD:
		return fmt.Errorf("retry: redispace.Pacer.Adapt %d is not a known algorithm", p.Adapt)
	case p.Timeout < 0 || p.RetryAfter < 0:
		return errors.New("retry: redispace.Pacer.Timeout and RetryAfter must not be negative")
	}
	return nil
}

// init resolves the settings once.
func (p *Pacer) init() {
	p.cfg = pacecore.Config{Adapt: pacecore.Adapt(p.Adapt), MinRate: pacecore.DefaultMinRate, InitialWindow: p.InitialWindow}
	if p.MinRate > 0 {
		p.cfg.MinRate = p.MinRate
	}
	if p.InitialWindow == 0 {
		p.cfg.InitialWindow = pacecore.DefaultInitialWindow
	}
	p.fallback = p.Fallback
	if p.fallback == nil {
		p.fallback = p.defaultFallback()
	}
}

// config returns the settings the keys decide with.
func (p *Pacer) config() *pacecore.Config {
	p.once.Do(p.init)
	return &p.cfg
}

// turn is an attempt's turn in the fleet's schedule, or its slot of slow
// start.
type turn struct {
	p    *Pacer
	key  string
	gen  uint64 // the generation of the rate it was paced at; 0: not paced
	slot bool   // holds a slot of slow start
}

// Done tells the fleet what the attempt met: a throttle may cut the rate,
// a success grows it, and the server's requested wait pauses the key. A
// success of a key that is not engaged, within its meter's bucket, is
// only counted.
func (t *turn) Done(f retry.Feedback) {
	p, class := t.p, f.Class
	ev := pacecore.Event{Kind: pacecore.Answer, Slot: t.slot, Class: class, Answered: f.Response != nil,
		Hinted: f.Hinted, Wait: f.Wait, Gen: t.gen, ForRate: true}
	if class == retry.Throttled && p.Refusal != nil {
		ev.ForRate = p.Refusal(f)
	}
	if !t.slot && (class != retry.Throttled && class != retry.Success || !ev.ForRate) {
		return // says nothing of the server's rate limit, and holds no slot
	}
	op := opRead
	if class == retry.Success {
		op = opOK
	}
	ctx := context.Background()
	snap, _, err := p.load(ctx, t.key, op)
	if err == nil && (class != retry.Success || t.slot || f.Hinted || !p.counted(snap)) {
		_, _, err = p.update(t.key, &snap, func(st *pacecore.State, now time.Time, n, ok int64) (pacecore.Effects, int64) {
			ev.Sent, ev.OK = n, ok
			return st.Step(now, ev), 0
		}, nil)
	}
	if err != nil {
		p.trip(err)
	}
}

// counted reports whether a success counted by load needs no step: the
// key is not engaged and its meter's bucket lasts, so the state changes
// no other way (package pace's Pacer counts such a success without its
// lock).
func (p *Pacer) counted(snap snapshot) bool {
	st := pacecore.New(p.config())
	if st.UnmarshalBinary(snap.state) != nil {
		return false
	}
	return !st.Engaged() && snap.now.Before(st.BucketEnd())
}

// Abandon gives a slot of slow start back; a turn in the schedule stays
// spent (the schedule moves on).
func (t *turn) Abandon() {
	if t.slot {
		t.p.stepAlone(t.key, pacecore.Event{Kind: pacecore.Release})
	}
}

// Rate returns the rate at which the fleet currently paces key, in
// requests per second, and whether it has engaged for it at all (+Inf
// when not), as [pace.Pacer.Rate] does for one process.
func (p *Pacer) Rate(ctx context.Context, key string) (float64, bool, error) {
	snap, _, err := p.load(ctx, p.prefix()+key, opRead)
	if err != nil {
		return 0, false, err
	}
	st := pacecore.New(p.config())
	if st.UnmarshalBinary(snap.state) != nil || !st.Engaged() {
		return math.Inf(1), false, nil
	}
	return st.Rate(), true, nil
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

func (p *Pacer) clock() time.Time {
	if p.now != nil {
		return p.now()
	}
	return time.Now()
}

// until returns the time from now to dl on the process's clock.
func (p *Pacer) until(dl time.Time) time.Duration { return dl.Sub(p.clock()) }

func (p *Pacer) doSleep(ctx context.Context, d time.Duration) error {
	if p.sleep != nil {
		return p.sleep(ctx, d)
	}
	return clock.Sleep(ctx, d)
}
