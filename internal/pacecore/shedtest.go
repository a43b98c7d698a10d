package pacecore

import (
	"math"
	"time"
)

// testSuccess weighs a success of an engaged key against the test under
// way: once the share at the low rate is clearly below the chain's first
// (see atMost), or, in the second stage, half of it over the outcomes
// that would have brought 2*minSamples refusals, the refusals fell with
// the rate: a limit's, and the rate is below it. The chain ends, and a
// second stage's rate goes back to the first's (the curve deepen saved).
// Judged only at refusals, a limit below the low rate, which refuses
// nothing there, would hold the client at that rate.
func (s *State) testSuccess(now time.Time, minRate float64) {
	sh := &s.shed
	if !sh.testing(s) {
		return
	}
	hi := stoppedShare(sh.hiK, sh.hiN)
	lo := float64(sh.loK) / float64(sh.loN)
	fell := atMost(sh.loK, sh.loN, sh.hiLower(hi)) < shedSignificance ||
		sh.deep && hi*float64(sh.loN) >= 2*minSamples && 2*lo < hi
	if !fell {
		return
	}
	if sh.deep {
		s.rate = sh.saved
		s.setRate(s.rate.fill, minRate)
		s.reschedule(now)
	}
	sh.endChain()
}

// paceHolds reports whether the rate in force holds the client back:
// whether it sends at no less than 1/paceSlack of it, by the bucket's
// attempts (from minElapsed into it) or the smoothed rate, whichever is
// higher, and by the attempts sent since the test's stage began (once it
// has lasted paceSpan turns: callers that back off send in bursts). A
// client slower than the rate in force would have the test compare two
// shares at its own one rate and take a limit for shedding; such a
// throttle cuts instead.
func (s *State) paceHolds(now time.Time) bool {
	fill := s.rate.fill
	if fill <= 0 {
		return true
	}
	sent := s.meter.measured
	if e := now.Sub(s.meter.bucket); e >= minElapsed {
		sent = max(sent, float64(s.meter.sent)/e.Seconds())
	}
	if sent > 0 && fill > paceSlack*sent {
		return false
	}
	span := now.Sub(s.shed.at).Seconds()
	if span < paceSpan/fill {
		return true // too soon to tell
	}
	return fill <= paceSlack*float64(s.meter.sends()-s.shed.atSent)/span
}

// deepen goes on with the test at a lower rate: refused at the low rate
// about as often as before the chain's first cut, the key may be shedding
// at random, or above a limit still whose first share a token bucket's
// burst diluted. A limit accepts at most what it accepted at the low
// rate, 1-lo of it, so the test goes on at 0.9 of that (no lower than
// shedDeepFloor of the low rate), and no higher than 0.9 of the
// successes per second over the stage (callers that back off send below
// the rate in force), and must find the share as high again (see test).
// The curve starts from the new rate; the one before is saved for a
// limit found below it (see testSuccess).
func (s *State) deepen(now time.Time, minRate float64) {
	sh := &s.shed
	lo := float64(sh.loK) / float64(sh.loN)
	to := max(acceptedShare*(1-lo)*s.rate.fill, shedDeepFloor*s.rate.fill)
	if span := now.Sub(sh.at).Seconds(); span > 0 {
		to = min(to, acceptedShare*float64(max(sh.atOK, 1))/span)
	}
	to = max(to, minRate)
	sh.hiN, sh.hiK = sh.hiN+sh.loN, sh.hiK+sh.loK
	sh.loN, sh.loK = 0, 0
	sh.chainGen, sh.lowRate, sh.deep = s.sched.gen, to, true
	sh.at, sh.atSent, sh.atOK = now, s.meter.sends(), 0
	sh.saved = s.rate
	s.rate.lastMax, s.rate.lastCut, s.rate.cutTo, s.rate.window = to, now, to, 0
	s.setRate(to, minRate)
	s.reschedule(now)
}

// Verdicts of shedding.test on a throttle.
const (
	shedCut         = iota // as a limit's: cut
	shedHold               // under test: no cut yet
	shedIndependent        // not the rate's doing: disengage
)

