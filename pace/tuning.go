package pace

import (
	"math"
	"time"
)

// Tuning of the adaptation, as in the AWS SDKs' adaptive retry mode.
const (
	cubicBeta  = 0.7 // rate kept on a throttle
	cubicScale = 0.4 // C of the cubic growth curve
	aimdCut    = 0.5 // rate kept on a throttle
	// smoothing weights the newest half-second of the measured rate.
	smoothing = 0.8
	// bucketWidth is the period over which the sending rate is measured.
	bucketWidth = 500 * time.Millisecond
	// A bucket that lasts quietTime, no answer in it, ends a quiet spell of
	// an idle key: the rates measured before are forgotten (see measure).
	quietTime = 4 * bucketWidth
	// drainWindow is how long after a key's first throttle the successes
	// since bound the accepted rate (see keyState.acceptedRate): as long as
	// a burst's share of the smoothed rate takes to fade.
	drainWindow = 2 * bucketWidth
	// More than drainedShare of the answers since that first throttle
	// refused keep the bucket empty: a client far above a limit (83 to
	// 96 % in the first 100 ms of a cascade against nginx), not one
	// refused at random (a quarter shed at random refused up to 62 % of
	// the first 8 to 60 answers).
	drainedShare = 0.75
	// acceptedShare of the measured success rate is the lowest a throttle
	// cuts to: just below the server's capacity, so that timing jitter
	// does not make the paced attempts collide.
	acceptedShare = 0.9
	// growthLimit times the measured sending rate is the most the rate
	// grows to.
	growthLimit = 1.25
	// regrant times the rate of the turns handed out is the rate that
	// voids them, for turns at the new one.
	regrant = 1.1
	// minSamples successes are the fewest the current bucket's accepted
	// rate is estimated from.
	minSamples = 8
	// minElapsed is the shortest time a sending rate is estimated over;
	// minElapsedModerate, when few of the attempts are refused and the
	// server keeps up with them (see keyState.throttled).
	minElapsed         = 10 * time.Millisecond
	minElapsedModerate = time.Millisecond
	// defaultMinRate is the slowest a Pacer goes, in requests per second.
	defaultMinRate = 0.5
	// defaultInitialWindow is how many attempts a key in slow start may
	// have unanswered at first: TCP's initial window (RFC 6928).
	defaultInitialWindow = 10
	// Outages (see Pacer): before the first success, cuts go no lower
	// than outageShare of the rate the first of them set; a success after
	// two cuts or more and a silence of outageTime, and of outageSilence
	// times the usual spacing of successes, restarts the key.
	outageShare   = 0.25
	outageTime    = 500 * time.Millisecond
	outageSilence = 10
	// A silence (see keyState.resume) is silenceRefusals refusals in a
	// row, silenceCuts of them cuts. Refused at random, as often as 40 %
	// of the time, twelve in a row come once in 60,000 attempts.
	silenceCuts     = 3
	silenceRefusals = 12
	// slowStartLimit is the longest a key stays in slow start: attempts
	// that never answer (long polls, a hung server) hold their slots, and
	// the others must not wait on them for longer than this.
	slowStartLimit = time.Second
	// Refusals that do not depend on the rate (see shedding): a chain of
	// cuts whose refusal share was not clearly over shedMaxShare is
	// tested once the rate is shedLowRate times the chain's first rate
	// or less, after shedMinRefusals refusals there, and again at a
	// lower rate, no lower than shedDeepFloor times that (see deepen);
	// after shedMaxRefusals undecided, the chain is a limit's. A share is
	// clearly higher or lower than another when a binomial test says so
	// at shedSignificance.
	shedMaxShare = 0.4
	// Below collapseDepth of the rate the key engaged from, a share of
	// every outcome up to collapseShare may be found independent of
	// the rate (see shedding.maxShare).
	collapseDepth    = 0.25
	collapseShare    = 0.5
	shedLowRate      = 0.7
	shedMinRefusals  = 3
	shedMaxRefusals  = 4 * shedMinRefusals
	shedDeepFloor    = 0.5
	shedSignificance = 0.01
	// An idle key engages once Page's cumulative sum (CUSUM) of the
	// log-likelihood ratio of its answers, refused at engageHigh against
	// engageLow, reaches engageAlarm (see keyState.suspect): seven
	// refusals in a row, or a share of half refused over some twenty
	// answers; refusals at random, up to a quarter, seldom.
	engageLow   = 0.25
	engageHigh  = 0.5
	engageAlarm = 4.6 // ln 100
	// coldSuspicion is a new key's: three refusals in a row among its
	// first answers engage it, before any success.
	coldSuspicion = engageAlarm - 3*math.Ln2
	// A rate in force over paceSlack times the rate the client sends at
	// does not hold it back (see keyState.paceHolds).
	paceSlack = 1.5
	// The rate the client sent at over a stage of the test is weighed
	// once the stage has lasted paceSpan attempts' time at the rate in
	// force.
	paceSpan = 4
	// A steady limit (see rateCurve.learn): throttles at rates within
	// steadyBand of each other find the same limit; the rate then grows
	// back to plateauShare of the lowest of them and holds there for
	// holdBase, doubled for each throttle more that finds it, up to
	// holdMax, before probing above it again.
	steadyBand   = 1.15
	plateauShare = 0.95
	holdBase     = 2 * time.Second
	holdMax      = 8 * time.Second
)
