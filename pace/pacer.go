// Package pace spaces the attempts of a [retry.Transport] at a rate it
// learns from each host's refusals, so that fewer are refused in the
// first place. A Transport paces with a Pacer of its own by default; a
// Pacer of this package's, configured, replaces it, and may be shared by
// several Transports:
//
//	rt := retry.New(nil, retry.WithPacer(&pace.Pacer{Refusal: awsretry.RateRefusal}))
//
// # The rules, per key (the host unless Key says otherwise)
//
// Idle. A key that has not been refused paces nothing: its attempts go
// at once, at the cost of a map lookup, two clock reads and a few atomic
// operations, and no allocation. Its answers are weighed: Page's CUSUM of
// the refusals, between a share a limit causes (half or more) and one
// cheaper to retry than to pace (a quarter or less), engages the key at a
// log-likelihood ratio of 100 to 1 (seven refusals in a row; three among a
// new key's first answers), and only while the server accepts something:
// an outage teaches no rate.
//
// Engaging. The rate is cut from the rate the client was sending at: to
// under the rate the server accepted lately, or by the curve's own cut
// when that is lower. Attempts then take turns, one interval (1/rate)
// apart, first come, first served, each after its own backoff. A wait
// that would end past the request's deadline is not begun.
//
// Cuts and growth. While paced, a refusal of an attempt paced at the rate
// in force (and more of them than the floor explains) cuts the rate under
// the rate accepted; successes grow it back along CUBIC's curve
// ([AdaptCubic], the AWS SDKs' adaptive mode) or linearly ([AdaptAIMD]),
// to just under the capacity measured, where it holds before probing
// higher. Cuts that find the same capacity again hold it longer each
// time (2 s, 4 s, 8 s): a steady limit is met, not circled. A chain of
// cuts that halves the rate while the share refused does not fall is
// random shedding (a load balancer dropping a share whatever the load),
// not a limit: the key goes back to idle, and that share is its floor,
// so that only refusals well above it are evidence again.
//
// Outages. Refusals with nothing accepted for a second (and for four
// spacings at the rate the client went at) are an outage's: the key goes
// back to idle, unpaced, and the retry budget and a circuit breaker see
// to the outage. A 503 that asks for no wait teaches a Pacer nothing at
// all ([retry.RateLimited]).
//
// Server hints. Retry-After on a refusal that engages the key or cuts
// its rate (a limit's) pauses the key until the time it names. On any
// other refusal (a server throttling a share of its calls at random) it
// holds only that request's retry, which the Transport waits out. After
// a pause, the waiting attempts leave one interval apart.
//
// Published quotas ([retry.ParseQuota]). While the calls the client's
// pace would send before the reset, and those in flight, are more than
// remain, turns go at what remains over the time left, in any mode; a
// spent quota holds every attempt until its reset, then one attempt reads
// the new quota while the others wait for its answer. A refusal under a
// published quota teaches the rate nothing.
//
// Slow start, off unless InitialWindow is set (the presets of APIs known
// to limit set it): a new key has at most that many attempts unanswered
// at once, and each success opens one more slot, until an answer comes
// that no attempt waits for, or a second has passed.
//
// Memory. A key not in use is forgotten after 10 minutes, and beyond
// MaxKeys the longest unused go first, engaged keys last.
//
// docs/pacing.md is the user's guide; docs/pacing-design.md says why each
// rule is as it is.
package pace

import (
	"context"
	"math"
	"net/http"
	"sync"
	"time"

	"github.com/backoff-jitter/retry"
	"github.com/backoff-jitter/retry/internal/memstore"
	"github.com/backoff-jitter/retry/internal/pacecore"
	"github.com/backoff-jitter/retry/internal/pacefb"
)

// Adapt is how a [Pacer] adjusts its rate after refusals.
type Adapt uint8

const (
	// AdaptCubic, the zero value, grows the rate back after a cut along
	// a cubic curve that returns to the capacity measured, then probes
	// above it: the algorithm of the AWS SDK's "adaptive" retry mode
	// (TCP CUBIC, RFC 9438). With no capacity measured, it cuts to 0.7
	// of the rate.
	AdaptCubic Adapt = iota
	// AdaptAIMD grows the rate by one request per second per second
	// (additive increase); with no capacity measured, it halves it.
	AdaptAIMD
)

// DefaultInitialWindow is the window of slow start that the presets of
// APIs known to limit set: TCP's initial window (RFC 6928).
const DefaultInitialWindow = pacecore.DefaultInitialWindow