// test judges a throttle of an attempt paced at the rate in force (see
// shedding). At the chain's low rate, throttles at about the chain's
// first share are held, without a cut, until shedMinRefusals show the
// share did not fall (after the first stage the caller deepens; after
// the second, disengages). A share clearly higher or lower (a binomial
// test at shedSignificance), or undecided for shedMaxRefusals refusals,
// is a limit's: the chain ends and the throttle cuts.
func (sh *shedding) test(s *State, now time.Time) int {
	if !sh.testing(s) || sh.loN == 0 || !s.paceHolds(now) {
		return shedCut
	}
	hi := stoppedShare(sh.hiK, sh.hiN)
	lo := stoppedShare(sh.loK, sh.loN)
	switch {
	case sh.loK >= 2 && atLeast(sh.loK-1, sh.loN-1, sh.hiUpper(hi)) < shedSignificance:
		// Refused more often at the lower rate: a limit, lower still.
		sh.endChain()
		return shedCut
	case sh.loK >= shedMinRefusals && lo <= sh.hiUpper(hi) && (sh.deep && lo >= sh.hiLower(hi) || !sh.deep && 2*lo >= sh.hiLower(hi)) &&
		stoppedShare(sh.hiK+sh.loK, sh.hiN+sh.loN) <= sh.maxShare(s):
		// The share of every outcome so far, too, is no more than a
		// first share may be: else a window limiter's high share,
		// refused as often at twice its rate, passes for shedding.
		return shedIndependent
	case atMost(sh.loK-1, sh.loN-1, sh.hiLower(hi)) < shedSignificance:
		// Far fewer refusals than the share would bring: a limit's.
		sh.endChain()
		return shedCut
	case sh.loK >= shedMaxRefusals:
		// Undecided for as many refusals: held on, a key above a limit
		// whose first share a burst diluted would be held there forever.
		sh.endChain()
		return shedCut
	}
	return shedHold
}

// maxShare is the highest share of every outcome of the chain that may
// be found not to depend on the rate: shedMaxShare, or collapseShare
// below collapseDepth of the rate the key engaged from, where a limit's
// share is a burst's, near 1, or small (shed at about shedMaxShare, a
// chain would end undecided half the time, and the rate collapse).
func (sh *shedding) maxShare(s *State) float64 {
	if sh.origin > 0 && s.rate.fill < collapseDepth*sh.origin {
		return collapseShare
	}
	return shedMaxShare
}

// hiUpper is the chain's first share, hi, plus two standard errors: how
// high it may have been, measured over hiN outcomes.
func (sh *shedding) hiUpper(hi float64) float64 {
	return hi + sh.hiError(hi)
}

// hiLower is the chain's first share, hi, less two standard errors: how
// low it may have been (against hi itself, a first share measured high
// by chance held the test undecided for hundreds of outcomes).
func (sh *shedding) hiLower(hi float64) float64 {
	return hi - sh.hiError(hi)
}

// hiError is two standard errors of the first share hi, measured over
// hiN outcomes.
func (sh *shedding) hiError(hi float64) float64 {
	// At least one refusal's worth: a share of none, measured over a
	// few outcomes, is not known to be none.
	p := max(hi, 1/float64(sh.hiN))
	return 2 * math.Sqrt(p*(1-p)/float64(sh.hiN))
}

// disengage returns the key to idle, its refusals found not to depend on
// its rate; the attempts waiting for turns go on at once.
func (s *State) disengage(now time.Time) {
	// The share at the low rate, that of the whole chain if twice as
	// high: a limit's refusals too may have been in the chain's first.
	lo := float64(s.shed.loK) / float64(s.shed.loN)
	s.shed.share = max(lo, float64(s.shed.hiK+s.shed.loK)/float64(s.shed.hiN+s.shed.loN)/2)
	s.idle()
	s.shed.epN, s.shed.epK = 0, 0
	s.sched.paused = time.Time{}
	// The refusals that led here are the share's, not above it: noise
	// weighs the throttles that come after.
	s.meter.refused, s.meter.lastRefused = 0, 0
	// The sending rate measured while paced is the Pacer's, not the
	// client's: forgotten. The accepted rate is the server's and stays
	// (an outage after it must be told from a limit, see outageOver). A
	// bucket begins now; its successes so far stay, as the bucket
	// before, for noise to weigh the next throttles against.
	s.meter.measured, s.meter.sampled = 0, false
	s.meter.lastOK += s.meter.takeOK()
	s.meter.suspectOK = 0
	s.meter.takeSent()
	s.meter.bucket = now
}
