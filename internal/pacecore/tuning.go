package pacecore

import (
	"math"
	"time"
)

// Every tuning constant of the decision core, one line each: what it is,
// and why it has that value. The measurements behind them are in
// docs/pacing-design.md; bench/ablation shows what each mechanism buys.
// A constant written as another, or as its multiple, is derived, not
// tuned.
const (
	// The rate curves: the AWS SDKs' adaptive retry mode.
	cubicBeta  = 0.7 // rate kept on a CUBIC cut (RFC 9438's β, the SDKs' value)
	cubicScale = 0.4 // C of the cubic growth curve (RFC 9438's, the SDKs' value)
	aimdCut    = 0.5 // rate kept on an AIMD cut: TCP Reno's halving

	// Defaults of the settings.
	DefaultMinRate       = 0.5 // MinRate: one attempt in 2 s keeps a key probing
	DefaultInitialWindow = 10  // InitialWindow: TCP's initial window (RFC 6928)

	// Slow start.
	SlowStartLimit = time.Second // longest in slow start: slots held by answers that never come must not hold the others longer

	// The meter: the sending and accepted rates.
	BucketWidth = 500 * time.Millisecond // the period a rate is measured over: a few round trips, short enough to follow a burst
	smoothing   = 0.8                    // weight of the newest bucket in the smoothed rates: the last second dominates
	quietTime   = 4 * BucketWidth        // no answer for this long ends an idle key's rates: what it sends next is no continuation
	minSamples  = 8                      // fewest successes a bucket's own rate is read from (a count of 8 is known to ±35 %)
	minElapsed  = 10 * time.Millisecond  // shortest time a rate is read over: a cold burst's answers come within it
	// minElapsedModerate is minElapsed for a first cut with few refused:
	// a fast client's first throttle comes within a millisecond or two.
	minElapsedModerate = time.Millisecond

	// The capacity: what the server accepts while it refuses.
	acceptedShare = 0.9             // a cut stops at this share of the accepted rate: just below capacity, so jitter does not collide
	drainWindow   = 2 * BucketWidth // how long after the first throttle the successes since bound the accepted rate: a burst's fade
	drainedShare  = 0.75            // share refused since that throttle that keeps the bound: far above a limit, not shed at random
	growthLimit   = 1.25            // the rate grows to at most this times what the client sends: no credit for rates never tried
	regrant       = 1.1             // growth past this times the turns' rate voids them: slow turns must not outlive the rate

	// Engaging an idle key: Page's CUSUM of the answers' log-likelihood
	// ratio, refused at engageHigh against engageLow.
	engageLow     = 0.25                     // a share this low is cheaper to retry than to pace
	engageHigh    = 0.5                      // a share this high is a limit's
	engageAlarm   = 4.6                      // ln 100: seven refusals in a row, or half refused over some twenty answers
	coldSuspicion = engageAlarm - 3*math.Ln2 // a new key's start: three refusals in a row engage it (an outage, a cold burst)
	shedMaxShare  = 0.4                      // a first share at most this may be shedding: at 0.7 of its rate a limit refuses ≤ 14 %

	// Outages and fixed windows.
	outageShare     = 0.25        // before any success, cuts stop at this share of the first: turns stay within deadlines
	outageTime      = BucketWidth // shortest silence that ends an outage: a bucket
	outageSilence   = 10          // and ten spacings of the successes before: a window limiter's silence is shorter
	silenceCuts     = 3           // cuts in a silence that make it a window's
	silenceRefusals = 12          // refusals in a row that make a silence: shed 40 % at random, once in 60,000 attempts

	// The test of shedding (see shedding).
	shedLowRate      = cubicBeta           // a stage is weighed at this share of the chain's rate or below: one cut's depth
	shedMinRefusals  = 3                   // refusals at the low rate before a share is judged the same
	shedMaxRefusals  = 4 * shedMinRefusals // refusals undecided after which the chain is a limit's
	shedDeepFloor    = 0.5                 // the second stage goes no lower than this share of the low rate
	shedSignificance = 0.01                // a binomial test at this level calls two shares different
	collapseDepth    = 0.25                // below this share of the engaging rate, a limit's share is a burst's or small
	collapseShare    = engageHigh          // so a share up to a limit's may be shedding there: else shedding at 0.4 collapses the rate
	paceSlack        = 1.5                 // a rate over this times what the client sends holds nothing back: no stage
	paceSpan         = 4                   // attempts' time at the rate in force before a stage's sending rate is weighed

	// A steady limit (see rateCurve.learn).
	steadyBand   = 1.15            // throttles within this ratio of each other find one limit
	plateauShare = 0.95            // the rate holds at this share of it: below, but not far below
	holdBase     = 2 * time.Second // the first hold: a few probes' worth
	holdMax      = 4 * holdBase    // the longest, doubling per find: a limit that moves is found again within seconds
)
