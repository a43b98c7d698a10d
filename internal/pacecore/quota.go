package pacecore

import "time"

// Quota is a quota the server published on an answer: Remaining requests
// until Reset. The zero Quota is none.
type Quota struct {
	Remaining int64
	Reset     time.Time
}

// quota spreads a published quota over the time left, so that the
// client's pace does not run into it; it caps the pace in every mode:
//
//	loose     no reading, or one that does not bind: it changes nothing
//	spreading a reading binds (until its reset): turns go at what remains
//	          over the time left, or wait for the reset when nothing does
//	probing   past the reset of a reading that bound: one attempt goes to
//	          read the new quota, and the others wait for its answer
type quota struct {
	remaining int64
	reset     time.Time // zero: no reading held
	spreading bool      // a reading binds; past its reset, until the new quota is judged
	// probeUntil: past a reset, the others wait until then for the answer
	// of the attempt that went to read the new quota.
	probeUntil time.Time
	// zeros: successes in a row, before the reset, publishing a 0 the
	// reading held said too. A server that serves past its 0 does not
	// enforce it: after minSamples, it is not believed until it refuses.
	zeros int
}

// read takes the reading of an answer, accepted or refused, at now.
func (q *quota) read(now time.Time, r Quota, accepted, refused bool) {
	switch {
	case refused:
		q.zeros = 0 // it enforces
	case accepted && !r.Reset.IsZero() && r.Remaining == 0 && q.remaining == 0 && now.Before(q.reset):
		q.zeros++ // an enforcing server serves its last request once
	case accepted && r.Remaining > 0:
		q.zeros = 0
	}
	if r.Reset.IsZero() {
		return
	}
	if q.zeros >= minSamples {
		*q = quota{zeros: q.zeros}
		return
	}
	// The new quota is read; the latest reading wins (out of order, it is
	// off by a few).
	q.remaining, q.reset, q.probeUntil = r.Remaining, r.Reset, time.Time{}
}

// judge decides at now whether the quota binds: the calls the client's
// pace would send before the reset, and the inflight ones, are more than
// remain. Once it binds, it holds while the client sends or waits for a
// reset: a spreading client's pace spends the quota by design, and a
// reading says nothing of after its reset (a sliding window frees a
// request at a time), so the pace cannot tell that it no longer binds.
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

// rate returns the rate that spreads what remains, less the inflight
// attempts, over the time left, and whether the quota binds.
func (q *quota) rate(now time.Time, inflight int64) (float64, bool) {
	if !q.spreading || !now.Before(q.reset) {
		return 0, false
	}
	return max(float64(q.remaining-inflight), 0) / q.reset.Sub(now).Seconds(), true
}

// probe reports, past a binding reading's reset, whether an attempt at
// now goes to read the new quota, or waits for its answer until until.
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

// spent reports whether the quota binds with nothing left to spread.
func (q *quota) spent(now time.Time, inflight int64) bool {
	r, ok := q.rate(now, inflight)
	return ok && r == 0
}

// spread reads an answer's quota and judges it. It reports whether the
// attempts waiting for a new quota may ask again, and whether the turns
// handed out at the old pace are void (they would run into a newly spent
// quota, or leave a gap in a new one).
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

// reserveQuota hands out an attempt's turn when a published quota
// decides it, and reports whether it did: at the quota's pace (or the
// rate in force, if lower), or a wait for the reset or for the probe's
// answer. A key with no reading pays nothing here.
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
