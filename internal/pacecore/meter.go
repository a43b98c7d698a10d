package pacecore

import (
	"math"
	"time"
)

// meter measures the rates the key is sent and accepted at, in buckets of
// BucketWidth.
type meter struct {
	okOnce     bool  // a success has been seen
	sent       int64 // attempts sent in the current bucket
	sentBefore int64 // attempts sent in the buckets before it
	ok         int64 // successes in the current bucket
	refused    int64 // throttles in the current bucket
	// lastOK and lastRefused are the successes and throttles of the
	// bucket before.
	lastOK, lastRefused int64
	measured            float64   // smoothed sending rate, requests per second
	accepted            float64   // smoothed success rate, requests per second
	bucket              time.Time // start of the current bucket
	sampled             bool      // a whole bucket has been measured
	// drained is when the key's first throttle (since it was last idle)
	// found the server's bucket empty, and drainedOK and drainedRefused
	// count the successes and throttles since (see acceptedRate); zero:
	// none since (a key engaged by a server's hint has not drained it).
	drained                   time.Time
	drainedOK, drainedRefused int64
	// suspicion is the idle key's CUSUM (see State.suspect), +Inf
	// after a restart, and suspectOK the current bucket's successes it
	// has weighed.
	suspicion float64
	suspectOK int64
}

// count adds the attempts sent and the successes counted without the
// lock (see entry).
func (m *meter) count(sent, ok int64) {
	m.sent += sent
	if ok > 0 {
		m.ok += ok
		m.okOnce = true
	}
}

// sends returns the attempts the key has sent since it was created.
func (m *meter) sends() int64 { return m.sentBefore + m.sent }

// bucketRate returns the rate of n events of the current bucket, over the
// time since it began or floor, whichever is longer: of its attempts
// sent, the sending rate before a whole bucket is measured.
func (m *meter) bucketRate(n int64, now time.Time, floor time.Duration) float64 {
	return float64(n) / max(now.Sub(m.bucket), floor).Seconds()
}

// answeredShare returns the share of the current bucket's answers
// refused, and whether it reads the share of the attempts sent: whether
// the server has answered a quarter of them or more. A burst that it
// answers far slower than it was sent says less of the share than of the
// server's capacity.
func (m *meter) answeredShare() (share float64, read bool) {
	refused := float64(m.refused)
	answered := refused + float64(m.ok)
	if answered == 0 {
		return 0, false
	}
	return refused / answered, 4*answered >= float64(m.sent)
}

// takeSent ends the current bucket's count of attempts sent, adding it to
// sentBefore, and returns it.
func (m *meter) takeSent() int64 {
	n := m.sent
	m.sent = 0
	m.sentBefore += n
	return n
}

// takeOK ends the current bucket's count of successes, and returns it.
func (m *meter) takeOK() int64 {
	n := m.ok
	m.ok = 0
	return n
}

// weigh folds okN successes into the idle key's CUSUM: each takes the
// same away, and the sum stops at zero, so that they count at once.
func (m *meter) weigh(okN int64) {
	if okN > 0 {
		m.suspicion = max(0, m.suspicion+float64(okN)*math.Log((1-engageHigh)/(1-engageLow)))
	}
}

// measure folds the attempts sent in each half-second bucket that has
// ended into the smoothed sending rate.
func (s *State) measure(now time.Time) {
	if s.meter.bucket.IsZero() {
		s.meter.bucket = now
	}
	if elapsed := now.Sub(s.meter.bucket); elapsed >= BucketWidth {
		sec := elapsed.Seconds()
		okN, refused := s.meter.takeOK(), s.meter.refused
		if !s.Engaged() {
			s.meter.weigh(okN - s.meter.suspectOK)
			s.shed.idleBucket(okN, refused)
		}
		s.meter.suspectOK = 0
		s.meter.refused = 0
		s.meter.lastOK, s.meter.lastRefused = okN, refused
		sent, ok := float64(s.meter.takeSent())/sec, float64(okN)/sec
		switch {
		case elapsed >= quietTime && !s.Engaged():
			// Quiet for quietTime: what the key sends next is no
			// continuation, and folded in, the quiet bucket would pull
			// a burst's first cut far below its rate. Measured afresh.
			s.meter.measured, s.meter.accepted, s.meter.sampled = 0, 0, false
		case !s.meter.sampled:
			// The first bucket is the estimate, not a fifth of it.
			s.meter.measured, s.meter.accepted, s.meter.sampled = sent, ok, true
		default:
			s.meter.measured = sent*smoothing + s.meter.measured*(1-smoothing)
			s.meter.accepted = ok*smoothing + s.meter.accepted*(1-smoothing)
		}
		s.meter.bucket = now
	}
}

// open begins a new key's first bucket when its first attempt asks for
// a slot of slow start, not with its first answer: counted over what was
// left of the first round trip, its attempts read as several times the
// rate they were sent at. (Without slow start, the first bucket begins
// with the first answer.)
func (m *meter) open(now time.Time) {
	if m.bucket.IsZero() {
		m.bucket = now
	}
}

// inBucket reports whether now falls in the current bucket: an idle key's
// success there changes nothing but the count (see answer), and the
// Pacer's entry counts it without the lock.
func (m *meter) inBucket(now time.Time) bool {
	return !m.bucket.IsZero() && now.Before(m.bucket.Add(BucketWidth))
}

// acceptedRate returns the rate of successes: the smoothed rate, or the
// current bucket's if that is higher (fresher) and counts at least
// minSamples successes.
//
// A token bucket's burst, accepted at once, inflates both, and every cut
// of a cascade would stop just below it. Once a throttle found the bucket
// empty, and while the client keeps it so (drainedShare of the answers
// since refused: far above a limit, not shed at random), the successes
// since come at the rate it refills: for drainWindow after the first
// throttle, the rate is no more than theirs (minSamples at least) over
// the time since.
func (s *State) acceptedRate(now time.Time) float64 {
	m := &s.meter
	c := m.accepted
	if n := m.ok; n >= minSamples {
		c = max(c, m.bucketRate(n, now, minElapsed))
	}
	if e := now.Sub(m.drained); !m.drained.IsZero() && e > 0 && e < drainWindow &&
		float64(m.drainedRefused) > drainedShare*float64(m.drainedOK+m.drainedRefused) {
		// Over the time since, not minElapsed, which would hold a client
		// of thousands a second far below what it is accepted at.
		c = min(c, float64(max(m.drainedOK, minSamples))/e.Seconds())
	}
	return c
}

// drain notes the key's first throttle since it was idle: the server's
// bucket is empty (see acceptedRate).
func (m *meter) drain(now time.Time) {
	m.drained, m.drainedOK, m.drainedRefused = now, 0, 0
}
