package main

import (
	"time"

	"github.com/backoff-jitter/retry"
)

// The names of the strategies, as the CSV and the charts spell them (the
// names of the AWS simulator's results, with Decorrelated in full).
const (
	nameNone         = "None"
	nameExponential  = "Exponential"
	nameFullJitter   = "FullJitter"
	nameEqualJitter  = "EqualJitter"
	nameDecorrelated = "Decorrelated"
)

// strategy is one backoff algorithm under test: a name and the
// [retry.Backoff] that chooses each client's sleep before its retries.
type strategy struct {
	name    string
	backoff retry.Backoff
}

// strategies returns the five algorithms of the AWS Architecture Blog, in the
// order of the CSV and the charts, built from the library's own curves with
// the model's base and cap.
//
// The model sleeps min(cap, base*2^attempt) before retry number attempt (1 at
// the first retry, so the first retry sleeps 2*base, 10ms with the blog's
// 5ms). The library's [retry.Exponential] returns min(Cap, Base*2^(n-1)) for
// retry n, and the simulation calls every Backoff as a [retry.Transport]
// does, with n = attempt, so the exponential curves get Base 2*base: then
// Base*2^(attempt-1) = base*2^attempt. Were 2*base above the cap, every sleep
// would be the cap, so Base is clamped to it (Exponential rejects Base > Cap).
//
// [retry.Decorrelated] reads the model's min(cap, uniform(base, 3*sleep)) with
// its own Base, base: it treats the zero prev of the first retry as Base, the
// model's starting sleep.
func strategies(base, limit time.Duration) []strategy {
	expBase := 2 * base
	if limit > 0 && expBase > limit {
		expBase = limit
	}
	exp := func(j retry.Jitter) retry.Exponential {
		return retry.Exponential{Base: expBase, Cap: limit, Jitter: j}
	}
	return []strategy{
		{nameNone, retry.Constant{}},
		{nameExponential, exp(nil)},
		{nameFullJitter, exp(retry.FullJitter)},
		{nameEqualJitter, exp(retry.EqualJitter)},
		{nameDecorrelated, retry.Decorrelated{Base: base, Cap: limit}},
	}
}

// validator is implemented by every curve of package retry.
type validator interface {
	Validate() error
}

// validateStrategies returns the first error reported by the Validate method
// of a strategy's Backoff, if it has one.
func validateStrategies(ss []strategy) error {
	for _, s := range ss {
		if v, ok := s.backoff.(validator); ok {
			if err := v.Validate(); err != nil {
				return err
			}
		}
	}
	return nil
}
