// Package pace spaces the attempts of a [retry.Transport] at a rate it
// learns from each host's throttling, so that fewer are refused in the
// first place: the adaptive [Pacer], CUBIC or AIMD, with TCP's slow start
// for new hosts and an outage told apart from a rate limit by its
// silence. It plugs into the Transport through [retry.Pacer]:
//
//	rt := retry.New(nil, retry.WithPacer(&pace.Pacer{}))
package pace

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"sync"
	"time"

	"github.com/backoff-jitter/retry"
	"github.com/backoff-jitter/retry/internal/clock"
	"github.com/backoff-jitter/retry/internal/pacecore"
)

// Adapt is how a [Pacer] adjusts its rate after throttling.
type Adapt uint8

const (
	// AdaptCubic, the zero value, cuts the rate to 0.7 times the measured
	// sending rate on a throttle and grows it back along a cubic curve that
	// returns to the old rate, then probes above it: the algorithm of the
	// AWS SDK's "adaptive" retry mode (itself TCP CUBIC, RFC 9438).
	AdaptCubic Adapt = iota
	// AdaptAIMD halves the rate on a throttle and adds a fixed amount per
	// second without one (additive increase, multiplicative decrease).
	AdaptAIMD
)

// Pacer spaces the attempts sent to each key (the host, unless Key says
// otherwise) at a rate it learns from the key's throttling, so that fewer
// requests are refused in the first place. It is opt-in
// ([retry.WithPacer]) and may be shared by several Transports. Its rules,
// for each key:
//
//   - Slow start. A new key has at most InitialWindow (10) attempts
//     unanswered at once; every answer opens one slot more, and the first
//     answer no attempt waits for ends slow start, as does its first
//     second.
//   - Idle until clearly throttled. A cumulative sum (CUSUM) of the
//     answers, ln 2 for each throttle and -ln 1.5 for each success, never
//     below zero, engages the key when it reaches ln 100: seven refusals
//     in a row, three among a new key's first answers, a share of a half
//     over twenty answers or so; refusals at random up to a tenth almost
//     never. Not while fewer than a quarter of the current half-second's
//     attempts are answered and 0.4 of those or fewer refused. A throttle
//     with a server hint engages the key at once, as does the first after
//     a restart. Idle costs a few atomic operations and no allocation per
//     attempt.
//   - Turns. An engaged key hands out turns first come, first served, one
//     interval (1/rate) apart, taken after any backoff. A cut, a pause or
//     a large growth of the rate voids the turns handed out, and their
//     attempts take new ones. A wait that would end past the request's
//     deadline is not begun (see Wait).
//   - Cuts. A throttle of an attempt paced at the rate in force cuts it
//     to 0.7 times ([AdaptCubic]; 0.5 with [AdaptAIMD]); the first, from
//     the rate the client was measured sending at. While refused, the rate
//     the server still accepts is its capacity: a first cut goes at least
//     to 0.9 times it, later cuts no further. A first throttle with 0.4 of
//     the answers or fewer refused cuts to 0.9 times the share accepted,
//     if that is less of a cut. Throttles of attempts sent before a cut
//     cut nothing more: one cut answers one burst.
//   - Growth. Successes grow the rate back along CUBIC's curve, or by one
//     request per second per second (AIMD), never beyond 1.25 times the
//     rate the client was measured sending at, never below MinRate.
//   - A steady limit. Throttles at rates within 15 % of each other find
//     one limit; the rate then holds at 0.95 times it, for 2 s, doubled
//     for each throttle more that finds it, up to 8 s, before it probes
//     above again.
//   - Fixed windows. The success that ends a silence (twelve refusals in
//     a row, three of them cuts) raises the rate to 0.9 times the
//     successes since the last silence over the time since.
//   - Server hints. A throttle's Retry-After (or another
//     [retry.ServerWait] header), or a RateLimit field that says no quota
//     remains, pauses the key until the time it names; the waiting
//     attempts then leave one interval apart.
//   - Outages. Two cuts or more, half a second without a success and ten
//     times the usual spacing of successes make a silence an outage's:
//     the rate holds there, probing, and the success that ends it
//     restarts the key, in slow start, its rates forgotten. A key refused
//     from its first attempt on holds its rate at a quarter of the first
//     cut's, probing, until a success.
//   - Shedding. Refusals that do not fall as the rate falls (a load
//     balancer shedding a share at random) are no limit: a chain of cuts
//     is tested in two stages, at lower rates; refused as often there,
//     the key goes back to idle and remembers the share, and only
//     refusals well above it engage the key again.
//   - A quiet spell. An idle key that hears no answer for 2 s forgets the
//     rates it measured.
//   - Memory. Keys not in use are forgotten (see MaxKeys).
//
// Refusal sets aside throttles that are not about the rate. docs/pacing.md
// is the user's guide; docs/pacing-design.md gives the measurements behind
// each rule.
//
// The zero value is ready to use. Fields must not be changed after first
// use. A Pacer is safe for concurrent use.
type Pacer struct {
	// Key maps a request to the limit it counts against. Nil means the
	// request's host (URL.Host); an API limited per account (Route 53
	// allows five requests a second per account) keys by the account.
	// It is called from concurrent RoundTrips and must be safe for
	// concurrent use.
	Key func(*http.Request) string

	// MinRate is the slowest the Pacer paces a key, in requests per
	// second. Zero means 0.5.
	MinRate float64

	// Adapt chooses how the rate is adjusted. Zero means [AdaptCubic].
	Adapt Adapt

	// Refusal, if not nil, reports whether a throttled outcome refused
	// the attempt for the rate it was sent at. Nil means every throttled
	// outcome did. Some refusals that a classifier rightly calls
	// Throttled (refused before processing, safe to replay) are not about
	// the rate: Route 53's PriorRequestNotComplete says a change to the
	// zone is still pending, and comes at any rate. Learned as a rate
	// limit, they would cut the rate and hold it below the real limit;
	// outcomes that Refusal rejects teach the Pacer nothing.
	// [github.com/backoff-jitter/retry/awsretry.RateRefusal] is one for
	// AWS APIs. Refusal may read the response's header and peek at its
	// body with [retry.PeekBody], not consume it. It is called from
	// concurrent RoundTrips and must be safe for concurrent use.
	Refusal func(retry.Feedback) bool

	// InitialWindow is how many attempts a key that is new to the Pacer
	// may have unanswered at once, in slow start (see above). Zero means
	// 10; a negative value turns slow start off, so that nothing waits
	// before the key engages (see "Idle until clearly throttled" above).
	InitialWindow int

	// MaxKeys is the most keys the Pacer remembers while they are not in
	// use. Zero means 10,000. A key with no attempt in flight or waiting
	// is forgotten once unused for 10 minutes, and, beyond MaxKeys keys,
	// the longest unused go first, those that never engaged before those
	// that did; a forgotten key that comes back starts afresh, in slow
	// start. So a crawler, a webhook dispatcher or a Key per tenant holds
	// a bounded table. Keys in use are never forgotten: while more than
	// MaxKeys are, the table is looked through again once it has grown a
	// quarter of MaxKeys past them, not for every new key.
	MaxKeys int

	keys    keyTable
	cfgOnce sync.Once
	cfg     pacecore.Config

	// Seams for tests: the clock, the sleep, and time.AfterFunc for slow
	// start's time limit. Nil means the real ones.
	now       func() time.Time
	sleep     func(ctx context.Context, d time.Duration) error
	afterFunc func(d time.Duration, f func()) (stop func() bool)
}