// Pacer spaces the attempts sent to each key at a rate it learns from the
// key's refusals (see the package's doc for its rules). The zero value is
// the Pacer a [retry.Transport] uses by default. Fields must not be
// changed after first use. A Pacer is safe for concurrent use, and may be
// shared by several Transports.
type Pacer struct {
	// Key maps a request to the limit it counts against. Nil means
	// [retry.RequestKey]: the Transport's key, by default the request's
	// host (URL.Host). An API limited per account (Route 53 allows five
	// requests a second per account) keys by the account. It must be safe
	// for concurrent use.
	Key func(*http.Request) string

	// MinRate is the slowest the Pacer paces a key, in requests per
	// second. Zero means 0.5.
	MinRate float64

	// Adapt chooses how the rate is adjusted. Zero means [AdaptCubic].
	Adapt Adapt

	// Refusal, if not nil, reports whether a throttled outcome refused
	// the attempt for the rate it was sent at; the others teach the
	// Pacer nothing. Nil means [retry.RateLimited]. Route 53's
	// PriorRequestNotComplete says a change to the zone is pending, and
	// comes at any rate: [github.com/backoff-jitter/retry/awsretry.RateRefusal]
	// sets such refusals aside for AWS APIs. Refusal may read the
	// response's header and peek at its body with [retry.PeekBody]. It
	// must be safe for concurrent use.
	Refusal func(retry.Feedback) bool

	// InitialWindow, if positive, turns slow start on for new keys: at
	// most that many attempts unanswered at once (see the package's
	// doc). Zero or less means none. [DefaultInitialWindow] is TCP's.
	InitialWindow int

	// MaxKeys is the most keys the Pacer remembers while they are not in
	// use. Zero means 10,000.
	MaxKeys int

	// Clock is the clock the Pacer reads and waits for turns on; nil means
	// the real one. A test gives the clock its Transports share
	// (retrytest.Clock).
	Clock retry.Clock

	once  sync.Once
	keyOf func(*http.Request) string // Key, or the Transport's key
	store memstore.Store
}

func (p *Pacer) init() {
	p.once.Do(func() {
		p.keyOf = p.Key
		if p.keyOf == nil {
			p.keyOf = retry.RequestKey
		}
		s := pacecore.Config{MinRate: p.MinRate, Adapt: pacecore.Adapt(p.Adapt), InitialWindow: p.InitialWindow}
		p.store.Config = s.Defaulted()
		p.store.MaxKeys = p.MaxKeys
		if p.Clock != nil {
			p.store.Now, p.store.Sleep = p.Clock.Now, p.Clock.Sleep
		}
		p.store.Owner = p
	})
}

// Validate reports invalid settings.
func (p *Pacer) Validate() error {
	s := pacecore.Config{MinRate: p.MinRate, Adapt: pacecore.Adapt(p.Adapt)}
	return s.Validate("pace: Pacer")
}

// Wait returns when the next attempt of req may be sent: at once while
// its key is idle; at its turn once the key has engaged (a turn made void
// while the attempt waits for it is given up for a new one). A wait that
// would end past ctx's deadline is not begun and takes no turn: Wait
// returns a [*retry.TurnTooLate] at once. It implements [retry.Pacer].
func (p *Pacer) Wait(ctx context.Context, req *http.Request) (retry.Turn, error) {
	p.init()
	k := p.store.OpenKey(p.keyOf(req))
	t, err := pacecore.Wait(ctx, k)
	if err != nil {
		return nil, pacefb.TurnError(err)
	}
	if t.Unpaced() {
		return (*idleTurn)(k), nil // no allocation
	}
	return &turn{p: p, t: t}, nil
}

// Rate returns the rate at which p paces key now, in requests per
// second, and whether it paces key at all (+Inf when not).
func (p *Pacer) Rate(key string) (float64, bool) {
	p.init()
	rate, engaged := math.Inf(1), false
	p.store.Peek(key, func(st *pacecore.State, now time.Time) { rate, engaged = rateOf(st, now) })
	return rate, engaged
}

// rateOf is Rate of a key's state at now.
func rateOf(st *pacecore.State, now time.Time) (float64, bool) {
	if st.Engaged() {
		return st.Rate(now), true
	}
	return math.Inf(1), false
}

// Rates calls f with each key p paces now and its rate, as Rate gives
// it, until f returns false: for a metric of the keys engaged. Keys
// engaged or forgotten meanwhile may be seen or not.
func (p *Pacer) Rates(f func(key string, rate float64) bool) {
	p.init()
	p.store.Range(func(key string, k *memstore.Key) bool {
		var rate float64
		var engaged bool
		k.Read(func(st *pacecore.State, now time.Time) { rate, engaged = rateOf(st, now) })
		// f is the caller's: called outside the key's lock.
		return !engaged || f(key, rate)
	})
}

// turn is an attempt's turn on a key that paces it, or its slot of slow
// start.
type turn struct {
	p *Pacer
	t pacecore.Turn
}

func (t *turn) Done(f retry.Feedback) { pacecore.Done(t.t, pacefb.Signal(f, t.p.Refusal)) }
func (t *turn) Abandon()              { pacecore.Abandon(t.t) }

// Paced reports whether the attempt waited for a turn at a rate the
// Pacer learned: the Transport's retry budget does not charge a throttled
// retry so paced (see [retry.Budget]).
func (t *turn) Paced() bool { return t.t.Gen != 0 }

// idleTurn is the turn of an attempt on an idle key: the key itself, so
// that it costs no allocation.
type idleTurn memstore.Key

func (t *idleTurn) Done(f retry.Feedback) {
	k := (*memstore.Key)(t)
	pacecore.Done(pacecore.Turn{H: k}, pacefb.Signal(f, k.Owner().(*Pacer).Refusal))
}

func (t *idleTurn) Abandon() { pacecore.Abandon(pacecore.Turn{H: (*memstore.Key)(t)}) }
