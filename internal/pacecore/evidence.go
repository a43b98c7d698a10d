package pacecore

import "math"

// cusum is Page's CUSUM of an idle key's answers, a bucket at a time:
// the log-likelihood ratio of a limit's share refused (p1) against one
// cheaper to retry than to pace (p0), at least the floor of random
// shedding. At evidence, the key engages; the other tests use it too.
type cusum struct{ s float64 }

// shares returns p0 and p1 over floor: engageLow and engageHigh, or, over
// a floor above engageLow, the floor and the share as far above it.
func shares(floor float64) (p0, p1 float64) {
	p0 = max(engageLow, floor)
	return p0, p0 + (1-p0)*(engageHigh-engageLow)/(1-engageLow)
}

// cold starts a new key's sum coldRefusals refusals short of evidence.
func (c *cusum) cold() {
	p0, p1 := shares(0)
	c.s = evidence - coldRefusals*math.Log(p1/p0)
}

func (c *cusum) reset() { c.s = 0 }

// add adds a bucket's answers, capped at evidence (an outage's refusals
// do not pile up). A bucket is weighed whole, in whatever order: a server
// refuses sooner than it serves, so concurrent refusals come first and,
// weighed one by one, would look like a run.
func (c *cusum) add(refused, ok int64, floor float64) {
	c.s = min(max(c.s+llr(refused, ok, floor), 0), evidence)
}

// sure reports whether the open bucket's answers reach evidence even if
// the pending ones all succeed: a burst far over a limit decides early.
func (c *cusum) sure(refused, ok, pending int64, floor float64) bool {
	return c.s+llr(refused, ok+pending, floor) >= evidence
}

// llr returns the log-likelihood ratio of refused and ok answers.
func llr(refused, ok int64, floor float64) float64 {
	p0, p1 := shares(floor)
	return float64(refused)*math.Log(p1/p0) - float64(ok)*math.Log((1-p0)/(1-p1))
}

// tail returns P(X ≥ k) for X binomial in n trials of probability q.
func tail(n, k int64, q float64) float64 {
	if k <= 0 {
		return 1
	}
	// Sum the terms from k up, each from the one before.
	term := math.Exp(lgammaInt(n+1) - lgammaInt(k+1) - lgammaInt(n-k+1) + float64(k)*math.Log(q) + float64(n-k)*math.Log1p(-q))
	sum := 0.0
	for i := k; i <= n && term > 0; i++ {
		sum += term
		term *= float64(n-i) / float64(i+1) * q / (1 - q)
	}
	return min(sum, 1)
}

func lgammaInt(n int64) float64 {
	v, _ := math.Lgamma(float64(n))
	return v
}

// genTally counts answers paced at the rate in force, and refusals.
type genTally struct{ n, k float64 }

// share returns the share refused; 0 with no answer.
func (g *genTally) share() float64 {
	if g.n == 0 {
		return 0
	}
	return g.k / g.n
}

func (g *genTally) add(refused bool) {
	g.n++
	if refused {
		g.k++
	}
}

// over reports whether the refusals are more than floor explains, at the
// weight of evidence the other tests use. With no floor, any refusal is.
func (g *genTally) over(floor float64) bool {
	if floor <= 0 {
		return g.k > 0
	}
	return tail(int64(g.n), int64(g.k), floor) <= math.Exp(-evidence)
}
