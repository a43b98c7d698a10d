package pace

import (
	"context"
	"time"
)

// schedule hands out the turns (see keyState.reserveAt).
type schedule struct {
	gen      uint64        // the turns' generation: +1 whenever they are void (see void)
	next     time.Time     // when the next turn is due
	interval time.Duration // between turns: 1/rate.fill
	paused   time.Time     // no attempt before this time
	granted  float64       // the rate of the turns handed out since the last void
	// turns is done when the turns handed out are void (see void); nil
	// until an attempt waits for a turn.
	turns       context.Context
	cancelTurns context.CancelFunc
}

// reserveAt takes a token for an attempt about to be sent at time now,
// and returns how long the attempt must wait for it. A pacer that has not
// engaged for the key returns 0 and a nil reservation, at the cost of one
// atomic load. cancel gives the token back when the attempt is not sent.
//
// Tokens are handed out first come, first served, one interval apart:
// each at the later of now and the previous token's time plus the
// interval (virtual scheduling, the GCRA of ATM networks, with a burst of
// one). A cut, a pause or a large growth of the rate voids the tokens
// handed out before it and starts the schedule again (see reschedule):
// their attempts wake and take new tokens, so no two tokens of one
// schedule are ever due closer than its interval. A
// [golang.org/x/time/rate.Limiter] does not fit here: changing its limit
// re-prices the tokens owed, and new reservations then fall between those
// already handed out, so the paced attempts arrive in clumps that a
// strict limiter refuses. Tokens are
// taken at the time of sending, after any backoff, as in the AWS SDK's
// adaptive mode.
func (s *keyState) reserveAt(now time.Time) (time.Duration, *reservation) {
	d, res, _, _ := s.reserveBy(context.Background(), now)
	return d, res
}

// reserveBy is reserveAt for an attempt that must be sent by ctx's
// deadline: a token due after it is not handed out, and it returns the
// wait and false. Handed out and given back (see reservation.cancel),
// such a token stayed spent whenever another was handed out in between:
// callers that fail fast and call again (a worker pool whose jobs have
// deadlines) pushed the schedule out by an interval for each refusal,
// faster than it drained, until every wait was past every deadline. The
// deadline is read only for a key that has engaged: an idle key's turn
// costs what it did.
//
// While the rate is held through an outage (nothing accepted yet, see
// keyState.throttled), the wait is no forecast: the rate held is a probe's,
// and the first success restarts the key in slow start. A wait past the
// deadline is then not refused, nor does it take a turn: reserveBy
// returns, with false, a channel closed when the hold ends, for the
// attempt to wait on. Refused, the attempts of 1000 clients held at
// AIMD's 125/s failed at 1 to 2 s on deadlines of 8 s, in an outage of
// 1 s.
func (s *keyState) reserveBy(ctx context.Context, now time.Time) (time.Duration, *reservation, bool, <-chan struct{}) {
	if !s.engaged.Load() {
		return 0, nil, true, nil
	}
	dl, hasDeadline := ctx.Deadline()
	s.mu.Lock()
	defer s.mu.Unlock()
	start := now
	if s.sched.paused.After(start) {
		start = s.sched.paused
	}
	if s.sched.next.After(start) {
		start = s.sched.next
	}
	if hasDeadline && start.After(now) && start.After(dl) {
		if !s.outage.holding {
			return start.Sub(now), nil, false, nil
		}
		if s.outage.unheld == nil {
			s.outage.unheld = make(chan struct{})
		}
		return start.Sub(now), nil, false, s.outage.unheld
	}
	s.sched.next = start.Add(s.sched.interval)
	if s.sched.turns == nil {
		s.sched.turns, s.sched.cancelTurns = context.WithCancel(context.Background())
	}
	return start.Sub(now), &reservation{s: s, at: start, next: s.sched.next, gen: s.sched.gen, turns: s.sched.turns}, true, nil
}

// reservation is a token taken by [keyState.reserveAt].
type reservation struct {
	s    *keyState
	at   time.Time // when the token is due
	next time.Time // the next token's time it set
	gen  uint64    // the generation of the rate the token was taken at
	// turns is done when the token is void: its attempt stops waiting
	// for it and takes a new one.
	turns context.Context
}

// cancel gives the token back if no later one was handed out since: a
// token in the middle of the schedule stays spent, which only spaces the
// attempts a little more.
func (r *reservation) cancel() {
	if r == nil {
		return
	}
	r.s.mu.Lock()
	defer r.s.mu.Unlock()
	if r.s.sched.next.Equal(r.next) {
		r.s.sched.next = r.at
	}
}

// stale reports whether the rate or the pause changed since the token was
// handed out: its time is void, and the attempt takes a new token.
func (r *reservation) stale() bool {
	if r == nil {
		return false
	}
	r.s.mu.Lock()
	defer r.s.mu.Unlock()
	return r.gen != r.s.sched.gen
}

// generation returns the generation of the rate the attempt was paced at,
// 0 when it was not paced.
func (r *reservation) generation() uint64 {
	if r == nil {
		return 0
	}
	return r.gen
}

// reschedule voids the turns handed out so far and starts the schedule
// again at the rate in force, one interval from now (after a throttle,
// the server has just said it is over its limit). The caller holds s.mu.
func (s *keyState) reschedule(now time.Time) {
	s.void()
	s.sched.granted = s.rate.fill
	s.sched.next = now.Add(s.sched.interval)
}

// setRate sets the rate of the tokens handed out from now on.
func (s *keyState) setRate(r, minRate float64) {
	r = max(r, minRate)
	s.rate.fill = r
	s.sched.interval = time.Duration(float64(time.Second) / r)
	s.engaged.Store(true)
	s.leaveSlowStart()
}

// void makes the turns handed out so far void, and wakes their attempts
// to take new ones. The caller holds s.mu.
func (s *keyState) void() {
	s.sched.gen++
	if s.sched.cancelTurns != nil {
		s.sched.cancelTurns()
		s.sched.turns, s.sched.cancelTurns = nil, nil
	}
}

// pause keeps every attempt of the key from being sent before now+d.
func (s *keyState) pause(now time.Time, d time.Duration, minRate float64) {
	if !s.engaged.Load() {
		// The rate the client was sending at: smoothed, or over the
		// bucket so far (minElapsed at least), as a first cut reads it.
		// Smoothed alone it is 0 over a key's first half-second, and a
		// quota spent there (a success with RateLimit r=0) engaged the
		// key at MinRate: 0.5/s, seconds of growth from a client that
		// had sent 20 at once.
		base := max(s.meter.measured, s.meter.bucketRate(now, minElapsed), minRate)
		s.setRate(base, minRate)
	}
	if until := now.Add(d); until.After(s.sched.paused) {
		s.sched.paused = until
		s.void()
	}
}
