package pacecore

import (
	"math"
	"time"
)

// outage tells an outage from a rate limit: cuts with no success between
// them, then a success a while after the last one.
type outage struct {
	lastOK      time.Time // the last success (or engaging), engaged
	cutsSinceOK int       // cuts since then
	base        float64   // the rate the first of them set
	// streakAccepted and streakAfterOK are the smoothed accepted rate and
	// meter.okOnce when the streak of cuts began.
	streakAccepted float64
	streakAfterOK  bool
	// cycleStart is when the successes counted in cycleOK began: the
	// key's first bucket, or the end of the last silence (see resume).
	cycleStart time.Time
	cycleOK    int64
	// refusedSinceOK counts the throttles since the last success (or
	// the first cut).
	refusedSinceOK int
}

// silenceOver reports whether a success ends a silence: silenceRefusals
// refusals or more in a row, silenceCuts of them cuts or more. Not while
// a test of shedding is under way: its stage holds the rate (see
// testSuccess).
func (s *State) silenceOver() bool {
	return s.outage.cutsSinceOK >= silenceCuts && s.outage.refusedSinceOK >= silenceRefusals && !s.shed.testing(s)
}

// resume is called on the success that ends a silence (see silenceOver).
// A fixed window limiter (a gateway's N a second, Envoy's local rate
// limit) accepts its quota at the start of each window and refuses the
// rest, and every paced refusal of the silence cuts. The successes since
// the last silence ended (or the key's first bucket), over the time
// since, are what it accepts: the rate comes back to acceptedShare of
// that, if lower, and grows on from there. (A token bucket's next
// silence, one success long, counts too few successes to resume from.)
func (s *State) resume(now time.Time, adapt Adapt, minRate float64) {
	d, ok := now.Sub(s.outage.cycleStart).Seconds(), s.outage.cycleOK
	s.outage.cycleStart, s.outage.cycleOK = now, 0
	if d <= 0 || ok < minSamples {
		return
	}
	r := float64(ok) / d
	next := acceptedShare * r
	if next <= s.rate.fill {
		return
	}
	s.rate.aim(r, next, minRate, now, adapt)
	s.setRate(next, minRate)
}

// outageOver reports whether a success at now, after a streak of two
// cuts or more, ends an outage: outageTime since the last success, and
// outageSilence spacings of the successes before the streak (a fixed
// window's silence is shorter). Refusals after no success at all make one
// after outageTime; after successes at an unknown rate, none do. A single
// cut is no streak: the silence after it may be callers backing off.
func (s *State) outageOver(now time.Time) bool {
	gap := now.Sub(s.outage.lastOK)
	switch {
	case gap < outageTime || s.outage.cutsSinceOK < 2:
		return false
	case !s.outage.streakAfterOK:
		return true
	}
	return gap.Seconds()*s.outage.streakAccepted >= outageSilence // 0 if unknown
}

// restart forgets what the key learned: after an outage (or a quota spent
// for a while), the rate it was cut to says nothing about the server that
// answers again, and growing back from it would take minutes. The key
// starts afresh, in slow start, as a new one would.
func (s *State) restart(now time.Time, initialWindow int) {
	s.idle()
	// Rates measured in the outage are not the server's either.
	s.meter.measured, s.meter.accepted, s.meter.sampled = 0, 0, false
	s.meter.takeSent()
	s.meter.ok = 1 // this success
	// Its first refusal now is its limit's (a backlog meeting the
	// server as it returns), and engages it.
	s.meter.suspicion, s.meter.suspectOK = math.Inf(1), 1
	s.meter.bucket = now
	if initialWindow > 0 {
		s.start.slots = initialWindow
		if !s.start.began.IsZero() {
			s.fx.StopLimit = true
		}
		s.start.began = time.Time{} // a new time limit from the next attempt
		s.start.round++
		s.mode = ModeSlowStart
	}
}

// endHold ends the hold of the rate (see throttled), and the waits for
// it.
func (s *State) endHold() {
	if s.mode == ModeHeld {
		s.mode = ModePaced
	}
	s.fx.Unhold = true
}
