package pacecore

import (
	"time"

	"github.com/backoff-jitter/retry"
)

// answer updates the key's rate after the outcome of an attempt paced at
// the rate of generation ev.Gen (0: not paced), and gives back its
// slow-start slot if it held one. A success is counted (ev.OK) by the
// time it is answered.
func (s *State) answer(now time.Time, ev Event) {
	class := ev.Class
	if ev.Slot {
		// After learning from the outcome: a throttle has ended slow
		// start by then, and the attempts that waited for a slot go on
		// to wait for turns. Any answer of a working server opens the
		// window (a 404 is one); a throttle, an outage or a transport
		// error does not.
		defer s.release(class == retry.Success || class == retry.Permanent && ev.Answered)
	}
	if class != retry.Throttled && class != retry.Success {
		return // neither says anything about the server's rate limit
	}
	if class == retry.Throttled && !ev.ForRate {
		return // refused, but not for the rate
	}
	pause, hinted, gen := ev.Wait, ev.Hinted, ev.Gen
	if class == retry.Success && !hinted && !s.Engaged() {
		if !s.meter.inBucket(now) {
			s.measure(now)
		}
		return // nothing more to update until the bucket ends
	}
	s.measure(now)
	if class == retry.Throttled {
		s.meter.refused++
		s.outage.refusedSinceOK++
	}
	s.shed.count(s, class == retry.Throttled, gen)
	if !s.meter.drained.IsZero() {
		if class == retry.Throttled {
			s.meter.drainedRefused++
		} else {
			s.meter.drainedOK++
		}
	}
	switch {
	case class == retry.Throttled:
		s.throttle(now, hinted, gen)
	case s.Engaged():
		s.success(now)
	}
	if hinted && pause > 0 {
		s.pause(now, pause, s.cfg.MinRate)
	}
}

// throttle decides what a throttle of an attempt paced at generation gen
// does, by the key's mode.
func (s *State) throttle(now time.Time, hinted bool, gen uint64) {
	switch {
	case s.mode == ModeHeld:
		// Refused again and again, nothing accepted: an outage, or a
		// quota spent. Cutting on would learn nothing and, with every
		// turn pushed far out, fail the waiting requests on their
		// deadlines; the rate in force probes until a success.
	case !hinted && s.shed.noise(s) && !(s.Engaged() && s.shed.testing(s)):
		// Refused no more often than the share found not to depend on
		// the rate: pacing, or pacing slower, would not help. This
		// holds for the attempts paced before the key went idle too,
		// but not while a test of shedding is under way: it weighs
		// these refusals, and would hold, undecided, without them.
	case !s.Engaged():
		// Idle (or in slow start): a server's hint engages the key at
		// once; otherwise only answers that say it is over a limit, read
		// late enough in a burst (see suspect, tooEarly). Until then the
		// attempt is retried as it would be without a Pacer.
		if hinted || s.suspect() && !s.tooEarly() {
			s.throttled(now, s.cfg.Adapt, s.cfg.MinRate)
		}
	case gen != s.sched.gen:
		// Paced, but the attempt was not paced at the rate in force: it
		// left before the last cut, or before the pacer engaged, and
		// that cut has answered it already. Cutting again for every
		// attempt of one burst would collapse the rate; TCP too cuts
		// once per window of data (RFC 5681 §3.1).
	case s.outageOver(now):
		// Silent as long as an outage is: the next success restarts the
		// key (see success), and cuts until then would only push the
		// probes that find the server back further apart, past the
		// waiting requests' deadlines. The rate holds, probing.
		s.mode = ModeHeld
	default:
		switch s.shed.test(s, now) {
		case shedIndependent:
			if !s.shed.deep {
				// As often at the low rate: once more, lower.
				s.deepen(now, s.cfg.MinRate)
				break
			}
			// Refused as often at two lower rates: not a rate limit.
			s.disengage(now)
		case shedCut:
			s.throttled(now, s.cfg.Adapt, s.cfg.MinRate)
		}
	}
}

// success grows an engaged key's rate back after a success, or restarts
// the key when the success ends an outage.
func (s *State) success(now time.Time) {
	if s.outageOver(now) {
		s.restart(now, s.cfg.InitialWindow) // see restart
		return
	}
	if s.silenceOver() {
		s.resume(now, s.cfg.Adapt, s.cfg.MinRate)
	}
	s.testSuccess(now, s.cfg.MinRate)
	s.succeeded(now, s.cfg.Adapt, s.cfg.MinRate)
	s.outage.lastOK, s.outage.cutsSinceOK = now, 0
	s.endHold()
	s.outage.refusedSinceOK = 0
	if s.outage.cycleStart.IsZero() {
		s.outage.cycleStart = now
	}
	s.outage.cycleOK++
}
