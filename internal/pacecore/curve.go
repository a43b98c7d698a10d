package pacecore

import (
	"math"
	"time"
)

// rateCurve is the rate in force: the last cut's, grown back along
// CUBIC's curve (RFC 9438) or linearly (AIMD) to a top, held there a
// while, then grown past it.
type rateCurve struct {
	base  float64       // the rate the last cut left, requests per second
	top   float64       // where growth pauses: just under the capacity measured, or the rate before the cut
	hold  time.Duration // how long the rate holds at top
	cutAt time.Time
	// capacity: the accepted rate the last cut measured (0: none); finds,
	// the cuts in a row that measured about the same (a steady limit).
	capacity float64
	finds    int
}

// cut cuts the rate from from, by the rate accepted lately, read from
// samples successes. With minSamples, that is the capacity: the rate goes
// just under it (and under from: a cut sheds load), growth pausing there.
// With fewer, it is β of from, or under the rate accepted if lower, and
// growth pauses where β would have cut. Each cut that finds the capacity
// found before (within steadyBand) holds at the top twice as long, up to
// holdMax: a steady limit is met, not circled.
func (c *rateCurve) cut(now time.Time, from, accepted float64, samples int64, cfg *Config) {
	beta := cubicBeta
	if cfg.Adapt == AIMD {
		beta = aimdCut
	}
	var base, top float64
	if samples >= minSamples {
		base = capacityShare * min(accepted, from)
		top = base
		if c.capacity > 0 && max(accepted, c.capacity) <= steadyBand*min(accepted, c.capacity) {
			c.finds++
		} else {
			c.finds = 0
		}
		c.capacity = accepted
	} else {
		base = beta * from
		if accepted > 0 {
			base = min(base, capacityShare*accepted)
		}
		top = base / beta
	}
	c.base, c.top, c.cutAt = max(base, cfg.MinRate), max(top, cfg.MinRate), now
	c.hold = 0
	if c.finds > 0 {
		c.hold = min(holdBase<<(c.finds-1), holdMax)
	}
}

// at returns the rate at now.
func (c *rateCurve) at(now time.Time, cfg *Config) float64 {
	t := max(now.Sub(c.cutAt), 0).Seconds()
	hold := c.hold.Seconds()
	if cfg.Adapt == AIMD {
		reach := (c.top - c.base) / aimdGrowth
		switch {
		case t < reach:
			return c.base + aimdGrowth*t
		case t < reach+hold:
			return c.top
		}
		return c.top + aimdGrowth*(t-reach-hold)
	}
	// W(t) = C(t-K)³ + top, K the time to climb back from base.
	k := math.Cbrt((c.top - c.base) / cubicScale)
	switch {
	case t < k:
		return c.top - cubicScale*math.Pow(k-t, 3)
	case t < k+hold:
		return c.top
	}
	return c.top + cubicScale*math.Pow(t-k-hold, 3)
}
