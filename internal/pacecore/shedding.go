package pacecore

import (
	"math"
	"time"
)

// shedding tells a rate limit from refusals that do not depend on the
// rate (a load balancer shedding at random, a flaky backend): a limit's
// share falls as the rate falls below it, shedding's does not, and
// cutting on shedding would ratchet the rate down until requests fail
// waiting for turns that retries alone would not have needed.
//
// So a chain of cuts records the rate before its first cut and the share
// refused before it (see stoppedShare). Unless that share is clearly a
// limit's (see limitShare), the chain is tested in two stages: at the low
// rate (see low) the share must stay between half the first and the
// first (see hiLower, hiUpper); then, since a token bucket's burst makes
// a limit's first share look small, again below what a limit accepted
// there (see deepen). Passing both, the key disengages and remembers the
// share, and only refusals well above it count after (see noise). A share
// that clearly fell or rose, or stays undecided for shedMaxRefusals
// refusals, ends the chain as a limit's (see test, State.testSuccess).
type shedding struct {
	chainRate float64 // the rate before the chain's first cut; 0: no chain
	// chainGen is the generation the attempts were paced at before that
	// cut (0: not paced): answered after it, they too count in hiN and
	// hiK.
	chainGen uint64
	// lowRate is the rate at or below which the attempts are paced low
	// enough to test; 0: shedLowRate×chainRate.
	lowRate  float64
	hiN, hiK int // outcomes and refusals that led to that cut
	// limit is set when the chain began again from one whose first
	// share was a limit's (over shedMaxShare), from the outcomes since:
	// at rates the limit refuses most of, minSamples of them can pass
	// for a moderate share by chance, so such a chain's first share is
	// weighed over twice as many (see need).
	limit    bool
	epN, epK int // outcomes and refusals since the last cut, engaged
	loN, loK int // of attempts paced at the low rate (see low) or less
	// deep is set once the share at the low rate passed for the first
	// one and the test goes on at a lower rate still (see deepen);
	// saved is the rate curve it was at before.
	deep  bool
	saved rateCurve
	// at is when the test's current stage began, the chain's first cut
	// or deepen, and atSent the attempts sent by then (meter.sends).
	at     time.Time
	atSent int64
	// atOK counts the successes answered since at, engaged (see
	// deepen).
	atOK int
	// share is the refusal share found not to depend on the rate,
	// lowered while idle by buckets refused less often (see decay); 0:
	// none.
	share float64
	// origin is the rate the key engaged from (the base of its first
	// cut); 0 while idle. See test.
	origin float64
}

// count adds an outcome to the chain's tallies: every outcome while the
// key is engaged, since the last cut, and those of attempts paced at the
// rate in force, by whether it is above the chain's low rate.
func (sh *shedding) count(s *State, refused bool, gen uint64) {
	if !s.Engaged() {
		return
	}
	k := 0
	if refused {
		k = 1
	}
	sh.epN, sh.epK = sh.epN+1, sh.epK+k
	if !refused {
		sh.atOK++
	}
	switch {
	case sh.chainRate == 0:
	case gen != s.sched.gen && gen <= sh.chainGen:
		// Sent before the chain's first cut, answered after it: one
		// more outcome at the chain's rate. A burst's are most of them.
		sh.hiN, sh.hiK = sh.hiN+1, sh.hiK+k
	case gen != s.sched.gen:
	case s.rate.fill > sh.low():
		sh.hiN, sh.hiK = sh.hiN+1, sh.hiK+k
	default:
		sh.loN, sh.loK = sh.loN+1, sh.loK+k
	}
}

// cut notes a cut from rate base. The first of a chain records the rate
// and the refusals that led to it (the bucket's before the key engaged,
// those since the last cut after). A chain with too few outcomes to test
// against, or refused too often to test, begins again at this cut.
func (sh *shedding) cut(s *State, base float64, now time.Time) {
	switch {
	case base <= 0:
	case sh.chainRate == 0:
		n, k := sh.epN, sh.epK
		if !s.Engaged() {
			k = int(s.meter.refused)
			n = int(s.meter.ok) + k
			sh.origin = base
		}
		sh.begin(s, now, base, n, k, false)
	case sh.hiN < sh.need():
		// Too few outcomes: begin again here, keeping them. Kept at its
		// first rate, the low rate would be far above where the cuts
		// came down to, and the first share a mix of every rate since.
		sh.begin(s, now, base, sh.hiN+sh.loN, sh.hiK+sh.loK, sh.limit)
	case sh.limitShare() && sh.loN >= minSamples:
		sh.begin(s, now, base, sh.loN, sh.loK, true)
	case sh.limitShare() && sh.hiN >= 2*minSamples:
		sh.begin(s, now, base, sh.epN, sh.epK, true)
	}
	sh.epN, sh.epK = 0, 0
}

