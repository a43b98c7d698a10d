package pacecore

import "math"

// The evidence of a limit: sequential tests of the share of attempts
// refused, each deciding at the same weight of evidence.

// cusum is Page's CUSUM of an idle key's answers: the log-likelihood
// ratio of a limit's share of refusals (p1) against one cheaper to retry
// than to pace (p0), never below zero. At evidence, the key engages.
// With a floor (random shedding found before), p0 is at least the floor:
// only refusals well above it are evidence.
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

// add adds an answer and reports whether the sum has reached evidence.
// It stays there (a key refused but not yet engaging, in an outage) and
// falls again with the successes.
func (c *cusum) add(refused bool, floor float64) bool {
	p0, p1 := shares(floor)
	if refused {
		c.s = min(c.s+math.Log(p1/p0), evidence)
	} else {
		c.s = max(c.s-math.Log((1-p0)/(1-p1)), 0)
	}
	return c.s >= evidence
}

// sprt is Wald's sequential test of a key that engaged at a share of
// refusals random shedding could have (ref), now paced lower, at ratio
// times the rate it sent at. Random shedding refuses as many at the lower
// rate; a limit refuses fewer, 1 - (1-ref)/ratio of them (what it
// accepted, spread over fewer attempts), and at most a quarter fewer than
// shedding would, or the test cannot tell them apart. Far more refusals
// than shedding's are neither: the lower rate is still over a limit.
type sprt struct {
	llr       float64 // for shedding, against a limit
	shed, lim float64 // the shares refused at the lower rate, if shedding and if a limit
	n, k      int64   // the answers weighed, and the refusals among them
}

func (p *sprt) begin(ref, ratio float64) {
	shed := min(max(ref, 0.01), engageHigh)
	*p = sprt{shed: shed, lim: min(max(1-(1-ref)/ratio, 0), 0.75*shed)}
	p.lim = max(p.lim, shed/4)
}

// probe verdicts.
const (
	undecided = iota
	limitMet  // the refusals fell with the rate
	shedding  // they did not
	overLimit // far more than shedding's: the lower rate is still too high
)

// add weighs an answer of the lower rate and returns the verdict so far.
func (p *sprt) add(refused bool) int {
	p.n++
	if refused {
		p.k++
		p.llr += math.Log(p.shed / p.lim)
	} else {
		p.llr += math.Log((1 - p.shed) / (1 - p.lim))
	}
	switch {
	case refused && tail(p.n, p.k, p.shed) <= math.Exp(-evidence):
		return overLimit
	case p.llr <= -evidence:
		return limitMet
	case p.llr >= evidence && p.share() < (1+p.shed)/2:
		return shedding // and about shedding's share refused, not far more
	}
	return undecided
}

// share returns the share refused at the lower rate.
func (p *sprt) share() float64 { return float64(p.k) / float64(max(p.n, 1)) }

// tail returns the probability of k or more successes in n trials of
// probability q: the binomial's upper tail.
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

// genTally counts the answers of the attempts paced at the rate in
// force, and the refusals among them.
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
