package pacecore

import "time"

// Quota is a quota the server published on an answer: Remaining requests
// until Reset. The zero Quota is none.
type Quota struct {
	Remaining int64
	Reset     time.Time
}

// quota is the part that spreads a published quota over the time left,
// so that the calls that would be sent before the reset at the client's
// pace do not run into it. It caps the pace in every mode.
type quota struct {
	remaining int64
	reset     time.Time // zero: no reading held
	// spreading: the quota was found to bind, until the reset passes.
	spreading bool
	// zeros counts successes in a row that published a remaining 0: a
	// server that says so and still serves does not enforce its quota,
	// and past quotaDisbelief of them it is not believed until it
	// refuses.
	zeros int
}

// read takes the reading of an answer, accepted or refused.
func (q *quota) read(r Quota, accepted, refused bool) {
	switch {
	case refused:
		q.zeros = 0 // it enforces
	case accepted && !r.Reset.IsZero() && r.Remaining == 0:
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
	// The latest answer's reading wins: out of order by a few answers,
	// it is off by as few requests.
	q.remaining, q.reset = r.Remaining, r.Reset
}

// judge decides at now, with the client sending at pace and inflight
// attempts unanswered, whether the quota binds: the calls the pace would
// send before the reset, and those in flight, are more than remain.
func (q *quota) judge(now time.Time, pace float64, inflight int64) {
	if q.reset.IsZero() || !now.Before(q.reset) {
		q.spreading = false
		return
	}
	left := q.reset.Sub(now).Seconds()
	q.spreading = q.spreading || pace*left+float64(inflight) > float64(q.remaining)
}

// rate returns the rate that spreads what remains over the time left at
// now, less what the inflight attempts will spend, and whether the quota
// binds; 0 when nothing remains until the reset.
func (q *quota) rate(now time.Time, inflight int64) (float64, bool) {
	if !q.binds(now) {
		return 0, false
	}
	return max(float64(q.remaining-inflight), 0) / q.reset.Sub(now).Seconds(), true
}

// binds reports whether the quota binds at now.
func (q *quota) binds(now time.Time) bool { return q.spreading && now.Before(q.reset) }
