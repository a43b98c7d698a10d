package pacecore

import "time"

// Quota is a quota the server published on an answer: Remaining requests
// until Reset. The zero Quota is none.
type Quota struct {
	Remaining int64
	Reset     time.Time
}

// quota is the part that spreads a published quota over the time left,
// so that the calls the client's pace would send before the reset do not
// run into it. It caps the pace in every mode. Its states:
//
//	loose     no reading, or one that does not bind: it changes nothing
//	spreading a reading binds (until its reset): turns go at what remains
//	          over the time left, or wait for the reset when nothing does
//	probing   past the reset of a reading that bound: one attempt goes to
//	          read the new quota, and the others wait for its answer
type quota struct {
	remaining int64
	reset     time.Time // zero: no reading held
	// spreading: a reading was found to bind; it holds past the reset,
	// until a reading of the new quota is judged.
	spreading bool
	// probeUntil: past a reset, an attempt went to read the new quota;
	// others wait for its answer until then.
	probeUntil time.Time
	// zeros counts successes in a row that published a remaining 0
	// while the reading held said so too, before its reset: a server that
	// says so and still serves does not enforce its quota, and past
	// quotaDisbelief of them it is not believed until it refuses.
	zeros int
}

// read takes the reading of an answer, accepted or refused, at now.
func (q *quota) read(now time.Time, r Quota, accepted, refused bool) {
	switch {
	case refused:
		q.zeros = 0 // it enforces
	case accepted && !r.Reset.IsZero() && r.Remaining == 0 && q.remaining == 0 && now.Before(q.reset):
		// Served while the quota it published was spent, and saying so
		// again: an enforcing server gives its last request once.
		q.zeros++
	case accepted && r.Remaining > 0:
		q.zeros = 0
	}
	if r.Reset.IsZero() {
		return
	}
	if q.zeros > quotaDisbelief {
		*q = quota{zeros: q.zeros}
		return
	}
	q.probeUntil = time.Time{} // the new quota is read
	// The latest answer's reading wins: out of order by a few answers,
	// it is off by as few requests.
	q.remaining, q.reset = r.Remaining, r.Reset
}

// judge decides at now, with the client sending at pace and inflight
// attempts unanswered, whether the quota binds: the calls the pace would
// send before the reset, and those in flight, are more than remain. Once
// it binds, it holds while the client sends or waits for a spent quota's
// reset: a client spreading its calls sends at the rate that spends the
// quota, and a reading tells what remains until its reset, not after it
// (a sliding window frees one request at a time), so the pace cannot
// tell that it no longer binds.
func (q *quota) judge(now time.Time, pace float64, inflight int64) {
	if q.spreading {
		q.spreading = pace > 0 || inflight > 0 || q.remaining == 0
		return
	}
	if q.reset.IsZero() || !now.Before(q.reset) {
		return
	}
	q.spreading = pace*q.reset.Sub(now).Seconds()+float64(inflight) > float64(q.remaining)
}

// rate returns the rate that spreads what remains over the time left at
// now, less what the inflight attempts will spend, and whether the quota
// binds: 0 when nothing remains until the reset.
func (q *quota) rate(now time.Time, inflight int64) (float64, bool) {
	if !q.spreading || !now.Before(q.reset) {
		return 0, false
	}
	return max(float64(q.remaining-inflight), 0) / q.reset.Sub(now).Seconds(), true
}

// probe reports, past the reset of a reading that bound, whether an
// attempt at now is the one to read the new quota (go), or waits for its
// answer until until.
func (q *quota) probe(now time.Time) (probing, goes bool, until time.Time) {
	if !q.spreading || now.Before(q.reset) {
		return false, false, time.Time{}
	}
	if now.Before(q.probeUntil) {
		return true, false, q.probeUntil
	}
	q.probeUntil = now.Add(BucketWidth) // an answer comes within it, or another goes
	return true, true, time.Time{}
}

// spent reports whether the quota binds at now with nothing left to
// spread once the inflight attempts are answered.
func (q *quota) spent(now time.Time, inflight int64) bool {
	r, ok := q.rate(now, inflight)
	return ok && r == 0
}

// spread reads the quota an answer published and decides whether it
// binds. It reports whether the attempts waiting to learn a new quota
// may ask again, and whether the turns handed out are void: the quota is
// newly spent, or a new one was read, and the turns handed out ahead at
// the old pace would run into it or leave a gap.
func (s *State) spread(now time.Time, ev Event) (wake, void bool) {
	if ev.Quota.Reset.IsZero() && !ev.Refused {
		return false, false
	}
	inflight := s.meter.unanswered()
	wasSpent, waiting := s.quota.spent(now, inflight), !s.quota.probeUntil.IsZero()
	s.quota.read(now, ev.Quota, ev.Accepted, ev.Refused)
	s.quota.judge(now, s.meter.sendRate(now), inflight)
	wake = waiting && s.quota.probeUntil.IsZero()
	if wake || !wasSpent && s.quota.spent(now, inflight) {
		s.sched.renew(now, 0)
		void = true
	}
	return wake, void
}

// reserveQuota hands out the turn of an attempt at now when a published
// quota decides it, in any mode, and reports whether it did: turns at the
// quota's pace (or the rate in force, if lower), a wait for a spent
// quota's reset, or for the answer of the attempt reading a new quota.
// A key that holds no reading pays nothing here.
func (s *State) reserveQuota(now, deadline time.Time) (Grant, bool) {
	q := &s.quota
	if q.reset.IsZero() {
		return Grant{}, false
	}
	inflight := s.meter.unanswered()
	q.judge(now, s.meter.sendRate(now), inflight)
	if r, ok := q.rate(now, inflight); ok {
		switch {
		case r == 0 && !deadline.IsZero() && q.reset.After(deadline):
			return Grant{TooLate: true, Wait: q.reset.Sub(now)}, true
		case r == 0:
			return Grant{WaitSlot: true, Until: q.reset}, true
		case s.mode == Paced:
			r = min(r, s.Rate(now))
		}
		return s.sched.take(now, r, deadline), true
	}
	if probing, goes, until := q.probe(now); probing && !goes {
		return Grant{WaitSlot: true, Until: until}, true
	}
	return Grant{}, false
}
