package pacecore

import "time"

// Every tuning constant of the core, one line each with its reason (more
// in docs/pacing-design.md). One written from others is derived.
const (
	// The rate curves: the AWS SDKs' adaptive retry mode, and TCP Reno.
	cubicBeta  = 0.7 // rate kept on a CUBIC cut with no capacity measured (RFC 9438's β)
	cubicScale = 0.4 // C of CUBIC's growth curve (RFC 9438's, the SDKs')
	aimdCut    = 0.5 // rate kept on an AIMD cut: TCP Reno's halving
	aimdGrowth = 1.0 // AIMD's growth, requests per second per second: TCP's one segment per round trip

	DefaultMinRate       = 0.5 // MinRate's default: one attempt in 2 s keeps a key probing
	DefaultInitialWindow = 10  // slow start's window for presets of rate-limited APIs: TCP's (RFC 6928)

	// The meter.
	BucketWidth   = 250 * time.Millisecond // rates are read over one to two buckets: a few round trips, short enough to follow a burst
	meterBuckets  = 8                      // buckets the meter keeps: 2 s, enough for minSamples successes of a limit of a few requests a second
	minElapsed    = 10 * time.Millisecond  // shortest time a rate is read over: a burst's answers come within it
	minSamples    = 4                      // fewest successes that make evidence: of a capacity, or that a quota is not enforced
	capacityShare = 0.98                   // the rate is set this far below a capacity measured: below it, not far below

	// The evidence: Page's CUSUM, between a limit's share refused and not.
	engageLow    = 0.25 // a share this low is cheaper to retry than to pace
	engageHigh   = 0.5  // a share this high is a limit's, never random shedding
	evidence     = 4.6  // ln 100: the log-likelihood ratio that decides, wrong about once in a hundred
	coldRefusals = 3    // refusals in a row that engage a new key: a cold burst far over a limit

	// A steady limit: the capacity found again and again.
	steadyBand = 1.15                       // capacities within this ratio of each other are one limit
	holdBase   = meterBuckets * BucketWidth // the first hold at a limit found again: the meter's span, so the next find reads the held rate alone
	holdMax    = 4 * holdBase               // the longest, doubling per find: a limit that moves is found again within seconds

	outageTime = 4 * BucketWidth // nothing accepted for as long as this is an outage, no rate limit

	SlowStartLimit = 4 * BucketWidth // the longest slow start: slots whose answers never come hold no longer
)
