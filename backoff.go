package retry

import (
	"fmt"
	"math"
	"time"
)

// Backoff chooses the wait before each retry.
//
// Implementations are stateless values: everything a delay depends on is
// passed to Delay, so one Backoff can be shared by any number of goroutines
// and requests. The curves of this package ([Constant], [Linear],
// [Fibonacci], [Polynomial], [Exponential], [Decorrelated]) also have a
// Validate method that the [Transport] calls before using them.
type Backoff interface {
	// Delay returns the wait before retry n (n = 1 is the first retry).
	// prev is the wait chosen before retry n-1 (zero when n = 1) and
	// u is a uniform random number in [0, 1) supplied by the Transport.
	Delay(n int, prev time.Duration, u float64) time.Duration
}

// BackoffFunc adapts an ordinary function to the [Backoff] interface.
//
// A BackoffFunc is safe for concurrent use if the function is.
type BackoffFunc func(n int, prev time.Duration, u float64) time.Duration

// Delay returns f(n, prev, u). A negative result is returned as zero, and a
// nil f returns zero rather than panicking.
func (f BackoffFunc) Delay(n int, prev time.Duration, u float64) time.Duration {
	if f == nil {
		return 0
	}
	return max(f(n, prev, u), 0)
}

// Validate reports an error if f is nil.
func (f BackoffFunc) Validate() error {
	if f == nil {
		return fmt.Errorf("retry: BackoffFunc is nil")
	}
	return nil
}

// Constant waits Base before every retry:
//
//	delay(n) = Base
//
// Constant{Base: 1 * time.Second} waits 1s, 1s, 1s, ... A Constant has no
// Cap: with [Spread] its delays may exceed Base. Base must not be negative.
// A Constant is safe for concurrent use.
type Constant struct {
	// Base is the wait before each retry. Zero means retry at once.
	Base time.Duration
	// Jitter, if not nil, randomises each delay.
	Jitter Jitter
}

// Delay returns Base with Jitter applied. n and prev are not used.
func (c Constant) Delay(_ int, _ time.Duration, u float64) time.Duration {
	return jitterCapped(max(c.Base, 0), maxDuration, c.Jitter, u)
}

// Validate reports a negative Base.
func (c Constant) Validate() error {
	if c.Base < 0 {
		return negativeFieldError("Constant.Base", c.Base)
	}
	return nil
}

// Linear waits n times Base before retry n:
//
//	delay(n) = min(Cap, n*Base)
//
// Linear{Base: 1 * time.Second} waits 1s, 2s, 3s, 4s, ..., and with
// Cap: 3 * time.Second it waits 1s, 2s, 3s, 3s, ... n < 1 is treated as 1.
// A Linear is safe for concurrent use.
type Linear struct {
	// Base is the first delay and the step between delays.
	Base time.Duration
	// Cap is the longest delay, after Jitter too. Zero means no cap:
	// delays saturate at the largest time.Duration instead of overflowing.
	Cap time.Duration
	// Jitter, if not nil, randomises each (capped) delay.
	Jitter Jitter
}

// Delay returns min(Cap, n*Base) with Jitter applied, capped again.
func (l Linear) Delay(n int, _ time.Duration, u float64) time.Duration {
	limit := curveLimit(l.Cap)
	return jitterCapped(mulCapped(max(l.Base, 0), uint64(max(n, 1)), limit), limit, l.Jitter, u)
}

// Validate reports a negative Base or Cap, or a non-zero Cap less than
// Base.
func (l Linear) Validate() error {
	return validateBaseCap("Linear", l.Base, l.Cap)
}

// Fibonacci waits fibonacci(n) times Base before retry n, where fibonacci(1) = fibonacci(2) = 1
// and fibonacci(n) = fibonacci(n-1) + fibonacci(n-2):
//
//	delay(n) = min(Cap, fibonacci(n)*Base)
//
// Fibonacci{Base: 1 * time.Second} waits 1s, 1s, 2s, 3s, 5s, 8s, 13s, ...
// n < 1 is treated as 1. A Fibonacci is safe for concurrent use.
type Fibonacci struct {
	// Base is the first delay.
	Base time.Duration
	// Cap is the longest delay, after Jitter too. Zero means no cap:
	// delays saturate at the largest time.Duration instead of overflowing.
	Cap time.Duration
	// Jitter, if not nil, randomises each (capped) delay.
	Jitter Jitter
}

// Delay returns min(Cap, fibonacci(n)*Base) with Jitter applied, capped again.
func (f Fibonacci) Delay(n int, _ time.Duration, u float64) time.Duration {
	limit := curveLimit(f.Cap)
	return jitterCapped(mulCapped(max(f.Base, 0), fibonacci(max(n, 1)), limit), limit, f.Jitter, u)
}

