package pacecore

import (
	"math"
	"time"
)

// tooEarly reports whether a throttle comes too early in the current
// bucket to read its share of refusals: fewer than a quarter of the
// attempts sent in it answered (throttled reads no share then, and
// takes the refusals for a burst's far above a limit, its rate measured
// over minElapsed, not one), and no more than shedMaxShare of those
// refused. A burst's refusals soon pass shedMaxShare of the answers,
// and engage the key as before.
func (s *State) tooEarly() bool {
	share, read := s.meter.answeredShare()
	return !read && share <= shedMaxShare
}

// suspect weighs a throttle of an idle key, and the successes before it,
// and reports whether the key's answers now say it is over a limit:
// whether the CUSUM of their log-likelihood ratio, refused at engageHigh
// against engageLow, reaches engageAlarm. Each throttle adds ln 2, each
// success takes ln 1.5 away, never below zero. A limit that refuses most
// of what the client sends engages the key after seven refusals in a
// row; a new key's sum starts at coldSuspicion, so that three in a row
// among its first answers engage it (an outage, or a cold burst far
// above a limit, whose rate is measured from the attempts sent before
// the first cut), and a key restarted after an outage engages on its
// first throttle (see restart). A share of a half engages the key after
// twenty answers or so; two fifths, after about fifty; a share below a
// quarter, seldom. Such a share is cheaper to retry than to pace: at
// most a third of an attempt more per request, where telling a limit's
// refusals from shedding costs a test at a lower rate. The sum counts
// from where the key last went idle, and a success after a long calm
// holds it at zero: a limit reached after it, a fixed window's quota
// spent, is weighed from its first refusal.
func (s *State) suspect() bool {
	s.meter.weigh(s.meter.ok - s.meter.suspectOK)
	s.meter.suspectOK = s.meter.ok
	s.meter.suspicion += math.Log(engageHigh / engageLow)
	return s.meter.suspicion >= engageAlarm
}

// idle returns the key to not engaged: the turns handed out are void, and
// the rate, its curve and the chain of cuts are forgotten.
func (s *State) idle() {
	s.mode = ModeIdle
	s.void()
	s.sched.next, s.rate.fill, s.sched.interval = time.Time{}, 0, 0
	s.rate.lastMax, s.rate.cutTo, s.rate.window, s.sched.granted = 0, 0, 0, 0
	s.rate.limit, s.rate.steady = 0, 0
	s.outage.cutsSinceOK = 0
	s.endHold()
	s.outage.cycleStart, s.outage.cycleOK, s.outage.refusedSinceOK = time.Time{}, 0, 0
	s.meter.drained = time.Time{}
	s.meter.suspicion = 0
	s.shed.endChain()
	s.shed.origin = 0
}
