package retry

import (
	"fmt"
	"math"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"
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
	// defaultMinRate is the slowest a Pacer goes, in requests per second.
	defaultMinRate = 0.5
)

// Pacer spaces the attempts sent to each host at a rate it learns from the
// host's throttling, so that fewer requests are refused in the first place.
// It is opt-in ([WithPacer]) and may be shared by several Transports.
//
// A Pacer starts unlimited and engages for a key (a host, by default) only
// after that key's first throttled outcome, so a client that is never
// throttled never waits. Then every attempt, the first included, takes a
// token from the key's bucket before it is sent. On each throttle the rate
// falls multiplicatively below the rate the client was measured sending
// at; on each success it grows back ([AdaptCubic] or [AdaptAIMD]); it never
// exceeds twice the measured sending rate, nor falls below MinRate.
//
// Server hints set the pace before the server has to refuse: a response
// whose IETF RateLimit field says no quota remains (r=0, or
// RateLimit-Remaining: 0) pauses the key until the reset it names, and a
// throttled response's Retry-After (or other [ServerWait] header) pauses it
// for that long, so that the clients sharing the Pacer do not all come back
// at once but are spaced at the learned rate after the pause.
//
// The zero value is ready to use. Fields must not be changed after first
// use. A Pacer is safe for concurrent use.
type Pacer struct {
	// Key maps a request to the limit it counts against. Nil means the
	// request's host (URL.Host); an API limited per account (Route 53
	// allows five requests a second per account) keys by the account.
	Key func(*http.Request) string

	// MinRate is the slowest the Pacer paces a key, in requests per
	// second. Zero means 0.5.
	MinRate float64

	// Adapt chooses how the rate is adjusted. Zero means [AdaptCubic].
	Adapt Adapt

	keys sync.Map // key string -> *paceState
}

// paceState is the learned rate of one key.
type paceState struct {
	engaged atomic.Bool // read without the lock on the fast path

	mu       sync.Mutex
	lim      *rate.Limiter // nil until engaged
	fill     float64       // the rate in force, requests per second
	measured float64       // smoothed sending rate, requests per second
	count    float64       // responses in the current measurement bucket
	bucket   time.Time     // start of the current measurement bucket
	lastMax  float64       // rate at the last throttle
	lastCut  time.Time     // time of the last throttle
	window   float64       // seconds the cubic curve takes back to lastMax
	paused   time.Time     // no attempt before this time
}

// key returns the limit req counts against.
func (p *Pacer) key(req *http.Request) string {
	switch {
	case p.Key != nil:
		return p.Key(req)
	case req.URL != nil:
		return req.URL.Host
	}
	return ""
}

