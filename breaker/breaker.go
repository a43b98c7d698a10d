// Package breaker is a circuit breaker per host for a
// [github.com/backoff-jitter/retry.Transport]:
//
//	rt := retry.New(nil, retry.WithBreaker(&breaker.Breaker{}))
//
// A host's circuit is closed while its attempts succeed. Failures that
// say the server is failing, transient outcomes (a 500, a reset after the
// request was written, an attempt timeout), unsent ones (a refused
// dial) and a 503 that names no wait (a balancer with no healthy backend),
// open it: Failures of them in a row, or a FailureRate of the attempts
// over Window once MinRequests were made. A rate limit's refusals (a 429,
// a 503 with Retry-After) are no failure (a Pacer's business), nor are
// permanent outcomes (a 404, the caller's own cancellation). While open, every attempt to the host fails
// at once, before anything is sent, with a [*retry.CircuitOpen]. After
// OpenFor, or the Retry-After of the failure that opened it when that is
// longer (up to MaxOpenFor), the circuit is half open: Probes attempts may
// go; a success closes the circuit, a failure opens it again. While the
// probes are out, other attempts are refused with the time by which the
// probes have answered or others may go: OpenFor after the first probe
// went. A probe unanswered that long no longer holds its place.
package breaker

import (
	"fmt"
	"math"
	"net/http"
	"sync"
	"time"

	"github.com/backoff-jitter/retry"
	"github.com/backoff-jitter/retry/internal/keytable"
)

// State is a circuit's state.
type State uint8

const (
	// Closed: attempts go; failures are counted.
	Closed State = iota
	// Open: attempts fail at once, until the circuit is half open.
	Open
	// HalfOpen: up to Probes attempts go, and their outcomes decide.
	HalfOpen
)

func (s State) String() string {
	switch s {
	case Closed:
		return "closed"
	case Open:
		return "open"
	case HalfOpen:
		return "half-open"
	}
	return fmt.Sprintf("State(%d)", uint8(s))
}

// Defaults of a Breaker whose fields are zero.
const (
	defaultFailures    = 5
	defaultFailureRate = 0.5
	defaultWindow      = 10 * time.Second
	defaultMinRequests = 20
	defaultOpenFor     = 5 * time.Second
	defaultMaxOpenFor  = 5 * time.Minute
	defaultProbes      = 1
	// windowBuckets is how many buckets the failure rate's window is
	// counted in.
	windowBuckets = 10
)

// Breaker is a circuit breaker per key: the Transport's key of the
// request ([retry.RequestKey], its host unless [retry.Transport.Key] says
// otherwise) unless Key says otherwise. The zero value is ready to use;
// fields must not be changed after first use. It is safe for concurrent
// use.
//
// Its circuits are kept in a bounded table: a circuit with no attempt out
// is forgotten once unused for ten minutes, and, when more than MaxKeys
// are kept, the longest unused go first, quiet ones (closed, no failure
// counted) before the others. A
// forgotten circuit that is used again starts closed, with no failures
// counted.
type Breaker struct {
	// Key maps a request to its circuit; nil means [retry.RequestKey]. It
	// must be safe for concurrent use.
	Key func(*http.Request) string
	// Failures is how many failures in a row open a circuit. Zero means
	// 5; negative turns the count off.
	Failures int
	// FailureRate is the share of failed attempts over Window that opens
	// a circuit, once MinRequests attempts were made in it. Zero means
	// 0.5; negative turns the rate off.
	FailureRate float64
	// Window is the span of the failure rate. Zero means 10 seconds.
	Window time.Duration
	// MinRequests is how many attempts the window must hold before the
	// rate counts. Zero means 20.
	MinRequests int
	// OpenFor is how long a circuit stays open before a probe. Zero
	// means 5 seconds. The Retry-After of the failure that opened it,
	// when longer, holds it open that long instead, up to MaxOpenFor.
	OpenFor time.Duration
	// MaxOpenFor bounds a Retry-After's hold. Zero means 5 minutes.
	MaxOpenFor time.Duration
	// Probes is how many attempts a half-open circuit lets go at once.
	// Zero means 1.
	Probes int
	// OnStateChange, if not nil, is called when a circuit changes state,
	// with its key, outside the circuit's lock. It must be safe for
	// concurrent use.
	OnStateChange func(key string, from, to State)
	// MaxKeys is the most circuits kept while no attempt of theirs is
	// out. Zero means 10,000.
	MaxKeys int
	// Clock is the clock of the circuits' times; nil means the real one.
	// A test gives the clock its Transports share (retrytest.Clock).
	Clock retry.Clock

	once     sync.Once
	circuits keytable.Table[circuit]
}