// Validate reports a negative Base or Cap, or a non-zero Cap less than
// Base.
func (f Fibonacci) Validate() error {
	return validateBaseCap("Fibonacci", f.Base, f.Cap)
}

// fibonacci returns the nth Fibonacci number (fibonacci(1) = fibonacci(2) = 1) for n >= 1, or
// math.MaxUint64 when it does not fit in a uint64 (n > 93).
func fibonacci(n int) uint64 {
	if n > 93 {
		return math.MaxUint64
	}
	var a, b uint64 = 0, 1
	for i := 1; i < n; i++ {
		a, b = b, a+b
	}
	return b
}

// Polynomial waits n to the power Degree times Base before retry n:
//
//	delay(n) = min(Cap, n^Degree*Base)
//
// Polynomial{Base: 1 * time.Second, Degree: 2} (quadratic) waits 1s, 4s, 9s,
// 16s, ...; Degree 3 waits 1s, 8s, 27s, 64s, ...; Degree 1 is [Linear] and
// Degree 0 is [Constant]. Degree need not be a whole number. n < 1 is treated
// as 1. A Polynomial is safe for concurrent use.
type Polynomial struct {
	// Base is the first delay.
	Base time.Duration
	// Cap is the longest delay, after Jitter too. Zero means no cap:
	// delays saturate at the largest time.Duration instead of overflowing.
	Cap time.Duration
	// Degree is the power of n; it must be finite and not negative.
	Degree float64
	// Jitter, if not nil, randomises each (capped) delay.
	Jitter Jitter
}

// Delay returns min(Cap, n^Degree*Base) with Jitter applied, capped again.
func (p Polynomial) Delay(n int, _ time.Duration, u float64) time.Duration {
	limit := curveLimit(p.Cap)
	raw := scaleCapped(max(p.Base, 0), math.Pow(float64(max(n, 1)), p.Degree), limit)
	return jitterCapped(raw, limit, p.Jitter, u)
}

// Validate reports a negative Base or Cap, a non-zero Cap less than Base,
// or a negative, NaN or infinite Degree.
func (p Polynomial) Validate() error {
	if err := validateBaseCap("Polynomial", p.Base, p.Cap); err != nil {
		return err
	}
	switch {
	case math.IsNaN(p.Degree) || math.IsInf(p.Degree, 0):
		return fmt.Errorf("retry: Polynomial.Degree %v is not a finite number", p.Degree)
	case p.Degree < 0:
		return fmt.Errorf("retry: Polynomial.Degree %v is negative", p.Degree)
	}
	return nil
}

// Exponential multiplies the delay by Multiplier after every retry, starting
// at Base:
//
//	delay(n) = min(Cap, Base*Multiplier^(n-1))
//
// Exponential{Base: 100 * time.Millisecond, Cap: 20 * time.Second} waits
// 100ms, 200ms, 400ms, 800ms, 1.6s, 3.2s, 6.4s, 12.8s, 20s, 20s, ... With
// Jitter: [FullJitter] it is the AWS Architecture Blog's "Full Jitter",
// random_between(0, min(Cap, Base*2^(n-1))), the default of [Transport].
// Retry 10,000 waits Cap (or, with no Cap, the largest time.Duration); it
// never overflows. n < 1 is treated as 1. An Exponential is safe for
// concurrent use.
type Exponential struct {
	// Base is the first delay.
	Base time.Duration
	// Cap is the longest delay, after Jitter too. Zero means no cap:
	// delays saturate at the largest time.Duration instead of overflowing.
	Cap time.Duration
	// Multiplier is the growth factor between delays, at least 1.
	// Zero means 2 (doubling).
	Multiplier float64
	// Jitter, if not nil, randomises each (capped) delay.
	Jitter Jitter
}

// Delay returns min(Cap, Base*Multiplier^(n-1)) with Jitter applied, capped
// again.
func (e Exponential) Delay(n int, _ time.Duration, u float64) time.Duration {
	limit := curveLimit(e.Cap)
	m := e.Multiplier
	if m == 0 {
		m = 2
	}
	raw := scaleCapped(max(e.Base, 0), math.Pow(m, float64(max(n, 1)-1)), limit)
	return jitterCapped(raw, limit, e.Jitter, u)
}

// Validate reports a negative Base or Cap, a non-zero Cap less than Base,
// or a Multiplier that is not zero and less than 1, NaN or infinite.
func (e Exponential) Validate() error {
	if err := validateBaseCap("Exponential", e.Base, e.Cap); err != nil {
		return err
	}
	switch m := e.Multiplier; {
	case m == 0:
		return nil // means 2
	case math.IsNaN(m) || math.IsInf(m, 0):
		return fmt.Errorf("retry: Exponential.Multiplier %v is not a finite number", m)
	case m < 1:
		return fmt.Errorf("retry: Exponential.Multiplier %v is less than 1", m)
	}
	return nil
}

