package pacecore

import (
	"math"
	"time"
)

// testSuccess weighs a success of an engaged key against the test under
// way: once the share at the low rate is clearly below the chain's first
// (see atMost), or half of it over the outcomes that would have brought
// 2*minSamples refusals, in the test's second stage, the refusals fell
// with the rate: a limit's, and the rate in force is below it. The chain
// ends, and a second stage's rate goes back to the first's (the curve
// saved by deepen): the rate was lowered for the test, not for a limit
// found there. Judged only at refusals, a limit under the low rate
// refuses nothing there, and the test would hold a client at that rate
// for as long as the limit holds.
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
// whether it sends at no less than 1/paceSlack of it, by the current
// bucket's attempts (from minElapsed into it) or the smoothed rate,
// whichever is higher (true before either is known), and by the
// attempts sent since the test's stage began. A client that sends
// slower than the rate in force is paced at the rate it sends at, and
// the test, comparing the shares refused at two rates in force, would
// compare two shares at that one rate and take a limit for shedding.
// Such a throttle cuts instead, until the rate in force is one the
// client sends at. A bucket's attempts alone are not enough: callers
// that back off send in bursts, and a few attempts early in a bucket
// count as hundreds a second; over the stage (weighed once it has lasted
// paceSpan attempts' time at the rate in force), a burst weighs what it
// is worth.
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
// at random, or above a limit still, whose share the first measured too
// low (a token bucket's burst among its answers). A limit accepts, at
// most, what it accepted at the low rate: 1-lo of it. So the test goes
// on at 0.9 of that (no lower than shedDeepFloor of the low rate, as a
// share of all would take it to nothing), against the
// share of every outcome so far, and must find the share as high there
// again (see test). It goes no higher than 0.9 of the successes per
// second over the stage so far (one success at least): callers that
// back off, or wait on a shared store, send below the rate in force,
// and a handful of outcomes can put the share far under a limit's;
// tested above the limit, against a first share a burst diluted, a
// limit's share passed for shedding. The curve starts from the new
// rate, where the first cut's would soon have grown back above it, and
// the curve before is saved for a limit found below it (see
// testSuccess).
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

// test judges a throttle (see shedding). While the rate is at the
// chain's low rate, throttles refused at about the share of the chain's
// first cut are held, without a cut, until shedMinRefusals show the share
// did not fall: the refusals may be independent of the rate (the first
// stage: the caller goes on to the second, see State.deepen), or are
// (the second). A share clearly higher or lower, by a binomial test at
// shedSignificance, is a limit's: the chain ends and the throttle cuts;
// so does a share undecided for shedMaxRefusals refusals. Both shares
// are counted without the refusal that stopped their count (see
// stoppedShare). The throttle is of an attempt paced at the rate in
// force, outside an outage's hold.
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
		// Undecided for as many refusals: the share is not the one the
		// chain began with, but not clearly another either. Held, a key
		// above a limit whose first share a burst had diluted was held
		// there with no end.
		sh.endChain()
		return shedCut
	}
	return shedHold
}

// maxShare is the highest share of every outcome of the chain that may
// be found not to depend on the rate: shedMaxShare, or collapseShare
// once the rate is below collapseDepth of the one the key engaged from.
// Shed at about shedMaxShare at random, a chain's share is over it half
// the time, ends undecided and cuts, and the next chain begins lower:
// the rate collapses. So far below its origin, a limit's share is a
// burst's, near 1, or small.
func (sh *shedding) maxShare(s *State) float64 {
	if sh.origin > 0 && s.rate.fill < collapseDepth*sh.origin {
		return collapseShare
	}
	return shedMaxShare
}

// hiUpper is the chain's first share, hi, plus two standard errors: how
// high that share may have been, measured over hiN outcomes. A share at
// the low rate above it is not taken for the same (a limit's share
// rises as the rate falls, where a burst diluted the first), and one
// clearly above it is a limit's.
func (sh *shedding) hiUpper(hi float64) float64 {
	return hi + sh.hiError(hi)
}

// hiLower is the chain's first share, hi, less two standard errors: how
// low that share may have been. At the first stage, a share at the low
// rate of half that or more is taken for not a limit's, whose share
// falls well below half there; at the second, only that much or more.
// Against half of hi itself, a first share measured high by chance held
// the test undecided, at the low rate, for hundreds of outcomes.
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
	// The sending rate measured while it was paced is the Pacer's, not
	// the client's: a throttle that engages the key again cuts from the
	// rate it is sent at from now on, not from the paced rate, which
	// would take a minute to grow back from. The accepted rate is the
	// server's and stays: forgotten, an outage after it could not be
	// told from a limit (see outageOver), and was cut through to the
	// minimum rate. A bucket begins now; the successes so far stay, as
	// the bucket before, for noise to weigh the next throttles against.
	s.meter.measured, s.meter.sampled = 0, false
	s.meter.lastOK += s.meter.takeOK()
	s.meter.suspectOK = 0
	s.meter.takeSent()
	s.meter.bucket = now
}
