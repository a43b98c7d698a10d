package retry

import (
	"time"
)

// Jitter randomises a delay d, given a uniform random number u in [0, 1).
//
// A curve applies its Jitter to its delay after capping it, and caps the
// result again, so a Jitter may return more than d (as [Spread] does) without
// a delay ever exceeding the curve's Cap. A nil Jitter means no jitter.
// The Jitters of this package return zero for d <= 0, treat a NaN u as 0
// and any other u outside [0, 1) as the nearest value inside it, never
// panic, and are safe for concurrent use; a Jitter of your own should be
// too, since one curve value may serve many requests at once.
type Jitter func(d time.Duration, u float64) time.Duration

// FullJitter returns u*d, a uniform choice in [0, d): the "Full Jitter" of
// the AWS Architecture Blog's "Exponential Backoff And Jitter". On a capped
// curve it yields random_between(0, min(Cap, curve)). For d = 1s it returns
// 0 for u = 0, 250ms for u = 0.25 and 900ms for u = 0.9.
//
// FullJitter spreads retries the most, at the price of sometimes retrying
// almost at once. It is safe for concurrent use.
func FullJitter(d time.Duration, u float64) time.Duration {
	if d <= 0 {
		return 0
	}
	return floorCapped(clampUnit(u)*float64(d), d)
}

// EqualJitter returns d/2 + u*d/2, a uniform choice in [d/2, d): the "Equal
// Jitter" of the AWS Architecture Blog. On a capped curve it yields
// t/2 + random_between(0, t/2) with t = min(Cap, curve). For d = 1s it
// returns 500ms for u = 0, 750ms for u = 0.5 and 950ms for u = 0.9.
//
// EqualJitter always waits at least half the delay. It is safe for
// concurrent use.
func EqualJitter(d time.Duration, u float64) time.Duration {
	if d <= 0 {
		return 0
	}
	half := d / 2
	rest := d - half // d/2 rounded up, so that half+rest == d for odd d
	return half + floorCapped(clampUnit(u)*float64(rest), rest)
}

// Spread returns a [Jitter] that adds up to ratio times the delay:
// d + u*ratio*d, a uniform choice in [d, d+ratio*d). Spread(0.2) turns a
// delay of 4s into one between 4s and 4.8s (u = 0.5 gives 4.4s). The curve
// caps the result, so on a curve at its Cap, Spread adds nothing.
//
// Spread clamps its ratio and never panics: a ratio that is negative or NaN
// counts as 0 (no jitter, d itself), and a ratio so large that the delay
// overflows, +Inf included, saturates: the curve's Cap then bounds the
// delay (for any u above 0). The Jitter returned is safe for concurrent use.
func Spread(ratio float64) Jitter {
	if !(ratio > 0) { // NaN too
		ratio = 0
	}
	return func(d time.Duration, u float64) time.Duration {
		if d <= 0 {
			return 0
		}
		// u = 0 with ratio = +Inf is NaN, which floorCapped makes 0.
		return d + floorCapped(clampUnit(u)*ratio*float64(d), maxDuration-d)
	}
}

// belowOne is the largest float64 less than 1.
const belowOne = 1 - 0x1p-53

// clampUnit clamps u to [0, 1): NaN and negative numbers become 0, numbers from
// 1 up become the largest float64 below 1.
func clampUnit(u float64) float64 {
	switch {
	case !(u >= 0): // NaN too
		return 0
	case u >= 1:
		return belowOne
	}
	return u
}