// begin (re)starts the chain at a cut from rate base at time now, with n
// outcomes and k refusals before it; limit says it begins after a
// limit's (see shedding.limit).
func (sh *shedding) begin(s *State, now time.Time, base float64, n, k int, limit bool) {
	sh.chainRate, sh.chainGen, sh.lowRate, sh.limit = base, s.sched.gen, 0, limit
	sh.at, sh.atSent, sh.atOK = now, s.meter.sends(), 0
	sh.hiN, sh.hiK = n, k
	sh.loN, sh.loK, sh.deep = 0, 0, false
}

// need returns the fewest outcomes the chain's first share is weighed
// over: minSamples, twice that for a chain begun again after a limit's.
func (sh *shedding) need() int {
	if sh.limit {
		return 2 * minSamples
	}
	return minSamples
}

// low returns the rate at or below which the chain's attempts are paced
// low enough to test: shedLowRate times the chain's, or the rate of a
// shallower first cut (see State.throttled).
func (sh *shedding) low() float64 {
	if sh.lowRate > 0 {
		return sh.lowRate
	}
	return shedLowRate * sh.chainRate
}

// testing reports whether the chain's test is under way: its first share
// weighed, not clearly a limit's, and the rate in force at the low rate.
func (sh *shedding) testing(s *State) bool {
	return sh.chainRate != 0 && sh.hiN >= sh.need() && !sh.limitShare() && s.rate.fill <= sh.low()
}

// limitShare reports whether the chain's first share is clearly a
// limit's, too high to test: over shedMaxShare by more than two standard
// errors (over a few outcomes, a quarter refused at random can come out
// near a half).
func (sh *shedding) limitShare() bool {
	return sh.hiLower(stoppedShare(sh.hiK, sh.hiN)) > shedMaxShare
}

// endChain forgets the chain of cuts.
func (sh *shedding) endChain() {
	sh.chainRate, sh.chainGen, sh.lowRate, sh.limit = 0, 0, 0, false
	sh.hiN, sh.hiK, sh.loN, sh.loK, sh.deep = 0, 0, 0, 0, false
}

// noise reports whether a throttle is no more than the key's refusals
// that do not depend on the rate, if it has found any: whether the
// refusals of this bucket and the one before are not well above that
// share (twice it, or halfway to all, and three standard deviations).
// Such a throttle neither engages nor cuts: a limit's refusals grow with
// the rate until they are well above it.
func (sh *shedding) noise(s *State) bool {
	if sh.share == 0 {
		return false
	}
	k := float64(s.meter.refused + s.meter.lastRefused)
	n := k + float64(s.meter.ok+s.meter.lastOK)
	mean := n * sh.share
	// Twice the share, at most halfway to every answer refused: with a
	// share of half or more found, twice it is every answer, and no
	// limit could engage the key again.
	return k <= mean+min(mean, (n-mean)/2) || k <= mean+3*math.Sqrt(mean*(1-sh.share))+2
}

// idleBucket folds an idle key's bucket of okN successes and refused
// throttles into the share that does not depend on the rate: a key with
// none takes a bucket's of 4×minSamples answers or more refused no more
// than engageLow (which it lives with unpaced, see State.suspect), as if
// a test had found it; then it decays. Once engaged, it then does not
// cut on every refusal at random.
func (sh *shedding) idleBucket(okN, refused int64) {
	switch n := okN + refused; {
	case sh.share > 0:
		sh.decay(okN, refused)
	case n >= 4*minSamples && refused > 0 && float64(refused) <= engageLow*float64(n):
		sh.share = float64(refused) / float64(n)
	}
}

// decay folds a bucket of okN successes and refused throttles into the
// share of refusals that do not depend on the rate, while the key is
// idle, as the shedding subsides; it forgets the share once negligible.
func (sh *shedding) decay(okN, refused int64) {
	n := float64(okN) + float64(refused)
	if n < 2*minSamples {
		return
	}
	// Only down: folding in buckets refused more often would let a
	// limit's refusals, as they grow, pass for shedding.
	sh.share = min(sh.share, sh.share*(1-smoothing)+smoothing*float64(refused)/n)
	if sh.share < 1e-3 {
		sh.share = 0
	}
}