// Wait returns when the next attempt of req may be sent: while req's key
// is in slow start, once it holds a slot of the window; once the key has
// engaged, at its turn. A turn made void while the attempt waits for it
// (the rate was cut, the key paused or restarted) is given up for a new
// one. A wait that would end past ctx's deadline is not begun, and takes
// no turn: Wait returns an error that wraps [context.DeadlineExceeded] at
// once; except while the key holds its rate through an outage (refused
// from its first attempt on, or through a silence as long as an
// outage's), when the wait is a probe's, no forecast:
// the attempt then waits, with no turn, for the hold to end (a success)
// or for ctx. It implements [retry.Pacer].
func (p *Pacer) Wait(ctx context.Context, req *http.Request) (retry.Turn, error) {
	s := p.acquire(req)
	t, err := p.wait(ctx, s)
	if err != nil {
		s.finish(p.clock())
	}
	return t, err
}

// wait is Wait for the key's entry s.
func (p *Pacer) wait(ctx context.Context, s *entry) (retry.Turn, error) {
	for {
		slot, err := s.admit(ctx)
		if err != nil {
			return nil, err
		}
		if slot {
			// In slow start: the key has not engaged, no turn to take.
			s.sent.Add(1) // the sending rate counts attempts sent, not waiting
			return &turn{s: s, slot: true}, nil
		}
		now := p.clock()
		d, res, ok, held := s.reserve(ctx, now)
		if !ok && held != nil {
			// The rate is held through an outage: the wait it gives
			// says nothing of when the server answers again. The
			// attempt waits, with no turn, for the hold to end (a
			// success restarts the key), or for its context.
			select {
			case <-held:
				continue
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		if !ok {
			return nil, &retry.TurnTooLate{Wait: d}
		}
		if res == nil {
			s.sent.Add(1)
			return (*idleTurn)(s), nil // not engaged: no allocation
		}
		if d > 0 {
			if err := p.waitTurn(ctx, d, res); err != nil {
				res.cancel()
				return nil, err
			}
			if res.stale() {
				continue
			}
		}
		s.sent.Add(1)
		return &turn{s: s, gen: res.gen}, nil
	}
}

// waitTurn waits d for the turn res, or until it is void. Only the
// context's end is an error.
func (p *Pacer) waitTurn(ctx context.Context, d time.Duration, res *reservation) error {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(res.turns, cancel)
	defer stop()
	sleep := p.sleep
	if sleep == nil {
		sleep = clock.Sleep
	}
	if err := sleep(wctx, d); err != nil && ctx.Err() != nil {
		return ctx.Err()
	}
	return nil
}

func (p *Pacer) clock() time.Time {
	if p.now != nil {
		return p.now()
	}
	return time.Now()
}

// turn is an attempt's turn on a key that has engaged, or its slot of
// slow start.
type turn struct {
	s    *entry
	slot bool   // holds a slot of slow start
	gen  uint64 // the generation of the rate it was paced at; 0: not paced
}

func (t *turn) Done(f retry.Feedback) {
	now := t.s.p.clock()
	t.s.answer(f, t.slot, t.gen, now)
	t.s.finish(now)
}

func (t *turn) Abandon() {
	if t.slot {
		t.s.release()
	}
	t.s.finish(t.s.p.clock())
}

// idleTurn is the turn of an attempt on a key that has neither engaged nor
// is in slow start: the key's entry itself, so that it costs no
// allocation.
type idleTurn entry

func (t *idleTurn) Done(f retry.Feedback) {
	s := (*entry)(t)
	now := s.p.clock()
	s.answer(f, false, 0, now)
	s.finish(now)
}

func (t *idleTurn) Abandon() {
	s := (*entry)(t)
	s.finish(s.p.clock())
}

// config returns the settings the keys decide with, read at first use.
func (p *Pacer) config() *pacecore.Config {
	p.cfgOnce.Do(func() {
		p.cfg = pacecore.Config{Adapt: pacecore.Adapt(p.Adapt), MinRate: pacecore.DefaultMinRate, InitialWindow: p.InitialWindow}
		if p.MinRate > 0 {
			p.cfg.MinRate = p.MinRate
		}
		if p.InitialWindow == 0 {
			p.cfg.InitialWindow = pacecore.DefaultInitialWindow
		}
	})
	return &p.cfg
}

// Validate reports invalid settings.
func (p *Pacer) Validate() error {
	switch {
	case p.MinRate < 0 || math.IsNaN(p.MinRate) || math.IsInf(p.MinRate, 0):
		return fmt.Errorf("pace: Pacer.MinRate %v is not a finite positive rate", p.MinRate)
	case p.Adapt > AdaptAIMD:
		return fmt.Errorf("pace: Pacer.Adapt %d is not a known algorithm", p.Adapt)
	}
	return nil
}

// Rate returns the rate at which p currently paces key, in requests per
// second, and whether p has engaged for it at all (+Inf when not).
func (p *Pacer) Rate(key string) (float64, bool) {
	v, ok := p.keys.m.Load(key)
	if !ok {
		return math.Inf(1), false
	}
	s := v.(*entry)
	if !s.engaged.Load() {
		return math.Inf(1), false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.st.Rate(), true
}
