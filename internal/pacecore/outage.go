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
//
// A fixed window limiter (an API gateway's quota of N a second, or a
// minute; Envoy's local rate limit, a token bucket filled once a window)
// accepts its quota at the start of each window and refuses everything
// after it. Every paced refusal of the silence that follows cuts, and the
// key would come out of it at a fraction of what the window accepts.
// The successes since the last silence ended (or
// since the key's first bucket) over the time since are what the limiter
// accepts, window and silence together; the rate comes back to
// acceptedShare of that, if it is lower, and its curve grows back to that
// rate from there. The first silence cannot tell a window of N from a
// token bucket with a burst of N-1 refilled once in as long; a bucket's
// next silence, one success long, counts too few successes (minSamples)
// to resume from, and its cuts go on. An outage's end is outageOver's:
// the key starts again.
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

// outageOver reports whether a success at now, after a streak of cuts,
// ends an outage: a silence of outageTime since the last success, and ten
// times the usual spacing of successes before the streak. A limiter that
// admits its quota at the start of each window is silent for most of the
// window: that is not an outage. Refusals that followed no success at all
// are one after outageTime; refusals after successes whose rate is
// unknown (the key engaged within its first half-second) are none.
//
// A single cut is no streak: the silence after it may be the client's
// (callers backing off after a refusal), and restarting would forget
// the limit. In an outage, the attempts paced after the first cut are
// refused too, and cut again.
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
	// The key has been throttled before: its first refusal now is its
	// limit's (a storm's backlog meeting the server as it returns, after
	// the successes of the server's burst), and engages it; no success
	// takes away from an infinite sum.
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
