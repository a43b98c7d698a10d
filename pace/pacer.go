// Package pace spaces the attempts of a [retry.Transport] at a rate it
// learns from each host's throttling, so that fewer are refused in the
// first place: the adaptive [Pacer], CUBIC or AIMD, with TCP's slow start
// for new hosts and an outage told apart from a rate limit by its
// silence. It plugs into the Transport through [retry.Pacer]:
//
//	rt := retry.New(nil, retry.WithPacer(&pace.Pacer{}))
package pace

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/backoff-jitter/retry"
	"github.com/backoff-jitter/retry/internal/clock"
)

// Adapt is how a [Pacer] adjusts its rate after throttling.
type Adapt uint8

const (
	// AdaptCubic, the zero value, cuts the rate to 0.7 times the measured
	// sending rate on a throttle and grows it back along a cubic curve that
	// returns to the old rate, then probes above it: the algorithm of the
	// AWS SDK's "adaptive" retry mode (itself TCP CUBIC, RFC 9438).
	AdaptCubic Adapt = iota
	// AdaptAIMD halves the rate on a throttle and adds a fixed amount per
	// second without one (additive increase, multiplicative decrease).
	AdaptAIMD
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

// Pacer spaces the attempts sent to each host at a rate it learns from the
// host's throttling, so that fewer requests are refused in the first place.
// It is opt-in ([retry.WithPacer]) and may be shared by several Transports.
//
// A key (a host, by default) that is new to the Pacer starts in slow
// start, as a TCP connection does: at most InitialWindow (10) of its
// attempts are unanswered at once, every answer opens one slot more, so
// the window doubles every round trip, and the first answer that no
// attempt is waiting for ends slow start. A client that sends fewer than
// ten requests at once never waits; a burst of a hundred to a new host
// waits a few round trips, once, and no longer than a second. In return,
// a cold start's burst against a rate limit is refused ten attempts at a
// time, not a hundred (see the figures below).
//
// After slow start a Pacer is idle, at the cost of a few atomic
// operations and no allocation per attempt, until throttled outcomes
// clearly say the key is over a limit: a cumulative sum (CUSUM) of its
// answers, ln 2 for each throttle and -ln 1.5 for each success, never
// below zero, reaches ln 100. That is seven refusals in a row (three
// among a new key's first answers), a half of the answers refused over
// twenty or so, a third over one to two hundred; refusals at random up
// to a tenth of the answers, almost never. A share that low is cheaper
// to retry than to pace: at most a third of an attempt more per request
// against a limit, where telling a limit from a load balancer refusing
// at random would cost a test at a lower rate (see docs/pacing.md, "A
// refusal now and then"). Nor does a throttle engage the key while fewer
// than a quarter of the attempts sent in the current half-second bucket
// are answered and no more than 0.4 of those are refused: the share
// cannot be read yet. A throttle with a Retry-After (or other server
// hint) engages the key at once, to pause it, as does the first throttle
// after an outage (below). From then on every attempt
// waits for its turn: turns are handed out first come, first served, one
// interval (1/rate) apart, after any backoff.
//
// The rate adapts as the AWS SDK's "adaptive" retry mode does, with two
// measurements added. A throttle of an attempt paced at the rate in force
// cuts the rate to 0.7 times it ([AdaptCubic]; 0.5 with [AdaptAIMD]), and
// the turns already handed out are void: their attempts stop waiting and
// take new turns at the new rate, instead of meeting the refusals the old
// one earned. While a client is refused, the rate at which its requests
// are still accepted is the server's capacity (as BBR takes the delivery
// rate for the bottleneck's), so the first cut goes at least as far as 0.9
// times it, bringing a cold start's burst down to the server's rate in one
// cut instead of a dozen, and later cuts go no further than that. A
// first throttle with 0.4 of the answers or fewer refused, by a server
// that has answered a quarter of the attempts or more, is no such burst:
// the client is near the server's capacity, or refused at random. Its
// rate, before a half-second of it is measured, is estimated over the
// millisecond it may have taken, not over ten, and cut to 0.9 times the
// share accepted, if that is less of a cut than the usual one (0.7; with
// AIMD's 0.5, it always is). Throttles of
// attempts sent before the cut (or before the Pacer engaged) cut nothing
// more: one cut answers one burst, as TCP cuts once per window.
// Successes grow the rate back, along a cubic curve that returns to the
// old rate and then probes above it ([AdaptCubic]), or by one request per
// second per second ([AdaptAIMD]); never beyond 1.25 times the rate the
// client was measured sending at (growth nothing has tested), and never
// below MinRate. A client that sends less does not lower the rate. Once
// the rate has grown to 1.1 times the rate queued turns were handed out
// at, they too are void, so that a queue does not hold the client at an
// old rate.
//
// A limit that stays where it is would be found again and again: a curve
// that grows back to the rate of the last throttle and probes above it is
// refused within seconds, every time (against a limit of 5 requests a
// second, about once a second, averaging 4 successes a second). So once
// two throttles come at rates within 15 % of each other, the Pacer takes
// them for one limit, at the lower rate, and the rate grows back only to
// 0.95 times that and holds there: 2 s, then twice as long for each
// throttle more that finds the same limit, up to 8 s, before it probes
// above again. A throttle during the hold lowers the limit to the rate
// it came at; the probe's throttle after a whole hold moves it halfway to
// the probe's rate (timing noise refuses some attempts paced below the
// limit, and the lowest rate alone would only ever fall); a throttle 15 %
// above or below it starts afresh. Only a throttle that follows a success
// since the last cut finds the limit: the cuts of one silence (below)
// count once.
//
// A fixed window limiter (N accepted at the start of each second or
// minute, nothing after) leaves a silence after each quota, every paced
// attempt refused. The success that ends it (twelve refusals in a row,
// three of them cuts or more) brings the rate back up to 0.9 times the
// successes since the last silence over the time since, window and
// silence together, if that is higher.
//
// Server hints set the pace before the server has to refuse: a response
// whose IETF RateLimit field says no quota remains (r=0, or
// RateLimit-Remaining: 0) pauses the key until the reset it names, and a
// throttled response's Retry-After (or other [retry.ServerWait] header) pauses it
// for that long; after a pause the waiting attempts leave one interval
// apart, not all at once.
//
// Every throttled outcome teaches the rate, a 503 (Service Unavailable)
// included: it is how S3 (SlowDown) and Azure Storage (ServerBusy)
// throttle. Refusal sets aside those that are not about the rate, such
// as Route 53's PriorRequestNotComplete (a conflict): a limit learned
// from them would hold the client below the real one. An outage refuses
// everything, and the rate it teaches would starve the key once the
// server is back; it is told apart from a limit by its silence. A
// success after two cuts or more and half a second without one, and ten
// times the usual spacing of successes before the refusals began (2 s at
// 5 requests a second: a limiter that admits its quota at the start of
// each second is silent for most of it), ends an outage: the key starts
// afresh, in slow start. A key refused from its first attempt on, with
// no success to measure, holds its rate at a quarter of the first cut's,
// probing, so that the requests waiting for turns are not pushed past
// their deadlines by a rate that says nothing of the server; nor is a
// wait refused for its deadline then (see Wait).
//
// A throttle is not always a rate limit: a load balancer shedding a
// share of requests at random, or a flaky backend, refuses the same share
// at any rate, and pacing slower would only queue the requests past
// their deadlines. A limit's refusals fall as the rate falls below it.
// So a chain of cuts is tested, in two stages. Once the rate is 0.7
// times where the chain began (or where a moderate first cut put it), a
// share refused about as often as before the first cut (from three
// refusals on: at least half the first share less two standard errors
// of its measure, and no more than the first share plus two standard
// errors) passes the first stage. As a token bucket's burst makes
// a limit's first share look smaller than it is, the test then goes on
// below what a limit accepted at that rate (0.9 of it, no lower than
// half the rate), where a limit's share falls, and only a share as high
// again there (at least what the first may have been, less two standard
// errors; and the share of every outcome so far at most 0.4, or 0.5
// below a quarter of the rate the key engaged from) shows the
// refusals not to depend on the rate. A share clearly
// higher or lower than the first (by a binomial test at 1 %), or
// undecided after twelve refusals, is a limit's: the chain ends, and
// cuts. Shares are counted without the refusal that stopped their count
// (a count that ends at a refusal overstates the share: at a quarter
// refused at random, 46 % on average up to the first), a first share too
// high to test is one clearly over 0.4 (by two standard errors; over 8
// outcomes, or 16 for a chain begun again after a limit's), and a rate
// the client does not send at (it sends slower) tests nothing, and cuts.
// The key goes back to idle, its waiting attempts go on at once, it
// forgets the rates measured while paced, and it remembers the share: a
// throttle engages it again (or, engaged, cuts its rate) only when the
// share refused over the last second or so is well above it (twice it,
// or halfway to all, whichever is less, and three standard deviations),
// as a limit's refusals would be. The test costs, once, the time of the
// attempts paced slower until it is decided, milliseconds for a fast
// client: against refusals at random, in bench/pacing's runs (40
// clients, 600 GETs of a few milliseconds in all, a median run 40 to 200
// ms), in the batches of 100 runs at 25 % refused recorded since the
// test's second stage, the CUBIC Pacer failed 0 to 8 of 60,000 requests
// per batch, AIMD 0 to 10, no Pacer 0 to 3 (before it: CUBIC 0 to 279
// per batch, AIMD 0 to 924, as a run now and then ratcheted its rate
// down past the requests' deadlines), and none at 5 and 10 %; its median
// time was 1.01 to 1.32 times no Pacer's at 25 %, 1.06 to 1.21 at 10 %
// and 1.17 to 1.33 at 5 % (docs/pacing.md, "The test in two stages" and
// the sections after it). A Pacer is for rate limits.
//
// Against nginx's limit_req at 100 requests/s (429, no Retry-After), 100
// clients making 3 requests each through one Transport needed 1.08
// attempts per request and 1.24 times the ideal 3 s (median of 10
// rounds) with the Pacer, against 6.02 attempts and 2.24 times with full
// jitter alone, and 1.20 and 1.20 with a limiter set to the known rate
// (bench/pacing). Against a limit with a burst (nginx's burst=10) it is
// as fast as that limiter but needs 1.18 to 1.25 attempts per request
// (AIMD 1.14 to 1.25) in the batches of 10 rounds recorded, against 1.00: a cold start's
// cuts still pay for the burst's successes (docs/pacing.md, "Against a
// burst"). Since the test of shedding has two stages, such a limit no
// longer passes for shedding in the runs recorded (docs/pacing.md, "The
// test in two stages").
//
// The zero value is ready to use. Fields must not be changed after first
// use. A Pacer is safe for concurrent use.
type Pacer struct {
	// Key maps a request to the limit it counts against. Nil means the
	// request's host (URL.Host); an API limited per account (Route 53
	// allows five requests a second per account) keys by the account.
	// It is called from concurrent RoundTrips and must be safe for
	// concurrent use.
	Key func(*http.Request) string

	// MinRate is the slowest the Pacer paces a key, in requests per
	// second. Zero means 0.5.
	MinRate float64

	// Adapt chooses how the rate is adjusted. Zero means [AdaptCubic].
	Adapt Adapt

	// Refusal, if not nil, reports whether a throttled outcome refused
	// the attempt for the rate it was sent at. Nil means every throttled
	// outcome did. Some refusals that a classifier rightly calls
	// Throttled (refused before processing, safe to replay) are not about
	// the rate: Route 53's PriorRequestNotComplete says a change to the
	// zone is still pending, and comes at any rate. Learned as a rate
	// limit, they would cut the rate and hold it below the real limit;
	// outcomes that Refusal rejects teach the Pacer nothing.
	// [github.com/backoff-jitter/retry/awsretry.RateRefusal] is one for
	// AWS APIs. Refusal may read the response's header and peek at its
	// body with [retry.PeekBody], not consume it. It is called from
	// concurrent RoundTrips and must be safe for concurrent use.
	Refusal func(retry.Feedback) bool

	// InitialWindow is how many attempts a key that is new to the Pacer
	// may have unanswered at once, in slow start (see above). Zero means
	// 10; a negative value turns slow start off, so that nothing waits
	// before the key engages (see suspect).
	InitialWindow int

	// MaxKeys is the most keys the Pacer remembers while they are not in
	// use. Zero means 10,000. A key with no attempt in flight or waiting
	// is forgotten once unused for 10 minutes, and, beyond MaxKeys keys,
	// the longest unused go first, those that never engaged before those
	// that did; a forgotten key that comes back starts afresh, in slow
	// start. So a crawler, a webhook dispatcher or a Key per tenant holds
	// a bounded table.
	MaxKeys int

	keys keyTable

	// Seams for tests: the clock, the sleep, and time.AfterFunc for slow
	// start's time limit. Nil means the real ones.
	now       func() time.Time
	sleep     func(ctx context.Context, d time.Duration) error
	afterFunc func(d time.Duration, f func()) (stop func() bool)
}

// keyState is what a Pacer knows of one key, in the groups below. The
// atomics are read without the lock on the fast path; everything else is
// guarded by mu.
type keyState struct {
	p       *Pacer
	engaged atomic.Bool // throttles (see suspect) or a spent quota engaged the Pacer

	use use // the key table's bookkeeping (see keyTable)

	mu     sync.Mutex
	start  slowStart
	sched  schedule
	rate   rateCurve
	meter  meter
	outage outage
	shed   shedding
}

// slowStart limits a key that has not engaged to slots unanswered
// attempts at once.
type slowStart struct {
	slow      atomic.Bool   // in slow start
	inflight  int           // attempts holding a slot
	slots     int           // the window: one slot more per success
	waiting   int           // attempts waiting for a slot
	wake      chan struct{} // closed when a slot frees or slow start ends
	stopLimit func() bool   // stops the timer of slowStartLimit
	// round counts the slow starts begun again (see restart): a timer
	// that fired as one began, and waited for the lock, ends nothing.
	round uint64
}

// schedule hands out the turns (see keyState.reserveAt).
type schedule struct {
	gen      uint64        // the turns' generation: +1 whenever they are void (see void)
	next     time.Time     // when the next turn is due
	interval time.Duration // between turns: 1/rate.fill
	paused   time.Time     // no attempt before this time
	granted  float64       // the rate of the turns handed out since the last void
	// turns is done when the turns handed out are void (see void); nil
	// until an attempt waits for a turn.
	turns       context.Context
	cancelTurns context.CancelFunc
}

// rateCurve is the rate in force and the curve it grows back along.
type rateCurve struct {
	fill    float64   // the rate in force, requests per second
	lastMax float64   // rate at the last throttle
	lastCut time.Time // time of the last throttle
	cutTo   float64   // the rate the last throttle cut to
	window  float64   // seconds the cubic curve takes back to lastMax
	// limit is the rate the throttles have found the limit at (the
	// lowest of theirs, moved halfway toward a probe's; see learn), and
	// steady how many throttles more have found it since the first; 0
	// and 0: none yet.
	limit  float64
	steady int
}

// learn updates the steady limit after a throttle at rate base, the rate
// in force (engaged) or the rate the client was measured sending at, t
// seconds after the last cut; afterOK if a success came since that cut
// (or the key was not engaged).
//
// On a steady limit, a curve that grows back to the rate of the last
// throttle and probes above it finds the limit again within seconds,
// and pays for it each time with a refusal and a cut: against nginx's
// limit_req at 5 requests/s, CUBIC alone was refused about once a second
// and averaged 4 successes a second, 0.8 of the limit. So throttles at
// rates within steadyBand of each other are taken to find one limit, its
// rate the lowest of theirs (a throttle below the others is the closer
// measure), and the curve holds below it for a while (see hold). But a
// throttle of the probe that follows a whole hold without one moves the
// limit halfway to its rate: timing noise (attempts that arrive late,
// then one on time) can refuse an attempt paced below the limit, and the
// lowest rate alone would only ever fall. A throttle clearly above or
// below the limit begins again: the limit moved.
//
// Only a throttle that follows a success since the last cut finds the
// limit: the cuts of one silence, a fixed window's refusing everything
// until it ends, come 0.9 times apart, and counted as finds they made a
// steady limit of 16 within a second, held at for 8 s at 8 to 10 a
// second against a window of 20 (see resume).
func (r *rateCurve) learn(base float64, engaged, afterOK bool, t float64, adapt Adapt) {
	if engaged && !afterOK {
		return
	}
	switch {
	case !engaged || r.limit <= 0 || base > steadyBand*r.limit || base*steadyBand < r.limit:
		r.limit, r.steady = base, 0
	case r.steady > 0 && t > r.reach(adapt)+r.hold().Seconds():
		r.limit, r.steady = (r.limit+base)/2, r.steady+1
	default:
		r.limit, r.steady = min(r.limit, base), r.steady+1
	}
}

// aim sets the curve the rate grows back along, from the rate from (set
// at now, by a cut or by resume) to top and beyond: CUBIC's takes window
// seconds back to top, AIMD's grows from cutTo.
func (r *rateCurve) aim(top, from, minRate float64, now time.Time, adapt Adapt) {
	r.lastMax, r.lastCut, r.cutTo = top, now, max(from, minRate)
	if adapt == AdaptCubic {
		r.window = math.Cbrt(max(top-from, 0) / cubicScale)
	}
}

// hold returns how long the curve holds at plateauShare of a steady
// limit before it probes above it: 0 until a second throttle finds the
// limit, then holdBase, doubled for each throttle more, up to holdMax.
// Probing less often on a limit found again and again spends fewer
// refusals on it, and the limit moving shows within holdMax.
func (r *rateCurve) hold() time.Duration {
	if r.steady == 0 {
		return 0
	}
	return min(holdBase<<min(r.steady-1, 8), holdMax)
}

// reach returns the seconds after the last cut at which the curve of
// adapt reaches plateauShare of the steady limit: 0 if the cut left the
// rate there or above.
func (r *rateCurve) reach(adapt Adapt) float64 {
	p := plateauShare * r.limit
	if r.cutTo >= p {
		return 0
	}
	if adapt == AdaptAIMD {
		return p - r.cutTo // one request per second per second
	}
	return max(r.window+math.Cbrt((p-r.lastMax)/cubicScale), 0)
}

// meter measures the rates the key is sent and accepted at, in buckets of
// bucketWidth. Its atomics are counted without the lock.
type meter struct {
	okOnce atomic.Bool  // a success has been seen
	sent   atomic.Int64 // attempts sent in the current bucket
	// active counts the attempts between Wait and their turn's Done or
	// Abandon, waits included: the key table never forgets a key with
	// any (see keyTable). It sits beside sent and ok, which the same
	// attempt writes just after and just before it, to share their cache
	// line.
	active     atomic.Int64
	sentBefore int64        // attempts sent in the buckets before it, under s.mu
	ok         atomic.Int64 // successes in the current bucket
	// bucketEnd is when the current bucket ends (0: none yet), for the
	// lock-free fast path: in nanoseconds after the key was made (see
	// keyState.since), a monotonic reading, as every other comparison of
	// times here is, so that a step of the wall clock cannot hold the
	// bucket open.
	bucketEnd atomic.Int64

	refused int64 // throttles in the current bucket
	// lastOK and lastRefused are the successes and throttles of the
	// bucket before.
	lastOK, lastRefused int64
	measured            float64   // smoothed sending rate, requests per second
	accepted            float64   // smoothed success rate, requests per second
	bucket              time.Time // start of the current bucket
	sampled             bool      // a whole bucket has been measured
	// drained is when the key's first throttle (since it was last idle)
	// found the server's bucket empty, and drainedOK and drainedRefused
	// count the successes and throttles since (see acceptedRate); zero:
	// none since (a key engaged by a server's hint has not drained it).
	drained                   time.Time
	drainedOK, drainedRefused int64
	// suspicion is the idle key's CUSUM (see keyState.suspect), +Inf
	// after a restart, and suspectOK the current bucket's successes it
	// has weighed.
	suspicion float64
	suspectOK int64
}

// sends returns the attempts the key has sent since it was created. The
// caller holds s.mu.
func (m *meter) sends() int64 { return m.sentBefore + m.sent.Load() }

// bucketRate returns the rate of the attempts sent in the current bucket,
// over the time since it began or floor, whichever is longer: the sending
// rate before a whole bucket is measured. The caller holds s.mu.
func (m *meter) bucketRate(now time.Time, floor time.Duration) float64 {
	return float64(m.sent.Load()) / max(now.Sub(m.bucket), floor).Seconds()
}

// answeredShare returns the share of the current bucket's answers
// refused, and whether it reads the share of the attempts sent: whether
// the server has answered a quarter of them or more. A burst that it
// answers far slower than it was sent says less of the share than of the
// server's capacity. The caller holds s.mu.
func (m *meter) answeredShare() (share float64, read bool) {
	refused := float64(m.refused)
	answered := refused + float64(m.ok.Load())
	if answered == 0 {
		return 0, false
	}
	return refused / answered, 4*answered >= float64(m.sent.Load())
}

// takeSent ends the current bucket's count of attempts sent, adding it to
// sentBefore, and returns it. The caller holds s.mu.
func (m *meter) takeSent() int64 {
	n := m.sent.Swap(0)
	m.sentBefore += n
	return n
}

// outage tells an outage from a rate limit: cuts with no success between
// them, then a success a while after the last one.
type outage struct {
	lastOK      time.Time // the last success (or engaging), engaged
	cutsSinceOK int       // cuts since then
	base        float64   // the rate the first of them set
	holding     bool      // the rate is held at outageShare of base
	// unheld is closed when the hold ends, for the attempts that wait
	// for it (see reserveBy); nil while none does.
	unheld chan struct{}
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

// shedding tells a rate limit from refusals that do not depend on the
// rate: a load balancer shedding a share of requests at random, a flaky
// backend. A limit refuses a share that falls as the rate falls below it;
// shedding refuses the same share at any rate, and cutting on it would
// ratchet the rate down cut after cut (each floored at a share of an
// accepted rate that falls with it), until requests fail waiting for
// turns that retries alone would not have needed.
//
// So a chain of cuts is watched from its first: the rate before it, and
// the share of the attempts refused before it (counted without the
// refusal that cut; see stoppedShare). Unless that share is clearly over
// shedMaxShare (0.7 times the rate, a limit refuses nothing if that share
// was 0.3 or less, and at most 14 % at 0.4; see limitShare), the chain is
// tested in two stages. At 0.7 times its rate or less (or the rate of a
// moderate first cut, see low), the attempts paced at the rate in force
// must still be refused at no less than half the first share and no
// more than it (each as it may have been; see hiLower and hiUpper); then,
// as a token bucket's burst makes a limit's first share look smaller than
// it is, again at a rate below what a limit accepted there (see deepen),
// at no less than the first share. Then the refusals do not come from
// the rate: the key disengages, and remembers the share. A throttle then
// engages the key again, or cuts an engaged key's rate, only when the
// share refused over the last two buckets is well above it (see noise),
// as a limit's refusals grow with the rate. The chain ends as a limit's
// when the share at the lower rate has clearly fallen or risen (see test
// and keyState.testSuccess), or stays undecided for shedMaxRefusals
// refusals, and ends when the key restarts or disengages.
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
	// at rates the limit refuses most of, eight of them can pass for a
	// moderate share by chance (3 of 8 where a window limiter refused
	// 60 %), and the test took a limit for shedding. Such a chain's
	// first share is weighed over twice as many (see need).
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
	// share is the refusal share found not to depend on the rate,
	// lowered while idle by buckets refused less often (see decay); 0:
	// none.
	share float64
	// origin is the rate the key engaged from (the base of its first
	// cut); 0 while idle. See test.
	origin float64
}

// Wait returns when the next attempt of req may be sent: while req's key
// is in slow start, once it holds a slot of the window; once the key has
// engaged, at its turn. A turn made void while the attempt waits for it
// (the rate was cut, the key paused or restarted) is given up for a new
// one. A wait that would end past ctx's deadline is not begun, and takes
// no turn: Wait returns an error that wraps [context.DeadlineExceeded] at
// once; except while the key holds its rate through an outage (refused
// from its first attempt on), when the wait is a probe's, no forecast:
// the attempt then waits, with no turn, for the hold to end (a success)
// or for ctx. It implements [retry.Pacer].
func (p *Pacer) Wait(ctx context.Context, req *http.Request) (retry.Turn, error) {
	s := p.acquire(req)
	t, err := p.wait(ctx, s)
	if err != nil {
		s.finish(p.clock())
	}
	return t, err
}

// wait is Wait for the key's state s.
func (p *Pacer) wait(ctx context.Context, s *keyState) (retry.Turn, error) {
	for {
		slot, err := p.admit(ctx, s)
		if err != nil {
			return nil, err
		}
		if slot {
			// In slow start: the key has not engaged, no turn to take.
			s.meter.sent.Add(1) // the sending rate counts attempts sent, not waiting
			return &turn{s: s, slot: true}, nil
		}
		now := p.clock()
		d, res, ok, held := s.reserveBy(ctx, now)
		if !ok && held != nil {
			// The rate is held through an outage: the wait it gives
			// says nothing of when the server answers again. The
			// attempt waits, with no turn, for the hold to end (a
			// success restarts the key), or for its context.
			select {
			case <-held:
				continue
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		if !ok {
			return nil, fmt.Errorf("retry: pacing wait of %v would end past the context's deadline: %w", d, context.DeadlineExceeded)
		}
		if res == nil {
			s.meter.sent.Add(1)
			return (*idleTurn)(s), nil // not engaged: no allocation
		}
		if d > 0 {
			if err := p.waitTurn(ctx, d, res); err != nil {
				res.cancel()
				return nil, err
			}
			if res.stale() {
				continue
			}
		}
		s.meter.sent.Add(1)
		return &turn{s: s, gen: res.gen}, nil
	}
}

// waitTurn waits d for the turn res, or until it is void. Only the
// context's end is an error.
func (p *Pacer) waitTurn(ctx context.Context, d time.Duration, res *reservation) error {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(res.turns, cancel)
	defer stop()
	sleep := p.sleep
	if sleep == nil {
		sleep = clock.Sleep
	}
	if err := sleep(wctx, d); err != nil && ctx.Err() != nil {
		return ctx.Err()
	}
	return nil
}

func (p *Pacer) clock() time.Time {
	if p.now != nil {
		return p.now()
	}
	return time.Now()
}

// turn is an attempt's turn on a key that has engaged, or its slot of
// slow start.
type turn struct {
	s    *keyState
	slot bool   // holds a slot of slow start
	gen  uint64 // the generation of the rate it was paced at; 0: not paced
}

func (t *turn) Done(f retry.Feedback) {
	now := t.s.p.clock()
	t.s.p.observeState(t.s, t.slot, f, t.gen, now)
	t.s.finish(now)
}

func (t *turn) Abandon() {
	if t.slot {
		t.s.release(false)
	}
	t.s.finish(t.s.p.clock())
}

// idleTurn is the turn of an attempt on a key that has neither engaged nor
// is in slow start: the key's state itself, so that it costs no
// allocation.
type idleTurn keyState

func (t *idleTurn) Done(f retry.Feedback) {
	s := (*keyState)(t)
	now := s.p.clock()
	s.p.observeState(s, false, f, 0, now)
	s.finish(now)
}

func (t *idleTurn) Abandon() {
	s := (*keyState)(t)
	s.finish(s.p.clock())
}

func (p *Pacer) initialWindow() int {
	if p.InitialWindow == 0 {
		return defaultInitialWindow
	}
	return p.InitialWindow
}

func (p *Pacer) minRate() float64 {
	if p.MinRate > 0 {
		return p.MinRate
	}
	return defaultMinRate
}

// Validate reports invalid settings.
func (p *Pacer) Validate() error {
	switch {
	case p.MinRate < 0 || math.IsNaN(p.MinRate) || math.IsInf(p.MinRate, 0):
		return fmt.Errorf("retry: Pacer.MinRate %v is not a finite positive rate", p.MinRate)
	case p.Adapt > AdaptAIMD:
		return fmt.Errorf("retry: Pacer.Adapt %d is not a known algorithm", p.Adapt)
	}
	return nil
}

// admit waits, while s is in slow start, for a slot of its window, and
// reports whether the attempt took one; the slot is given back by
// [Pacer.observeState] or [keyState.release]. Out of slow start it
// returns at once: on a key that has left it, at the cost of one atomic
// load. The wait ends with ctx, and slow start itself ends no later than
// slowStartLimit after its first attempt.
func (p *Pacer) admit(ctx context.Context, s *keyState) (bool, error) {
	if !s.start.slow.Load() {
		return false, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.start.stopLimit == nil && s.start.slow.Load() {
		after := p.afterFunc
		if after == nil {
			after = func(d time.Duration, f func()) func() bool { return time.AfterFunc(d, f).Stop }
		}
		round := s.start.round
		s.start.stopLimit = after(slowStartLimit, func() {
			s.mu.Lock()
			defer s.mu.Unlock()
			if s.start.round == round { // not a slow start begun since
				s.leaveSlowStart()
			}
		})
	}
	for s.start.slow.Load() && s.start.inflight >= s.start.slots {
		if s.start.wake == nil {
			s.start.wake = make(chan struct{})
		}
		wake := s.start.wake
		s.start.waiting++
		s.mu.Unlock()
		var err error
		select {
		case <-wake:
		case <-ctx.Done():
			err = ctx.Err()
		}
		s.mu.Lock()
		s.start.waiting--
		if err != nil {
			return false, err
		}
	}
	if !s.start.slow.Load() {
		return false, nil
	}
	s.start.inflight++
	return true, nil
}

// release gives back a slow-start slot. An answer opens one slot more
// (the window doubles every round trip, as TCP's slow start does), and an
// answer that nothing is waiting for ends slow start: the window no
// longer limits the client.
func (s *keyState) release(answered bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.start.inflight--
	if !s.start.slow.Load() {
		return
	}
	if answered {
		s.start.slots++
		if s.start.waiting == 0 {
			s.leaveSlowStart()
			return
		}
	}
	s.wakeAll()
}

// leaveSlowStart ends slow start and lets every waiting attempt go on.
// The caller holds s.mu.
func (s *keyState) leaveSlowStart() {
	if !s.start.slow.Load() {
		return
	}
	s.start.slow.Store(false)
	if s.start.stopLimit != nil {
		s.start.stopLimit()
	}
	s.wakeAll()
}

// wakeAll wakes the attempts waiting for a slot, to look again.
func (s *keyState) wakeAll() {
	if s.start.wake != nil {
		close(s.start.wake)
		s.start.wake = nil
	}
}

// reserveAt takes a token for an attempt about to be sent at time now,
// and returns how long the attempt must wait for it. A pacer that has not
// engaged for the key returns 0 and a nil reservation, at the cost of one
// atomic load. cancel gives the token back when the attempt is not sent.
//
// Tokens are handed out first come, first served, one interval apart:
// each at the later of now and the previous token's time plus the
// interval (virtual scheduling, the GCRA of ATM networks, with a burst of
// one). A cut, a pause or a large growth of the rate voids the tokens
// handed out before it and starts the schedule again (see reschedule):
// their attempts wake and take new tokens, so no two tokens of one
// schedule are ever due closer than its interval. A
// [golang.org/x/time/rate.Limiter] does not fit here: changing its limit
// re-prices the tokens owed, and new reservations then fall between those
// already handed out, so the paced attempts arrive in clumps that a
// strict limiter refuses. Tokens are
// taken at the time of sending, after any backoff, as in the AWS SDK's
// adaptive mode.
func (s *keyState) reserveAt(now time.Time) (time.Duration, *reservation) {
	d, res, _, _ := s.reserveBy(context.Background(), now)
	return d, res
}

// reserveBy is reserveAt for an attempt that must be sent by ctx's
// deadline: a token due after it is not handed out, and it returns the
// wait and false. Handed out and given back (see reservation.cancel),
// such a token stayed spent whenever another was handed out in between:
// callers that fail fast and call again (a worker pool whose jobs have
// deadlines) pushed the schedule out by an interval for each refusal,
// faster than it drained, until every wait was past every deadline. The
// deadline is read only for a key that has engaged: an idle key's turn
// costs what it did.
//
// While the rate is held through an outage (nothing accepted yet, see
// keyState.throttled), the wait is no forecast: the rate held is a probe's,
// and the first success restarts the key in slow start. A wait past the
// deadline is then not refused, nor does it take a turn: reserveBy
// returns, with false, a channel closed when the hold ends, for the
// attempt to wait on. Refused, the attempts of 1000 clients held at
// AIMD's 125/s failed at 1 to 2 s on deadlines of 8 s, in an outage of
// 1 s.
func (s *keyState) reserveBy(ctx context.Context, now time.Time) (time.Duration, *reservation, bool, <-chan struct{}) {
	if !s.engaged.Load() {
		return 0, nil, true, nil
	}
	dl, hasDeadline := ctx.Deadline()
	s.mu.Lock()
	defer s.mu.Unlock()
	start := now
	if s.sched.paused.After(start) {
		start = s.sched.paused
	}
	if s.sched.next.After(start) {
		start = s.sched.next
	}
	if hasDeadline && start.After(now) && start.After(dl) {
		if !s.outage.holding {
			return start.Sub(now), nil, false, nil
		}
		if s.outage.unheld == nil {
			s.outage.unheld = make(chan struct{})
		}
		return start.Sub(now), nil, false, s.outage.unheld
	}
	s.sched.next = start.Add(s.sched.interval)
	if s.sched.turns == nil {
		s.sched.turns, s.sched.cancelTurns = context.WithCancel(context.Background())
	}
	return start.Sub(now), &reservation{s: s, at: start, next: s.sched.next, gen: s.sched.gen, turns: s.sched.turns}, true, nil
}

// reservation is a token taken by [keyState.reserveAt].
type reservation struct {
	s    *keyState
	at   time.Time // when the token is due
	next time.Time // the next token's time it set
	gen  uint64    // the generation of the rate the token was taken at
	// turns is done when the token is void: its attempt stops waiting
	// for it and takes a new one.
	turns context.Context
}

// cancel gives the token back if no later one was handed out since: a
// token in the middle of the schedule stays spent, which only spaces the
// attempts a little more.
func (r *reservation) cancel() {
	if r == nil {
		return
	}
	r.s.mu.Lock()
	defer r.s.mu.Unlock()
	if r.s.sched.next.Equal(r.next) {
		r.s.sched.next = r.at
	}
}

// stale reports whether the rate or the pause changed since the token was
// handed out: its time is void, and the attempt takes a new token.
func (r *reservation) stale() bool {
	if r == nil {
		return false
	}
	r.s.mu.Lock()
	defer r.s.mu.Unlock()
	return r.gen != r.s.sched.gen
}

// generation returns the generation of the rate the attempt was paced at,
// 0 when it was not paced.
func (r *reservation) generation() uint64 {
	if r == nil {
		return 0
	}
	return r.gen
}

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

// tooEarly reports whether a throttle comes too early in the current
// bucket to read its share of refusals: fewer than a quarter of the
// attempts sent in it answered (throttled reads no share then, and
// takes the refusals for a burst's far above a limit), and no more than
// shedMaxShare of those refused. Forty clients shed 5 % at random, their
// first forty attempts answered at once, engaged on a refusal that came
// ninth: taken for a burst's, the rate was measured over 10 ms, not
// one (4,800/s against the 40,000/s sent), and the test of shedding ran
// there; the run took 180 to 420 ms where it takes 20 without a Pacer,
// in about a tenth of the simulated runs. A burst's refusals soon pass shedMaxShare of the
// answers, and engage the key as before. The caller holds s.mu.
func (s *keyState) tooEarly() bool {
	share, read := s.meter.answeredShare()
	return !read && share <= shedMaxShare
}

// suspect weighs a throttle of an idle key, and the successes before it,
// and reports whether the key's answers now say it is over a limit:
// whether the CUSUM of their log-likelihood ratio, refused at engageHigh
// against engageLow, reaches engageAlarm. Each throttle adds ln 2, each
// success takes ln 1.5 away, never below zero. A limit that refuses most
// of what the client sends engages the key after seven refusals in a row
// (two before, which a quarter refused at random begins with one time in
// sixteen); a new key's sum starts at coldSuspicion, so that three in a
// row among its first answers engage it (an outage, or a cold burst far
// above a limit: with seven, a storm's clients were paced through a 1 s
// outage at a rate 60 % higher, the rate held there being a share of the
// first cut's, measured from the attempts sent before it), and a key
// restarted after an outage engages on its first throttle (see restart).
// The sum implies what a key's first answers had to show before (two
// refusals or more, over 0.4 of them, or eight answers). A share of a
// half engages the key after twenty answers or so; two fifths, after
// about fifty; a third, after one to two hundred; a share below a
// quarter, seldom (none of 2,000 simulated runs of 800 answers at a
// tenth refused; half of them at a quarter, after 330 answers or so).
// Such a share is cheaper to retry than to pace: at most a third of an
// attempt more per request, where telling a limit's refusals from
// shedding (see shedding) costs a test at a lower rate, and a cold start
// measures its sending rate low (40 clients on loopback sent at half the
// rate they later did while their connections were dialled, and the test
// ran there). The sum counts from where the key last went idle, and a
// success after a long calm holds it at zero: a limit reached after it,
// a fixed window's quota spent, is weighed from its first refusal. The
// caller holds s.mu.
func (s *keyState) suspect() bool {
	// One load: a success counted between two would never be weighed.
	ok := s.meter.ok.Load()
	s.meter.weigh(ok - s.meter.suspectOK)
	s.meter.suspectOK = ok
	s.meter.suspicion += math.Log(engageHigh / engageLow)
	return s.meter.suspicion >= engageAlarm
}

// weigh folds okN successes into the idle key's CUSUM: each takes the
// same away, and the sum stops at zero, so that they count at once. The
// caller holds s.mu.
func (m *meter) weigh(okN int64) {
	if okN > 0 {
		m.suspicion = max(0, m.suspicion+float64(okN)*math.Log((1-engageHigh)/(1-engageLow)))
	}
}

// measure folds the attempts sent in each half-second bucket that has
// ended into the smoothed sending rate.
func (s *keyState) measure(now time.Time) {
	if s.meter.bucket.IsZero() {
		s.meter.bucket = now
		s.meter.bucketEnd.Store(s.since(now.Add(bucketWidth)))
	}
	if elapsed := now.Sub(s.meter.bucket); elapsed >= bucketWidth {
		sec := elapsed.Seconds()
		okN, refused := s.meter.ok.Swap(0), s.meter.refused
		if !s.engaged.Load() {
			s.meter.weigh(okN - s.meter.suspectOK)
			s.shed.idleBucket(okN, refused)
		}
		s.meter.suspectOK = 0
		s.meter.refused = 0
		s.meter.lastOK, s.meter.lastRefused = okN, refused
		sent, ok := float64(s.meter.takeSent())/sec, float64(okN)/sec
		switch {
		case elapsed >= quietTime && !s.engaged.Load():
			// No answer for quietTime: the key was quiet, and what it
			// sends next is no continuation of the rate before. Folded
			// in, the quiet bucket pulled the rate down to a fraction of
			// what the client sent when it was busy, and a burst's first
			// cut came from that (AIMD: 6/s where the same burst without
			// the gap cut to 35/s). The burst is measured afresh, as a new
			// key's is.
			s.meter.measured, s.meter.accepted, s.meter.sampled = 0, 0, false
		case !s.meter.sampled:
			// The first bucket is the estimate, not a fifth of it.
			s.meter.measured, s.meter.accepted, s.meter.sampled = sent, ok, true
		default:
			s.meter.measured = sent*smoothing + s.meter.measured*(1-smoothing)
			s.meter.accepted = ok*smoothing + s.meter.accepted*(1-smoothing)
		}
		s.meter.bucket = now
		s.meter.bucketEnd.Store(s.since(now.Add(bucketWidth)))
	}
}

// throttled cuts the rate below the rate the client was sending at.
func (s *keyState) throttled(now time.Time, adapt Adapt, minRate float64) {
	// Engaged, the rate in force is what the server refused. Before, it
	// is the rate the client was measured sending at; throttled before a
	// whole bucket was measured, the attempts sent so far, over at least
	// minElapsed (minElapsedModerate for a moderate share), estimate it.
	base, share := s.rate.fill, 1.0
	if !s.engaged.Load() {
		defer s.meter.drain(now)
		// The successes so far begin the first cycle (see resume).
		s.outage.cycleStart, s.outage.cycleOK = s.meter.bucket, s.meter.ok.Load()
		s.outage.lastOK, s.outage.cutsSinceOK = now, 0 // an outage is timed from here
		s.endHold()
		s.outage.refusedSinceOK = 1
		if sh, read := s.meter.answeredShare(); read {
			share = sh
		}
		base = s.meter.measured
		if base <= 0 {
			elapsed := minElapsed
			if share <= shedMaxShare {
				elapsed = minElapsedModerate
			}
			base = s.meter.bucketRate(now, elapsed)
		}
	}
	s.shed.cut(s, base, now)
	s.rate.learn(base, s.engaged.Load(), s.outage.cutsSinceOK == 0, now.Sub(s.rate.lastCut).Seconds(), adapt)
	if s.outage.cutsSinceOK == 0 {
		// The first cut of a streak: what came before tells an outage's
		// silence from a limit's pauses (see outageOver).
		s.outage.streakAccepted, s.outage.streakAfterOK = s.meter.accepted, s.meter.okOnce.Load()
	}
	s.outage.cutsSinceOK++
	s.void()
	var next float64
	switch adapt {
	case AdaptAIMD:
		next = base * aimdCut
	default:
		next = base * cubicBeta
	}
	// A rate limit has a fixed capacity, and while the client is being
	// refused, the rate at which it is still accepted measures it (as
	// BBR takes the delivery rate for the bottleneck's).
	switch c := s.acceptedRate(now); {
	case !s.engaged.Load() && share <= shedMaxShare:
		// Few of the answers refused, and the server keeping up: the
		// client is near the server's capacity, or refused at random
		// (see shedding), not far above a limit. A limit is then at
		// about (1-share) times the rate measured, and the cut goes to
		// just below that, if that is less of a cut; the test of
		// shedding weighs the refusals there. The rate was measured
		// over a millisecond or more, not ten: the first throttle of a
		// fast client comes within a millisecond or two, and its
		// attempts over ten would be a tenth of its rate.
		next = max(next, acceptedShare*(1-share)*base)
		// As setRate will clamp it: below MinRate, no rate in force
		// would ever be at or below the low rate, and the test would
		// never weigh an outcome.
		s.shed.lowRate = max(next, minRate)
	case !s.engaged.Load() && c > 0:
		// The first cut goes at least that far: from the burst of a
		// cold start, at thousands of requests a second, multiplying
		// by 0.7 would take a dozen cuts, each paid for with a round
		// of refusals.
		next = min(next, acceptedShare*c)
	case c > 0:
		// Later cuts go no further than just below it, as long as that
		// is a cut at all: a rate near the limit was found, and a deep
		// cut would take seconds of cubic growth to win back.
		next = max(next, acceptedShare*min(c, base))
	}
	switch {
	case s.outage.streakAfterOK:
		// The server has accepted requests: refused now, it is over
		// its limit, or down; either way the rate comes down.
	case s.outage.cutsSinceOK == 1:
		s.outage.base = next
	case next < outageShare*s.outage.base:
		// Never a success yet: the rate the cuts approach is the
		// outage's, not the server's. Held here, the waiting requests
		// keep turns within their deadlines until it answers.
		next = outageShare * s.outage.base
		s.outage.holding = true
	}
	s.rate.aim(base, next, minRate, now, adapt)
	s.setRate(next, minRate)
	// The turns handed out at the old rate would meet refusals.
	s.reschedule(now)
}

// acceptedRate returns the rate of successes: the smoothed rate, or the
// current bucket's if that is higher (it is fresher) and counts at least
// minSamples successes.
//
// A token bucket's burst inflates both: a limiter of 100 requests a second
// with a burst of 10 accepts 11 at once, and 11 successes within the 10 ms
// of a cold start's first cuts measured 1100 a second, so that every cut
// of the cascade that followed stopped at 0.9 of a rate the server had
// never kept up (21 to 26 cuts from thousands a second in the runs
// traced, each paid for with refusals). Once a throttle has found the bucket empty, and while
// the client keeps it empty (drainedShare of the answers since refused),
// the successes since come at the rate it refills: for drainWindow after
// the first throttle, the rate is no more than theirs over the time
// since, or, fewer than minSamples of them, than minSamples over it. A
// client refused at random is not bounded so: cut to the share accepted
// since its first throttle, it would be cut again and again (see
// shedding).
func (s *keyState) acceptedRate(now time.Time) float64 {
	m := &s.meter
	c := m.accepted
	if n := m.ok.Load(); n >= minSamples {
		c = max(c, float64(n)/max(now.Sub(m.bucket), minElapsed).Seconds())
	}
	if e := now.Sub(m.drained); !m.drained.IsZero() && e > 0 && e < drainWindow &&
		float64(m.drainedRefused) > drainedShare*float64(m.drainedOK+m.drainedRefused) {
		// Over the time since, not minElapsed: a bound that holds a
		// client of thousands a second to minSamples in 10 ms would
		// cut it far below what it is accepted at.
		c = min(c, float64(max(m.drainedOK, minSamples))/e.Seconds())
	}
	return c
}

// drain notes the key's first throttle since it was idle: the server's
// bucket is empty (see acceptedRate). The caller holds s.mu.
func (m *meter) drain(now time.Time) {
	m.drained, m.drainedOK, m.drainedRefused = now, 0, 0
}

// succeeded grows the rate back after a throttle.
func (s *keyState) succeeded(now time.Time, adapt Adapt, minRate float64) {
	t := now.Sub(s.rate.lastCut).Seconds()
	if h := s.rate.hold(); h > 0 {
		// On a steady limit the curve stops at plateauShare of it for
		// the hold, then goes on from there.
		if reach := s.rate.reach(adapt); t > reach {
			t = max(reach, t-h.Seconds())
		}
	}
	var next float64
	switch adapt {
	case AdaptAIMD:
		// One request per second more for every second without a
		// throttle, from the rate the cut set.
		next = s.rate.cutTo + t
	default:
		d := t - s.rate.window
		next = cubicScale*d*d*d + s.rate.lastMax
	}
	// Growth beyond what the client is measured sending at is growth
	// nothing has tested: a client whose turns were handed out at the old
	// rate would find, once they are spent, a rate the server refuses.
	// So the rate grows only from a measured sending rate. Nor does a
	// client that sends less lower the rate it has learned.
	if next > s.rate.fill {
		next = min(next, max(s.rate.fill, growthLimit*s.meter.measured))
	}
	s.setRate(next, minRate)
	// Turns queued at a rate well below the new one would keep the client
	// at the old rate for as long as the queue lasts: they are void, and
	// their attempts take turns at the new rate.
	if s.sched.next.After(now) && s.rate.fill >= regrant*s.sched.granted {
		s.reschedule(now)
	}
}

// silenceOver reports whether a success ends a silence: silenceRefusals
// refusals or more in a row, silenceCuts of them cuts or more. Not while
// a test of shedding is under way: its stage holds the rate (see
// testSuccess). The caller holds s.mu.
func (s *keyState) silenceOver() bool {
	return s.outage.cutsSinceOK >= silenceCuts && s.outage.refusedSinceOK >= silenceRefusals && !s.shed.testing(s)
}

// resume is called on the success that ends a silence (see silenceOver).
//
// A fixed window limiter (an API gateway's quota of N a second, or a
// minute; Envoy's local rate limit, a token bucket filled once a window)
// accepts its quota at the start of each window and refuses everything
// after it. Every paced refusal of the silence that follows cuts, and the
// key came out of it at a fraction of what the window accepts: 8 workers
// against 20 a second sent 52 successes in 4 s where 88 were possible,
// the rate held at 8.6/s. The successes since the last silence ended (or
// since the key's first bucket) over the time since are what the limiter
// accepts, window and silence together; the rate comes back to
// acceptedShare of that, if it is lower, and its curve grows back to that
// rate from there. The first silence cannot tell a window of N from a
// token bucket with a burst of N-1 refilled once in as long; a bucket's
// next silence, one success long, counts too few successes (minSamples)
// to resume from, and its cuts go on. An outage's end is outageOver's:
// the key starts again. The caller holds s.mu.
func (s *keyState) resume(now time.Time, adapt Adapt, minRate float64) {
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

// reschedule voids the turns handed out so far and starts the schedule
// again at the rate in force, one interval from now (after a throttle,
// the server has just said it is over its limit). The caller holds s.mu.
func (s *keyState) reschedule(now time.Time) {
	s.void()
	s.sched.granted = s.rate.fill
	s.sched.next = now.Add(s.sched.interval)
}

// setRate sets the rate of the tokens handed out from now on.
func (s *keyState) setRate(r, minRate float64) {
	r = max(r, minRate)
	s.rate.fill = r
	s.sched.interval = time.Duration(float64(time.Second) / r)
	s.engaged.Store(true)
	s.leaveSlowStart()
}

// outageOver reports whether a success at now, after a streak of cuts,
// ends an outage: a silence of outageTime since the last success, and ten
// times the usual spacing of successes before the streak. A limiter that
// admits its quota at the start of each window is silent for most of the
// window: that is not an outage. Refusals that followed no success at all
// are one after outageTime; refusals after successes whose rate is
// unknown (the key engaged within its first half-second) are none.
//
// A single cut is no streak: the silence after it may be the client's.
// In the Route 53 example, five callers backing off after a refusal at
// the end of their calls sent nothing for 1.5 s; the next success, 1.7 s
// after the last, ended an "outage", and the key restarted in slow
// start, its limit forgotten. In an outage, the attempts paced after the
// first cut are refused too, and cut again.
func (s *keyState) outageOver(now time.Time) bool {
	gap := now.Sub(s.outage.lastOK)
	switch {
	case gap < outageTime || s.outage.cutsSinceOK < 2:
		return false
	case !s.outage.streakAfterOK:
		return true
	}
	return gap.Seconds()*s.outage.streakAccepted >= outageSilence // 0 if unknown
}

// void makes the turns handed out so far void, and wakes their attempts
// to take new ones. The caller holds s.mu.
func (s *keyState) void() {
	s.sched.gen++
	if s.sched.cancelTurns != nil {
		s.sched.cancelTurns()
		s.sched.turns, s.sched.cancelTurns = nil, nil
	}
}

// restart forgets what the key learned: after an outage (or a quota spent
// for a while), the rate it was cut to says nothing about the server that
// answers again, and growing back from it would take minutes. The key
// starts afresh, in slow start, as a new one would. The caller holds s.mu.
func (s *keyState) restart(now time.Time, initialWindow int) {
	s.idle()
	// Rates measured in the outage are not the server's either.
	s.meter.measured, s.meter.accepted, s.meter.sampled = 0, 0, false
	s.meter.takeSent()
	s.meter.ok.Store(1) // this success
	// The key has been throttled before: its first refusal now is its
	// limit's (a storm's backlog meeting the server as it returns, after
	// the successes of the server's burst), and engages it; no success
	// takes away from an infinite sum.
	s.meter.suspicion, s.meter.suspectOK = math.Inf(1), 1
	s.meter.bucket = now
	s.meter.bucketEnd.Store(s.since(now.Add(bucketWidth)))
	if initialWindow > 0 {
		s.start.slots = initialWindow
		if s.start.stopLimit != nil {
			s.start.stopLimit()
		}
		s.start.stopLimit = nil // a new time limit from the next attempt
		s.start.round++
		s.start.slow.Store(true)
	}
}

// endHold ends the hold of the rate (see throttled), and the waits for
// it. The caller holds s.mu.
func (s *keyState) endHold() {
	s.outage.holding = false
	if s.outage.unheld != nil {
		close(s.outage.unheld)
		s.outage.unheld = nil
	}
}

// idle returns the key to not engaged: the turns handed out are void, and
// the rate, its curve and the chain of cuts are forgotten. The caller
// holds s.mu.
func (s *keyState) idle() {
	s.engaged.Store(false)
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

// pause keeps every attempt of the key from being sent before now+d.
func (s *keyState) pause(now time.Time, d time.Duration, minRate float64) {
	if !s.engaged.Load() {
		// The rate the client was sending at: smoothed, or over the
		// bucket so far (minElapsed at least), as a first cut reads it.
		// Smoothed alone it is 0 over a key's first half-second, and a
		// quota spent there (a success with RateLimit r=0) engaged the
		// key at MinRate: 0.5/s, seconds of growth from a client that
		// had sent 20 at once.
		base := max(s.meter.measured, s.meter.bucketRate(now, minElapsed), minRate)
		s.setRate(base, minRate)
	}
	if until := now.Add(d); until.After(s.sched.paused) {
		s.sched.paused = until
		s.void()
	}
}

// Rate returns the rate at which p currently paces key, in requests per
// second, and whether p has engaged for it at all (+Inf when not).
func (p *Pacer) Rate(key string) (float64, bool) {
	v, ok := p.keys.m.Load(key)
	if !ok {
		return math.Inf(1), false
	}
	s := v.(*keyState)
	if !s.engaged.Load() {
		return math.Inf(1), false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rate.fill, true
}

// count adds an outcome to the chain's tallies: every outcome while the
// key is engaged, since the last cut, and those of attempts paced at the
// rate in force, by whether it is above the chain's low rate. The caller
// holds s.mu.
func (sh *shedding) count(s *keyState, refused bool, gen uint64) {
	if !s.engaged.Load() {
		return
	}
	k := 0
	if refused {
		k = 1
	}
	sh.epN, sh.epK = sh.epN+1, sh.epK+k
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
// and the refusals that led to it: those of the current bucket before the
// key engaged, those since the last cut after. A chain with too few
// outcomes before its low rate to test against begins again at this cut,
// keeping them; one refused too often before it to test anything begins
// again from the outcomes at its low rate, or afresh.
// The caller holds s.mu.
func (sh *shedding) cut(s *keyState, base float64, now time.Time) {
	switch {
	case base <= 0:
	case sh.chainRate == 0:
		n, k := sh.epN, sh.epK
		if !s.engaged.Load() {
			k = int(s.meter.refused)
			n = int(s.meter.ok.Load()) + k
			sh.origin = base
		}
		sh.begin(s, now, base, n, k, false)
	case sh.hiN < minSamples:
		// Begun after a limit's, it still is: its first share is
		// weighed over need's outcomes all the same.
		sh.begin(s, now, base, sh.hiN+sh.loN, sh.hiK+sh.loK, sh.limit)
	case sh.hiN < sh.need():
		// Begun again after a limit's: the outcomes since weigh the
		// first share too, and the chain keeps its rate.
		sh.hiN, sh.hiK = sh.hiN+sh.loN, sh.hiK+sh.loK
		sh.loN, sh.loK = 0, 0
	case sh.limitShare() && sh.loN >= minSamples:
		sh.begin(s, now, base, sh.loN, sh.loK, true)
	case sh.limitShare() && sh.hiN >= 2*minSamples:
		sh.begin(s, now, base, sh.epN, sh.epK, true)
	}
	sh.epN, sh.epK = 0, 0
}

// begin (re)starts the chain at a cut from rate base at time now, with n
// outcomes and k refusals before it; limit says it begins after a
// limit's (see shedding.limit). The caller holds s.mu.
func (sh *shedding) begin(s *keyState, now time.Time, base float64, n, k int, limit bool) {
	sh.chainRate, sh.chainGen, sh.lowRate, sh.limit = base, s.sched.gen, 0, limit
	sh.at, sh.atSent = now, s.meter.sends()
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
// shallower first cut (see keyState.throttled).
func (sh *shedding) low() float64 {
	if sh.lowRate > 0 {
		return sh.lowRate
	}
	return shedLowRate * sh.chainRate
}

// testing reports whether the chain's test is under way: its first share
// weighed, not clearly a limit's, and the rate in force at the low rate.
func (sh *shedding) testing(s *keyState) bool {
	return sh.chainRate != 0 && sh.hiN >= sh.need() && !sh.limitShare() && s.rate.fill <= sh.low()
}

// limitShare reports whether the chain's first share is clearly a
// limit's, too high to test: over shedMaxShare by more than two standard
// errors. A cold start's first refusals engaged the key when two of its
// first few answers were (three in a row now, see suspect), and counted
// with them, the share of a quarter refused at random came out at 5 of
// 11 or 6 of 13 in the runs that collapsed: taken for a limit's, each
// refusal after cut the rate again, halved with AIMD, until requests
// failed waiting for turns.
func (sh *shedding) limitShare() bool {
	return sh.hiLower(stoppedShare(sh.hiK, sh.hiN)) > shedMaxShare
}

// testSuccess weighs a success of an engaged key against the test under
// way: once the share at the low rate is clearly below the chain's first
// (see atMost), or half of it over the outcomes that would have brought
// 2*minSamples refusals, in the test's second stage, the refusals fell
// with the rate: a limit's, and the rate in force is below it. The chain
// ends, and a second stage's rate goes back to the first's (the curve
// saved by deepen): the rate was lowered for the test, not for a limit
// found there (without this, a simulated queue shed 25 % at random took
// 22.7 s, over the 20 s of TestPacerSheddingWithoutSlowStartTail).
// Judged only at refusals, a limit under the low rate refuses nothing
// there, and the test would hold a client at that rate for as long as
// the limit holds.
// The caller holds s.mu.
func (s *keyState) testSuccess(now time.Time, minRate float64) {
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
// compare two shares at that one rate: against Route 53's 5/s, ten
// callers backing off between attempts sent a few a second, paced at
// 6422/s and then 3211/s, refused 6 of 7 at both, and the key went idle
// under the limit. Such a throttle cuts instead, until the rate in force
// is one the client sends at.
//
// A bucket's attempts alone are not enough: callers that back off send
// in bursts, and a few attempts within the first milliseconds of a
// bucket count as a rate of hundreds a second. The Route 53 example's
// five callers, paced at 12.5/s against its window limiter of 5/s, sent
// 8 attempts in that stage's 1.36 s (3.6/s smoothed), were refused there
// as often as at 7/s after it, and the key went idle under the limit;
// or, held undecided at 13.2/s, ended its calls paced at more than twice
// the limit. Over the stage (weighed once it has lasted paceSpan attempts'
// time at the rate in force), a burst weighs what it is worth. The
// caller holds s.mu.
func (s *keyState) paceHolds(now time.Time) bool {
	fill := s.rate.fill
	if fill <= 0 {
		return true
	}
	sent := s.meter.measured
	if e := now.Sub(s.meter.bucket); e >= minElapsed {
		sent = max(sent, float64(s.meter.sent.Load())/e.Seconds())
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

// stoppedShare returns the share refused of n outcomes, k of them
// refused, counted up to a refusal that stopped the count: (k-1)/(n-1),
// and 0 for fewer than two. The chain's tallies end so: its first share
// with the refusal that cut, the share at its low rate with the refusal
// judged. Such a count always ends with a refusal, and k/n overstates
// the share: at a quarter refused at random, the outcomes up to and
// including the first refusal are refused 46 % on average (ln 4 / 3).
// Without the refusal it stopped at, the count is an unbiased estimate
// (inverse binomial sampling).
func stoppedShare(k, n int) float64 {
	if n < 2 {
		return 0
	}
	return float64(max(k-1, 0)) / float64(n-1)
}

// atLeast returns the probability that a share p refuses k or more of n
// outcomes (the upper tail of the binomial distribution).
func atLeast(k, n int, p float64) float64 {
	switch {
	case k <= 0:
		return 1
	case k > n || p <= 0:
		return 0
	case p >= 1:
		return 1
	case float64(k) < float64(n)*p:
		// Below the mean: the lower tail's terms fall from k-1 down.
		return max(0, 1-binomSum(k-1, n, p, -1))
	}
	return min(1, binomSum(k, n, p, 1))
}

// atMost returns the probability that a share p refuses k or fewer of n
// outcomes.
func atMost(k, n int, p float64) float64 {
	return 1 - atLeast(k+1, n, p)
}

// binomSum sums the binomial probabilities of i refusals of n at share p
// from i = k on, by step (1 up, -1 down), away from the mean, so that the
// terms fall, until they no longer add to the sum.
func binomSum(k, n int, p float64, step int) float64 {
	lg := func(x int) float64 { v, _ := math.Lgamma(float64(x + 1)); return v }
	term := math.Exp(lg(n) - lg(k) - lg(n-k) + float64(k)*math.Log(p) + float64(n-k)*math.Log1p(-p))
	sum := 0.0
	for i := k; i >= 0 && i <= n && term > 1e-12*sum; i += step {
		sum += term
		if step > 0 {
			term *= float64(n-i) / float64(i+1) * p / (1 - p)
		} else {
			term *= float64(i) / float64(n-i+1) * (1 - p) / p
		}
	}
	return sum
}

// endChain forgets the chain of cuts.
func (sh *shedding) endChain() {
	sh.chainRate, sh.chainGen, sh.lowRate, sh.limit = 0, 0, 0, false
	sh.hiN, sh.hiK, sh.loN, sh.loK, sh.deep = 0, 0, 0, 0, false
}

// deepen goes on with the test at a lower rate: refused at the low rate
// about as often as before the chain's first cut, the key may be shedding
// at random, or above a limit still, whose share the first measured too
// low (a token bucket's burst among its answers: 1 refused of 22 at
// 750/s against a limit of 100/s with a burst of 20, 3 of 5 at 644/s).
// A limit accepts, at most, what it accepted at the low rate: 1-lo of
// it. So the test goes on at 0.9 of that (no lower than shedDeepFloor of
// the low rate, as 3 refusals of 3 would take it to nothing), against the
// share of every outcome so far, and must find the share as high there
// again (see test). The curve starts from the new rate, where the first
// cut's would soon have grown back above it, and the curve before is
// saved for a limit found below it (see testSuccess). The caller holds
// s.mu.
func (s *keyState) deepen(now time.Time, minRate float64) {
	sh := &s.shed
	lo := float64(sh.loK) / float64(sh.loN)
	to := max(acceptedShare*(1-lo)*s.rate.fill, shedDeepFloor*s.rate.fill, minRate)
	sh.hiN, sh.hiK = sh.hiN+sh.loN, sh.hiK+sh.loK
	sh.loN, sh.loK = 0, 0
	sh.chainGen, sh.lowRate, sh.deep = s.sched.gen, to, true
	sh.at, sh.atSent = now, s.meter.sends()
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
// stage: the caller goes on to the second, see keyState.deepen), or are
// (the second). A share clearly higher or lower, by a binomial test at
// shedSignificance, is a limit's: the chain ends and the throttle cuts;
// so does a share undecided for shedMaxRefusals refusals. Both shares
// are counted without the refusal that stopped their count (see
// stoppedShare). The throttle is of an attempt paced at the rate in
// force, outside an outage's hold. The caller holds s.mu.
func (sh *shedding) test(s *keyState, now time.Time) int {
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
		// first share may be: a window limiter of 5/s, the Route 53
		// example's, refused 5 of 8 before the chain and 5 of 10 at
		// 11/s, twice the limit, with five callers, and the key went
		// idle under it.
		return shedIndependent
	case atMost(sh.loK-1, sh.loN-1, sh.hiLower(hi)) < shedSignificance:
		// Far fewer refusals than the share would bring: a limit's.
		sh.endChain()
		return shedCut
	case sh.loK >= shedMaxRefusals:
		// Undecided for as many refusals: the share is not the one the
		// chain began with, but not clearly another either. Held, a key
		// above a limit whose first share a burst had diluted (8 of 20
		// at 1000/s) was refused 73 % at 409/s, 22 of 30, against a
		// pooled share of 16 of 33 that may have been as high as 64 %,
		// with no end.
		sh.endChain()
		return shedCut
	}
	return shedHold
}

// maxShare is the highest share of every outcome of the chain that may
// be found not to depend on the rate: shedMaxShare, or collapseShare
// once the rate is below collapseDepth of the one the key engaged from.
// A limit refuses a share that falls as the rate falls below it; at 40 %
// shed at random, every chain's share was a little over 0.4 about half
// the time, ended undecided after shedMaxRefusals refusals, and cut, and
// the next chain began lower: a queue at 1000/s came down to 1.5/s within
// 23 s, and its 6000 attempts took 40 minutes (simulated; before this
// bound, 4 of 300 runs over 10 s with CUBIC, 15 with AIMD; now 0 and 5).
// So far below its origin, a limit's
// share is a burst's, near 1, or small. The caller holds s.mu.
func (sh *shedding) maxShare(s *keyState) float64 {
	if sh.origin > 0 && s.rate.fill < collapseDepth*sh.origin {
		return collapseShare
	}
	return shedMaxShare
}

// hiUpper is the chain's first share, hi, plus two standard errors: how
// high that share may have been, measured over hiN outcomes. A share at
// the low rate above it is not taken for the same (once taken up to
// twice it: a limit's share, rising as the rate fell, 3 of 5 against 7
// of 20 where a burst had diluted the first, passed for shedding), and
// one clearly above it is a limit's.
func (sh *shedding) hiUpper(hi float64) float64 {
	return hi + sh.hiError(hi)
}

// hiLower is the chain's first share, hi, less two standard errors: how
// low that share may have been. At the first stage, a share at the low
// rate of half that or more is taken for not a limit's, whose share
// falls well below half there; at the second, only that much or more.
// Against half of hi itself, a first share measured high by chance (3
// refusals of 13 where 10 % are shed) held the test undecided for
// hundreds of outcomes, at the low rate.
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
// its rate; the attempts waiting for turns go on at once. The caller
// holds s.mu.
func (s *keyState) disengage(now time.Time) {
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
	// The rates measured while it was paced are the Pacer's, not the
	// client's: a throttle that engages the key again cuts from the rate
	// it is sent at from now on (cut from the paced rate, AIMD's half of
	// it, a key took a minute to grow back to a limit of 100/s, after
	// refusals at random of 10 % had sent it idle). A bucket begins now;
	// the successes so far stay, as the bucket before, for noise to
	// weigh the next throttles against.
	s.meter.measured, s.meter.accepted, s.meter.sampled = 0, 0, false
	s.meter.lastOK += s.meter.ok.Swap(0)
	s.meter.suspectOK = 0
	s.meter.takeSent()
	s.meter.bucket = now
	s.meter.bucketEnd.Store(s.since(now.Add(bucketWidth)))
}

// noise reports whether a throttle is no more than the key's refusals
// that do not depend on the rate, if it has found any: whether the
// refusals of the current bucket and the one before are not well above
// that share (twice it, or halfway from it to all, whichever is less,
// and three standard deviations).
// Such a throttle neither engages the key nor cuts its rate: a limit's
// refusals grow with the rate until they are well above it. The caller
// holds s.mu.
func (sh *shedding) noise(s *keyState) bool {
	if sh.share == 0 {
		return false
	}
	k := float64(s.meter.refused + s.meter.lastRefused)
	n := k + float64(s.meter.ok.Load()+s.meter.lastOK)
	mean := n * sh.share
	// Twice the share, at most halfway to every answer refused: with a
	// share of half or more found, twice it is every answer, and no
	// limit could engage the key again. In the simulation of a limit
	// with 10 % shed besides (TestSimReport), runs refused over 700
	// times went from 5 and 1 of 100 to 1 and 0 with the cap.
	return k <= mean+min(mean, (n-mean)/2) || k <= mean+3*math.Sqrt(mean*(1-sh.share))+2
}

// idleBucket folds a bucket of okN successes and refused throttles of an
// idle key into the share of refusals that do not depend on the rate: a
// key that has found none takes the share of a bucket of 4×minSamples
// answers or more refused no more than engageLow, which it lives with
// unpaced (see keyState.suspect), as if found; then it decays.
// A limit reached later is told from them as from shedding found by a
// test (see noise): the key engages on refusals well above them, and
// does not cut on them while it paces. Without it, a key that met a
// tenth shed at random, and then a limit of 100/s as well, cut on every
// refusal at random once engaged: 77 of 100 simulated runs of AIMD took
// over 20 s, or had 300 of 1000 attempts refused (TestSimReport).
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