func (p *Pacer) state(req *http.Request) *paceState {
	key := p.key(req)
	if s, ok := p.keys.Load(key); ok {
		return s.(*paceState)
	}
	s, _ := p.keys.LoadOrStore(key, new(paceState))
	return s.(*paceState)
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

// reserve takes a token for an attempt to be sent at time at, and returns
// how long after at the attempt must wait for it. A pacer that has not
// engaged for the request's key returns 0 and a nil reservation, costing
// nothing. cancel gives the token back when the attempt is not sent.
func (p *Pacer) reserve(req *http.Request, at time.Time) (time.Duration, *reservation) {
	s := p.state(req)
	if !s.engaged.Load() {
		return 0, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	start := at
	if s.paused.After(start) {
		start = s.paused
	}
	r := s.lim.ReserveN(start, 1)
	if !r.OK() {
		return 0, nil // cannot happen with a burst of at least 1
	}
	return start.Sub(at) + r.DelayFrom(start), &reservation{r: r, at: start}
}

// reservation is a token taken by [Pacer.reserve].
type reservation struct {
	r  *rate.Reservation
	at time.Time
}

// cancel returns the token, as if the attempt had not been reserved.
func (r *reservation) cancel() {
	if r != nil {
		r.r.CancelAt(r.at)
	}
}

// observe updates the key's rate after an attempt's outcome.
func (p *Pacer) observe(req *http.Request, class Class, resp *http.Response, now time.Time, xReset ResetFormat) {
	if class != Throttled && class != Success {
		return // neither says anything about the server's rate limit
	}
	var pause time.Duration
	var hinted bool
	if resp != nil {
		if class == Throttled {
			pause, hinted = ServerWait(resp.Header, now, xReset)
		} else {
			pause, hinted = quotaExhausted(resp.Header, now)
		}
	}
	s := p.state(req)
	if class == Success && !hinted && !s.engaged.Load() {
		s.mu.Lock()
		s.measure(now)
		s.mu.Unlock()
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.measure(now)
	if class == Throttled {
		s.throttled(now, p.Adapt, p.minRate())
	} else if s.engaged.Load() {
		s.succeeded(now, p.Adapt, p.minRate())
	}
	if hinted && pause > 0 {
		s.pause(now, pause, p.minRate())
	}
}

// measure counts a response in the current half-second bucket and, when a
// bucket ends, folds its rate into the smoothed measured rate.
func (s *paceState) measure(now time.Time) {
	if s.bucket.IsZero() {
		s.bucket = now.Truncate(bucketWidth)
	}
	s.count++
	t := now.Truncate(bucketWidth)
	if t.After(s.bucket) {
		current := s.count / t.Sub(s.bucket).Seconds()
		s.measured = current*smoothing + s.measured*(1-smoothing)
		s.count = 0
		s.bucket = t
	}
}

// throttled cuts the rate below the rate the client was sending at.
func (s *paceState) throttled(now time.Time, adapt Adapt, minRate float64) {
	base := s.measured
	if base <= 0 {
		// Throttled before a whole bucket was measured: the responses
		// counted so far, over at least a bucket's width, estimate it.
		base = s.count / max(now.Sub(s.bucket), bucketWidth).Seconds()
	}
	if s.engaged.Load() {
		base = min(base, s.fill)
	}
	s.lastMax = base
	s.lastCut = now
	var next float64
	switch adapt {
	case AdaptAIMD:
		next = base * aimdCut
	default:
		s.window = math.Cbrt(base * (1 - cubicBeta) / cubicScale)
		next = base * cubicBeta
	}
	s.setRate(now, next, minRate)
}

// succeeded grows the rate back after a throttle.
func (s *paceState) succeeded(now time.Time, adapt Adapt, minRate float64) {
	t := now.Sub(s.lastCut).Seconds()
	var next float64
	switch adapt {
	case AdaptAIMD:
		// One request per second more for every second without a
		// throttle, from half the old rate.
		next = s.lastMax*aimdCut + t
	default:
		d := t - s.window
		next = cubicScale*d*d*d + s.lastMax
	}
	if s.measured > 0 {
		next = min(next, 2*s.measured)
	}
	s.setRate(now, next, minRate)
}

func (s *paceState) setRate(now time.Time, r, minRate float64) {
	r = max(r, minRate)
	s.fill = r
	if s.lim == nil {
		// A burst of one spaces attempts evenly: the point is to stop
		// the bursts that got the client throttled.
		s.lim = rate.NewLimiter(rate.Limit(r), 1)
		s.engaged.Store(true)
		return
	}
	s.lim.SetLimitAt(now, rate.Limit(r))
}

// pause keeps every attempt of the key from being sent before now+d.
func (s *paceState) pause(now time.Time, d time.Duration, minRate float64) {
	if s.lim == nil {
		base := max(s.measured, minRate)
		s.setRate(now, base, minRate)
	}
	if until := now.Add(d); until.After(s.paused) {
		s.paused = until
	}
}

// quotaExhausted reports the wait a response announces while it still
// succeeds: an IETF RateLimit field whose quota is spent (r=0), or a
// RateLimit-Remaining of 0 with its RateLimit-Reset.
func quotaExhausted(h http.Header, now time.Time) (time.Duration, bool) {
	if d, ok := rateLimitWait(h["Ratelimit"]); ok {
		return d, true
	}
	if v := h.Get("Ratelimit-Remaining"); v != "" && !quotaRemains(v) {
		return legacyResetWait(h, now)
	}
	return 0, false
}

// Rate returns the rate at which p currently paces key, in requests per
// second, and whether p has engaged for it at all (+Inf when not).
func (p *Pacer) Rate(key string) (float64, bool) {
	v, ok := p.keys.Load(key)
	if !ok {
		return math.Inf(1), false
	}
	s := v.(*paceState)
	if !s.engaged.Load() {
		return math.Inf(1), false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.fill, true
}
