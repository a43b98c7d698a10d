package pacecore

import (
	"math"
	"time"
)

// rateCurve is the rate in force and the curve it grows back along.
type rateCurve struct {
	fill    float64   // the rate in force, requests per second
	lastMax float64   // rate at the last throttle
	lastCut time.Time // time of the last throttle
	cutTo   float64   // the rate the last throttle cut to
	window  float64   // seconds the cubic curve takes back to lastMax
	// limit is the rate the throttles have found the limit at (the
	// lowest of theirs, moved halfway toward a probe's; see learn), and
	// steady how many throttles more have found it since the first; 0
	// and 0: none yet.
	limit  float64
	steady int
}

// learn updates the steady limit after a throttle at rate base (the rate
// in force, or the measured sending rate before the key engaged), t
// seconds after the last cut; afterOK if a success came since that cut.
//
// A curve that probes above a steady limit pays for each probe with a
// refusal and a cut, so throttles within steadyBand of each other find
// one limit, the lowest of their rates, and the curve holds below it
// (see hold). A probe's throttle after a whole hold moves the limit
// halfway to its rate, so that timing noise cannot only ever lower it;
// a throttle clearly off the limit begins again. Only a throttle after a
// success finds the limit: the cuts of one fixed window's silence would
// otherwise find one far below the window's (see resume).
func (r *rateCurve) learn(base float64, engaged, afterOK bool, t float64, adapt Adapt) {
	if engaged && !afterOK {
		return
	}
	switch {
	case !engaged || r.limit <= 0 || base > steadyBand*r.limit || base*steadyBand < r.limit:
		r.limit, r.steady = base, 0
	case r.steady > 0 && t > r.reach(adapt)+r.hold().Seconds():
		r.limit, r.steady = (r.limit+base)/2, r.steady+1
	default:
		r.limit, r.steady = min(r.limit, base), r.steady+1
	}
}

// aim sets the curve the rate grows back along, from the rate from (set
// at now, by a cut or by resume) to top and beyond: CUBIC's takes window
// seconds back to top, AIMD's grows from cutTo.
func (r *rateCurve) aim(top, from, minRate float64, now time.Time, adapt Adapt) {
	r.lastMax, r.lastCut, r.cutTo = top, now, max(from, minRate)
	if adapt == Cubic {
		r.window = math.Cbrt(max(top-from, 0) / cubicScale)
	}
}

// hold returns how long the curve holds at plateauShare of a steady
// limit before it probes above it: 0 until a second throttle finds the
// limit, then holdBase, doubled for each find more (fewer refusals spent
// on a limit found again and again), up to holdMax.
func (r *rateCurve) hold() time.Duration {
	if r.steady == 0 {
		return 0
	}
	return min(holdBase<<min(r.steady-1, 8), holdMax)
}

// reach returns the seconds after the last cut at which the curve of
// adapt reaches plateauShare of the steady limit: 0 if the cut left the
// rate there or above.
func (r *rateCurve) reach(adapt Adapt) float64 {
	p := plateauShare * r.limit
	if r.cutTo >= p {
		return 0
	}
	if adapt == AIMD {
		return p - r.cutTo // one request per second per second
	}
	return max(r.window+math.Cbrt((p-r.lastMax)/cubicScale), 0)
}