// Decorrelated is the AWS Architecture Blog's "Decorrelated Jitter": each
// delay is drawn between Base and three times the previous one,
//
//	delay(n) = min(Cap, Base + u*(3*prev' - Base)), prev' = max(prev, Base)
//
// that is min(Cap, random_between(Base, 3*prev)) with prev starting at Base,
// so the first retry waits between Base and 3*Base. The randomness is the
// curve itself, so Decorrelated has no Jitter field. With Base: 1s, Cap: 10s
// and u = 0.5 at every retry it waits 2s, 3.5s, 5.75s, 9.125s, 10s, 10s, ...;
// with u = 0 it waits Base every time.
//
// Base must be positive: with Base 0 every delay would be 0 forever, so
// Validate rejects it (Delay then returns 0 until prev grows). A Decorrelated
// is safe for concurrent use: the previous delay is an argument, not state.
type Decorrelated struct {
	// Base is the shortest delay, and the previous delay assumed for the
	// first retry. It must be positive.
	Base time.Duration
	// Cap is the longest delay. Zero means no cap: delays saturate at the
	// largest time.Duration instead of overflowing.
	Cap time.Duration
}

// Delay returns min(Cap, Base + u*(3*max(prev, Base) - Base)). n is not
// used: the previous delay carries the curve's progress.
func (d Decorrelated) Delay(_ int, prev time.Duration, u float64) time.Duration {
	limit := curveLimit(d.Cap)
	base := min(max(d.Base, 0), limit)
	p := float64(max(prev, base))
	span := 3*p - float64(base)
	return base + floorCapped(clampUnit(u)*span, limit-base)
}

// Validate reports a Base that is not positive, a negative Cap, or a
// non-zero Cap less than Base.
func (d Decorrelated) Validate() error {
	if d.Base <= 0 {
		return fmt.Errorf("retry: Decorrelated.Base %v is not positive (3 times 0 is 0 forever)", d.Base)
	}
	return validateBaseCap("Decorrelated", d.Base, d.Cap)
}

// maxDuration is the largest time.Duration, about 292 years: delays and
// server waits too large for a Duration saturate at it, never wrapping
// around to a short or negative one.
const maxDuration = time.Duration(math.MaxInt64)

// curveLimit returns the largest delay a curve with this Cap may return: Cap,
// or maxDuration when Cap is zero (no cap) or negative (invalid).
func curveLimit(limit time.Duration) time.Duration {
	if limit <= 0 {
		return maxDuration
	}
	return limit
}

// jitterCapped caps a curve's raw delay, applies the jitter to the capped value and
// caps again, as the AWS formulas do: full jitter at the cap is
// random_between(0, Cap).
func jitterCapped(raw, limit time.Duration, j Jitter, u float64) time.Duration {
	d := min(max(raw, 0), limit)
	if j == nil {
		return d
	}
	return min(max(j(d, clampUnit(u)), 0), limit)
}

// mulCapped returns min(limit, base*k) without overflowing.
func mulCapped(base time.Duration, k uint64, limit time.Duration) time.Duration {
	if base <= 0 || k == 0 {
		return 0
	}
	if k > uint64(limit)/uint64(base) {
		return limit
	}
	return time.Duration(k) * base
}

// scaleCapped returns base*f rounded to the nearest nanosecond, within [0, limit].
// f may be NaN or infinite.
func scaleCapped(base time.Duration, f float64, limit time.Duration) time.Duration {
	if base <= 0 {
		return 0 // and not 0*Inf = NaN
	}
	return nanosCapped(math.Round(float64(base)*f), limit)
}

// floorCapped returns f nanoseconds rounded down, within [0, limit].
func floorCapped(f float64, limit time.Duration) time.Duration {
	return nanosCapped(math.Floor(f), limit)
}

// nanosCapped converts f nanoseconds to a Duration within [0, limit], for any
// f, NaN and infinities included. The comparison is made in float64 before
// converting, because a float64 at or above 2^63 does not convert: and
// float64(math.MaxInt64) itself rounds up to 2^63.
func nanosCapped(f float64, limit time.Duration) time.Duration {
	switch {
	case limit <= 0 || !(f > 0): // NaN too
		return 0
	case f >= float64(limit):
		return limit
	}
	return min(time.Duration(f), limit)
}

func negativeFieldError(field string, d time.Duration) error {
	return fmt.Errorf("retry: %s %v is negative", field, d)
}

// validateBaseCap reports a negative Base or Cap, or a non-zero Cap less than
// Base.
func validateBaseCap(kind string, base, limit time.Duration) error {
	switch {
	case base < 0:
		return negativeFieldError(kind+".Base", base)
	case limit < 0:
		return negativeFieldError(kind+".Cap", limit)
	case limit != 0 && limit < base:
		return fmt.Errorf("retry: %s.Cap %v is less than Base %v", kind, limit, base)
	}
	return nil
}
