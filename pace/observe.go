package pace

import (
	"time"

	"github.com/backoff-jitter/retry"
)

// observeState updates the key's rate after the outcome of an attempt
// paced at the rate of generation gen (0: not paced), and gives back its
// slow-start slot if it held one.
func (p *Pacer) observeState(s *keyState, slot bool, f retry.Feedback, gen uint64, now time.Time) {
	class := f.Class
	if slot {
		// After learning from the outcome: a throttle has ended slow
		// start by then, and the attempts that waited for a slot go on
		// to wait for turns. Any answer of a working server opens the
		// window (a 404 is one); a throttle, an outage or a transport
		// error does not.
		defer s.release(class == retry.Success || class == retry.Permanent && f.Response != nil)
	}
	if class != retry.Throttled && class != retry.Success {
		return // neither says anything about the server's rate limit
	}
	if class == retry.Throttled && p.Refusal != nil && !p.Refusal(f) {
		return // refused, but not for the rate
	}
	pause, hinted := f.Wait, f.Hinted
	if class == retry.Success {
		s.meter.ok.Add(1)
		if !s.meter.okOnce.Load() {
			s.meter.okOnce.Store(true)
		}
	}
	if class == retry.Success && !hinted && !s.engaged.Load() {
		if end := s.meter.bucketEnd.Load(); end != 0 && s.since(now) < end {
			return // nothing to update until the bucket ends
		}
		s.mu.Lock()
		s.measure(now)
		s.mu.Unlock()
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
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
	case class == retry.Throttled && !hinted && s.shed.noise(s) && !(s.engaged.Load() && s.shed.testing(s)):
		// Refused no more often than the share found not to depend on
		// the rate: pacing, or pacing slower, would not help. This
		// holds for the attempts paced before the key went idle too,
		// but not while a test of shedding is under way: it weighs
		// these refusals, and would hold, undecided, without them.
	case class == retry.Throttled && !hinted && !s.engaged.Load() && (!s.suspect() || s.tooEarly()):
		// suspect comes first: it weighs every such throttle.
		// Refusals not yet clearly over a limit's share (a refusal now
		// and then, or refusals at random up to a quarter or so,
		// cheaper retried than paced); or a few among the first answers
		// of a burst most of which is still unanswered. The attempt is
		// retried as it would be without a Pacer until the answers say
		// which it is (see suspect and tooEarly).
	case class == retry.Throttled && s.engaged.Load() && gen == s.sched.gen && !s.outage.holding:
		switch s.shed.test(s, now) {
		case shedIndependent:
			if !s.shed.deep {
				// As often at the low rate: once more, lower.
				s.deepen(now, p.minRate())
				break
			}
			// Refused as often at two lower rates: not a rate limit.
			s.disengage(now)
		case shedCut:
			s.throttled(now, p.Adapt, p.minRate())
		}
	case class == retry.Throttled && s.engaged.Load() && gen != s.sched.gen:
		// The attempt was not paced at the rate in force: it left
		// before the last cut, or before the pacer engaged, and that
		// cut has answered it already. Cutting again for every
		// attempt of one burst would collapse the rate; TCP too cuts
		// once per window of data (RFC 5681 §3.1).
	case class == retry.Throttled && s.outage.holding:
		// Refused again and again, nothing accepted: an outage, or a
		// quota spent. Cutting on would learn nothing and, with every
		// turn pushed far out, fail the waiting requests on their
		// deadlines; the rate in force probes until a success.
	case class == retry.Throttled:
		s.throttled(now, p.Adapt, p.minRate())
	case s.engaged.Load() && s.outageOver(now):
		// The first success after an outage: see restart.
		s.restart(now, p.initialWindow())
	case s.engaged.Load():
		if s.silenceOver() {
			s.resume(now, p.Adapt, p.minRate())
		}
		s.testSuccess(now, p.minRate())
		s.succeeded(now, p.Adapt, p.minRate())
	}
	if class == retry.Success && s.engaged.Load() {
		s.outage.lastOK, s.outage.cutsSinceOK = now, 0
		s.endHold()
		s.outage.refusedSinceOK = 0
		if s.outage.cycleStart.IsZero() {
			s.outage.cycleStart = now
		}
		s.outage.cycleOK++
	}
	if hinted && pause > 0 {
		s.pause(now, pause, p.minRate())
	}
}
