package pacecore

import "time"

// schedule hands out the turns (see State.reserve).
type schedule struct {
	gen      uint64        // the turns' generation: +1 whenever they are void (see void)
	next     time.Time     // when the next turn is due
	interval time.Duration // between turns: 1/rate.fill
	paused   time.Time     // no attempt before this time
	granted  float64       // the rate of the turns handed out since the last void
}

// reserve hands out a turn for an attempt about to be sent at now, and
// says how long the attempt must wait for it. A key that has not engaged
// hands out none: the attempt goes at once.
//
// Turns are handed out first come, first served, one interval apart
// (virtual scheduling, ATM's GCRA, with a burst of one), at the time of
// sending, after any backoff, as in the AWS SDK's adaptive mode. A cut, a
// pause or a large growth of the rate voids the turns handed out and
// starts again (see reschedule), so no two turns of one schedule are due
// closer than its interval. (A [golang.org/x/time/rate.Limiter] whose
// limit changes re-prices the tokens owed, and new reservations fall
// between old ones, in clumps a strict limiter refuses.)
//
// A turn due after the deadline is not handed out: the attempt is
// refused, with the wait it would have had, and takes no turn (spent,
// such turns pushed the schedule of callers that fail fast and call
// again past every deadline). But while the key is held, or has never
// had a success, its rate is a probe's or a guess, no forecast: the
// attempt waits, with no turn, for the hold to end, unless a server's
// pause alone ends past the deadline (a storm's callers queued past
// their deadlines in a cold outage failed at once, though the server
// came back within a second).
func (s *State) reserve(now, deadline time.Time) Grant {
	if !s.Engaged() {
		return Grant{}
	}
	start := now
	if s.sched.paused.After(start) {
		start = s.sched.paused
	}
	if s.sched.next.After(start) {
		start = s.sched.next
	}
	g := Grant{Turn: start.Sub(now)}
	if !deadline.IsZero() && start.After(now) && start.After(deadline) {
		held := s.WaitsHeld() && (s.mode == ModeHeld || !s.sched.paused.After(deadline))
		g.Held, g.Refused = held, !held
		return g
	}
	s.sched.next = start.Add(s.sched.interval)
	g.Paced, g.At, g.Next, g.Gen = true, start, s.sched.next, s.sched.gen
	return g
}

// reschedule voids the turns handed out so far and starts the schedule
// again at the rate in force, one interval from now (after a throttle,
// the server has just said it is over its limit).
func (s *State) reschedule(now time.Time) {
	s.void()
	s.sched.granted = s.rate.fill
	s.sched.next = now.Add(s.sched.interval)
}

// setRate sets the rate of the turns handed out from now on, and engages
// the key.
func (s *State) setRate(r, minRate float64) {
	r = max(r, minRate)
	s.rate.fill = r
	s.sched.interval = time.Duration(float64(time.Second) / r)
	s.leaveSlowStart()
	if !s.Engaged() {
		s.mode = ModePaced
	}
}

// void makes the turns handed out so far void: their attempts wake to
// take new ones.
func (s *State) void() {
	s.sched.gen++
	s.fx.Void = true
}

// pause keeps every attempt of the key from being sent before now+d.
func (s *State) pause(now time.Time, d time.Duration, minRate float64) {
	if !s.Engaged() {
		// The rate the client was sending at: smoothed, or over the
		// bucket so far (minElapsed at least), as a first cut reads it.
		// Smoothed alone it is 0 over a key's first bucket, and a quota
		// spent there (a success with RateLimit r=0) would engage the
		// key at MinRate, seconds of growth below what it sent.
		base := max(s.meter.measured, s.meter.bucketRate(s.meter.sent, now, minElapsed), minRate)
		s.setRate(base, minRate)
	}
	if until := now.Add(d); until.After(s.sched.paused) {
		s.sched.paused = until
		s.void()
	}
}
