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
	remaining  int64
	reset      time.Time // zero: no reading held
	spreading  bool      // a reading binds; past its reset, until the new quota is judged
	probeUntil time.Time // past a reset, others wait this long for the probe's answer
	// zeros: successes in a row past a held 0, before its reset. After
	// minSamples, the quota is not enforced: not believed until a refusal.
	zeros int
}

// read takes an answer's reading, and reports whether what remains grew.
func (q *quota) read(now time.Time, r Quota, refused bool, inflight int64) (grew bool) {
	switch {
	case refused:
		q.zeros = 0 // it enforces
	case !r.Reset.IsZero() && r.Remaining == 0 && q.remaining == 0 && now.Before(q.reset):
		q.zeros++ // an enforcing server serves its last request once
	case r.Remaining > 0:
		q.zeros = 0
	}
	if q.zeros >= minSamples {
		*q = quota{zeros: q.zeros}
	}
	if r.Reset.IsZero() || q.zeros >= minSamples {
		return false
	}
	// Higher than out of order explains (by those in flight): a new window.
	// Within one, the lowest remaining and the earliest reset are truest.
	grew = r.Remaining > q.remaining+inflight
	if !grew && now.Before(q.reset) {
		r.Remaining = min(r.Remaining, q.remaining)
		if q.reset.Before(r.Reset) {
			r.Reset = q.reset
		}
	}
	q.remaining, q.reset, q.probeUntil = r.Remaining, r.Reset, time.Time{}
	return grew
}

// judge decides whether the quota binds: the client's pace until the
// reset, and those in flight, are more than remain. Once bound, it holds
// while the client sends or waits for a reset: a spreading pace spends
// the quota by design, so cannot tell when it no longer binds.
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

// spread reads an answer's quota and judges it: whether the probe's
// waiters may ask again, and whether the old turns are void (spent, grown).
func (s *State) spread(now time.Time, ev Event) (wake, void bool) {
	if ev.Quota.Reset.IsZero() && !ev.Refused {
		return false, false
	}
	inflight := s.meter.unanswered()
	wasSpent, waiting := s.quota.spent(now, inflight), !s.quota.probeUntil.IsZero()
	grew := s.quota.read(now, ev.Quota, ev.Refused, inflight)
	s.quota.judge(now, s.meter.sendRate(now), inflight)
	wake = waiting && s.quota.probeUntil.IsZero()
	if wake || grew && s.quota.spreading || !wasSpent && s.quota.spent(now, inflight) {
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