// throttled cuts the rate below the rate the client was sending at.
func (s *State) throttled(now time.Time, adapt Adapt, minRate float64) {
	// Engaged, the rate in force is what the server refused; before, the
	// measured sending rate, or the current bucket's so far.
	base, share := s.rate.fill, 1.0
	if !s.Engaged() {
		defer s.meter.drain(now)
		// The successes so far begin the first cycle (see resume).
		s.outage.cycleStart, s.outage.cycleOK = s.meter.bucket, s.meter.ok
		s.outage.lastOK, s.outage.cutsSinceOK = now, 0 // an outage is timed from here
		s.endHold()
		s.outage.refusedSinceOK = 1
		if sh, read := s.meter.answeredShare(); read {
			share = sh
		}
		base = s.meter.measured
		if base <= 0 {
			elapsed := minElapsed
			if share <= shedMaxShare {
				elapsed = minElapsedModerate
			}
			base = s.meter.bucketRate(s.meter.sent, now, elapsed)
		}
	}
	s.shed.cut(s, base, now)
	s.rate.learn(base, s.Engaged(), s.outage.cutsSinceOK == 0, now.Sub(s.rate.lastCut).Seconds(), adapt)
	if s.outage.cutsSinceOK == 0 {
		// The first cut of a streak: what came before tells an outage's
		// silence from a limit's pauses (see outageOver).
		s.outage.streakAccepted, s.outage.streakAfterOK = s.meter.accepted, s.meter.okOnce
	}
	s.outage.cutsSinceOK++
	s.void()
	var next float64
	switch adapt {
	case AIMD:
		next = base * aimdCut
	default:
		next = base * cubicBeta
	}
	// While the client is refused, the rate it is still accepted at
	// measures the limit's capacity (as BBR's delivery rate does).
	c := s.acceptedRate(now)
	if !s.Engaged() && c == 0 {
		// Too few successes to measure: the share of the first answers
		// accepted, of the rate they were sent at, at least the rate
		// they came back at (a restart's backlog is sent before its
		// bucket).
		answered := s.meter.bucketRate(s.meter.ok+s.meter.refused, now, minElapsed)
		c = (1 - share) * max(base, answered)
	}
	switch {
	case !s.Engaged() && share <= shedMaxShare:
		// Few answers refused: near capacity, or refused at random (see
		// shedding), not far above a limit, which would then be at about
		// (1-share) times the rate; the cut goes just below that if it is
		// less of a cut, and the test of shedding weighs the refusals.
		next = max(next, acceptedShare*(1-share)*base)
		// Clamped as setRate will: a low rate below MinRate is never
		// reached, and the test would never weigh an outcome.
		s.shed.lowRate = max(next, minRate)
	case !s.Engaged() && c > 0:
		// The first cut goes at least that far: from a cold burst's
		// thousands a second, cuts by cubicBeta would take a dozen, each
		// paid for with refusals.
		next = min(next, acceptedShare*c)
	case c > 0:
		// Later cuts go no further than just below it: a deep cut from a
		// rate near the limit takes seconds of growth to win back.
		next = max(next, acceptedShare*min(c, base))
	}
	hold := false
	switch {
	case s.outage.streakAfterOK:
		// The server has accepted requests: over its limit, or down;
		// either way the rate comes down.
	case s.outage.cutsSinceOK == 1:
		s.outage.base = next
	case next < outageShare*s.outage.base:
		// Never a success yet: the cuts chase an outage, not a limit.
		// Held here, the waiting requests keep turns within their
		// deadlines until it answers.
		next = outageShare * s.outage.base
		hold = true
	}
	s.rate.aim(base, next, minRate, now, adapt)
	s.setRate(next, minRate)
	if hold {
		s.mode = ModeHeld
	}
	// The turns handed out at the old rate would meet refusals.
	s.reschedule(now)
}

// succeeded grows the rate back after a throttle.
func (s *State) succeeded(now time.Time, adapt Adapt, minRate float64) {
	t := now.Sub(s.rate.lastCut).Seconds()
	if h := s.rate.hold(); h > 0 {
		// On a steady limit the curve stops at plateauShare of it for
		// the hold, then goes on from there.
		if reach := s.rate.reach(adapt); t > reach {
			t = max(reach, t-h.Seconds())
		}
	}
	var next float64
	switch adapt {
	case AIMD:
		// One request per second more for every second without a
		// throttle, from the rate the cut set.
		next = s.rate.cutTo + t
	default:
		d := t - s.rate.window
		next = cubicScale*d*d*d + s.rate.lastMax
	}
	// Growth past what the client is measured sending at is untested,
	// so the rate grows only from a measured sending rate; nor does a
	// client that sends less lower the rate it has learned.
	if next > s.rate.fill {
		next = min(next, max(s.rate.fill, growthLimit*s.meter.measured))
	}
	s.setRate(next, minRate)
	// Turns queued well below the new rate would hold the client at the
	// old one while the queue lasts: they are void.
	if s.sched.next.After(now) && s.rate.fill >= regrant*s.sched.granted {
		s.reschedule(now)
	}
}