func (b *Breaker) init() {
	b.once.Do(func() {
		b.circuits.Max, b.circuits.Now = b.MaxKeys, b.clock
		b.circuits.New = func(key string) *circuit { return &circuit{b: b, key: key} }
		// A circuit that is open, half open or counting failures is
		// worth keeping over a quiet one.
		b.circuits.Keep = (*circuit).eventful
	})
}

// Validate reports invalid settings.
func (b *Breaker) Validate() error {
	switch {
	case b.FailureRate > 1 || math.IsNaN(b.FailureRate):
		return fmt.Errorf("breaker: FailureRate %v is not at most 1", b.FailureRate)
	case b.Window < 0:
		return fmt.Errorf("breaker: Window %v is negative", b.Window)
	case b.OpenFor < 0:
		return fmt.Errorf("breaker: OpenFor %v is negative", b.OpenFor)
	case b.MaxOpenFor < 0:
		return fmt.Errorf("breaker: MaxOpenFor %v is negative", b.MaxOpenFor)
	case b.MinRequests < 0:
		return fmt.Errorf("breaker: MinRequests %d is negative", b.MinRequests)
	case b.Probes < 0:
		return fmt.Errorf("breaker: Probes %d is negative", b.Probes)
	case b.MaxKeys < 0:
		return fmt.Errorf("breaker: MaxKeys %d is negative", b.MaxKeys)
	}
	return nil
}

// State returns the state of key's circuit; Closed for a key never seen.
func (b *Breaker) State(key string) State {
	b.init()
	e := b.circuits.Peek(key)
	if e == nil {
		return Closed
	}
	c := e.Value
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stateAt(b.clock())
}

// Allow implements [retry.Breaker]: on a closed circuit it returns at once
// with no allocation; on an open one, a [*retry.CircuitOpen].
func (b *Breaker) Allow(req *http.Request) (retry.Turn, error) {
	c := b.circuit(req)
	now := b.clock()
	c.mu.Lock()
	var changed bool
	switch c.stateAt(now) {
	case Open:
		until := c.until
		c.mu.Unlock()
		c.release(now)
		return nil, &retry.CircuitOpen{Key: c.key, Until: until}
	case HalfOpen:
		if c.state == Open { // OpenFor has passed: the first probe
			c.state, changed = HalfOpen, true
			c.newProbes(now)
		}
		if c.probing >= b.probes() {
			if end := c.probeAt.Add(b.openFor()); now.Before(end) {
				c.mu.Unlock()
				c.release(now)
				return nil, &retry.CircuitOpen{Key: c.key, Until: end}
			}
			// The probes out went unanswered for OpenFor: they hold
			// their places no longer (a hung probe must not hold the
			// circuit half open for ever), and their answers, if they
			// come, are not counted.
			c.newProbes(now)
		}
		c.probing++
		p := &probe{c: c, gen: c.probeGen}
		c.mu.Unlock()
		if changed {
			b.changed(c.key, Open, HalfOpen)
		}
		return p, nil
	}
	c.mu.Unlock()
	return (*closedTurn)(c), nil
}

// circuit returns req's key's circuit, made on first use, in use until
// its release.
func (b *Breaker) circuit(req *http.Request) *circuit {
	b.init()
	var key string
	if b.Key != nil {
		key = b.Key(req)
	} else {
		key = retry.RequestKey(req)
	}
	e := b.circuits.Use(key)
	c := e.Value
	if c.entry.Load() == nil {
		c.entry.Store(e)
	}
	return c
}

func (b *Breaker) clock() time.Time {
	if b.Clock != nil {
		return b.Clock.Now()
	}
	return time.Now()
}

func (b *Breaker) changed(key string, from, to State) {
	if h := b.OnStateChange; h != nil {
		h(key, from, to)
	}
}

func (b *Breaker) failures() int    { return orDefault(b.Failures, defaultFailures) }
func (b *Breaker) minRequests() int { return orDefault(b.MinRequests, defaultMinRequests) }
func (b *Breaker) probes() int      { return orDefault(b.Probes, defaultProbes) }

func (b *Breaker) failureRate() float64 {
	if b.FailureRate == 0 {
		return defaultFailureRate
	}
	return b.FailureRate
}

func (b *Breaker) window() time.Duration     { return durationOr(b.Window, defaultWindow) }
func (b *Breaker) openFor() time.Duration    { return durationOr(b.OpenFor, defaultOpenFor) }
func (b *Breaker) maxOpenFor() time.Duration { return durationOr(b.MaxOpenFor, defaultMaxOpenFor) }

func orDefault(v, d int) int {
	if v == 0 {
		return d
	}
	return v
}

func durationOr(v, d time.Duration) time.Duration {
	if v == 0 {
		return d
	}
	return v
}
