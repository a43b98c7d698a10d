package breaker

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/backoff-jitter/retry"
	"github.com/backoff-jitter/retry/internal/keytable"
)

// circuit is one key's state machine: Closed, Open until until, then
// HalfOpen with probing attempts out.
type circuit struct {
	b     *Breaker
	key   string
	entry atomic.Pointer[keytable.Entry[circuit]] // its place in b's table

	mu      sync.Mutex
	state   State     // Closed, Open or HalfOpen (Open past until reads as HalfOpen)
	until   time.Time // Open: when a probe may go
	probing int       // HalfOpen: probes out, of generation probeGen
	// probeAt is when the first probe of generation probeGen went; an
	// answer of an earlier generation's probe is not counted.
	probeAt  time.Time
	probeGen uint64
	inRow    int // Closed: failures in a row
	// The failure rate's window, in buckets of window/windowBuckets: the
	// attempts and failures of each, and the start of the newest.
	total, failed [windowBuckets]int
	newest        int
	newestAt      time.Time
}

// stateAt returns the state at now: an Open circuit past until is
// HalfOpen. c.mu must be held.
func (c *circuit) stateAt(now time.Time) State {
	if c.state == Open && !now.Before(c.until) {
		return HalfOpen
	}
	return c.state
}

// release ends, at now, the use of c that Breaker.circuit began: a
// refusal, or the end of the attempt it let go.
func (c *circuit) release(now time.Time) { c.b.circuits.DoneAt(c.entry.Load(), now) }

// eventful reports whether c is open, half open or counting failures: a
// circuit the table keeps longer than a quiet one.
func (c *circuit) eventful() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.state != Closed || c.inRow > 0 || c.failed != [windowBuckets]int{}
}

// failure reports whether an outcome counts against the circuit, and
// success whether it shows the server up. A 503 that names no wait is a
// throttle to the Transport, but it refuses no rate (see
// [retry.RateLimited]): it is how a balancer with no healthy backend
// answers, so it counts as a failure; a 429, or a 503 with a server wait,
// is left to a Pacer.
func failure(f retry.Feedback) bool {
	switch f.Class {
	case retry.Transient, retry.Unsent:
		return true
	case retry.Throttled:
		return !retry.RateLimited(f)
	}
	return false
}
func success(f retry.Feedback) bool { return f.Class == retry.Success }

// closedTurn is the turn of an attempt on a closed circuit: the circuit
// itself, so that it costs no allocation.
type closedTurn circuit

func (t *closedTurn) Done(f retry.Feedback) {
	c := (*circuit)(t)
	now := c.b.clock()
	defer c.release(now)
	c.mu.Lock()
	if c.state != Closed {
		c.mu.Unlock() // opened meanwhile by another attempt
		return
	}
	failed := c.count(now, f)
	if !failed || !c.tripped() {
		c.mu.Unlock()
		return
	}
	c.open(now, f)
	c.mu.Unlock()
	c.b.changed(c.key, Closed, Open)
}

func (t *closedTurn) Abandon() {
	c := (*circuit)(t)
	c.release(c.b.clock())
}

// newProbes begins a generation of probes at now, with none out. c.mu
// must be held.
func (c *circuit) newProbes(now time.Time) {
	c.probing, c.probeAt = 0, now
	c.probeGen++
}

// probe is the turn of an attempt on a half-open circuit.
type probe struct {
	c   *circuit
	gen uint64 // the generation of probes it belongs to
}

func (p *probe) Done(f retry.Feedback) {
	c := p.c
	now := c.b.clock()
	defer c.release(now)
	c.mu.Lock()
	if p.gen != c.probeGen {
		c.mu.Unlock() // it went unanswered for too long, and others went
		return
	}
	c.probing--
	if c.state != HalfOpen {
		c.mu.Unlock()
		return
	}
	var to State
	switch {
	case success(f):
		c.close()
		to = Closed
	case failure(f):
		c.open(now, f)
		to = Open
	default:
		c.mu.Unlock() // a rate limit's refusal or a 404 says nothing of the outage
		return
	}
	c.mu.Unlock()
	c.b.changed(c.key, HalfOpen, to)
}

func (p *probe) Abandon() {
	c := p.c
	defer c.release(c.b.clock())
	c.mu.Lock()
	if p.gen == c.probeGen {
		c.probing--
	}
	c.mu.Unlock()
}

// count adds an outcome to the closed circuit's tallies, and reports
// whether it was a failure. Outcomes that are neither a failure nor a
// success (rate limits' refusals, permanent answers) count in neither the
// row nor the rate. c.mu must be held.
func (c *circuit) count(now time.Time, f retry.Feedback) (failed bool) {
	failed = failure(f)
	switch {
	case failed:
		c.inRow++
	case success(f):
		c.inRow = 0
	default:
		return false
	}
	c.roll(now)
	c.total[c.newest]++
	if failed {
		c.failed[c.newest]++
	}
	return failed
}

// roll moves the window's newest bucket to now, emptying the buckets it
// passes. c.mu must be held.
func (c *circuit) roll(now time.Time) {
	width := c.b.window() / windowBuckets
	if c.newestAt.IsZero() {
		c.newestAt = now
		return
	}
	for n := 0; n < windowBuckets && now.Sub(c.newestAt) >= width; n++ {
		c.newest = (c.newest + 1) % windowBuckets
		c.total[c.newest], c.failed[c.newest] = 0, 0
		c.newestAt = c.newestAt.Add(width)
	}
	if now.Sub(c.newestAt) >= width { // a gap longer than the window
		c.newestAt = now
	}
}

// tripped reports whether the closed circuit's failures open it. c.mu
// must be held.
func (c *circuit) tripped() bool {
	if n := c.b.failures(); n > 0 && c.inRow >= n {
		return true
	}
	rate := c.b.failureRate()
	if rate < 0 {
		return false
	}
	total, failed := 0, 0
	for i := range windowBuckets {
		total += c.total[i]
		failed += c.failed[i]
	}
	return total >= c.b.minRequests() && float64(failed) >= rate*float64(total)
}

// open opens the circuit at now for OpenFor, or the failure's server wait
// when longer, up to MaxOpenFor. c.mu must be held.
func (c *circuit) open(now time.Time, f retry.Feedback) {
	d := c.b.openFor()
	if f.Hinted && f.Wait > d {
		d = min(f.Wait, max(c.b.maxOpenFor(), d))
	}
	c.state, c.until = Open, now.Add(d)
}

// close closes the circuit and forgets its failures. c.mu must be held.
func (c *circuit) close() {
	c.state, c.inRow = Closed, 0
	c.total, c.failed = [windowBuckets]int{}, [windowBuckets]int{}
	c.newestAt = time.Time{}
}
