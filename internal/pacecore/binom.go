package pacecore

import "math"

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
