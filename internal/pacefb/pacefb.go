// Package pacefb turns what a [retry.Transport] tells a Pacer's turn
// into what the pacing core weighs: package pace's and package
// redispace's Pacers share it. (The Transport's own Pacer, in package
// retry, builds the same through [pacecore.Outcome], by [retry.RateLimited].)
package pacefb

import (
	"errors"

	"github.com/backoff-jitter/retry"
	"github.com/backoff-jitter/retry/internal/pacecore"
)

// Signal returns what f tells a Pacer whose Refusal is refusal (nil:
// [retry.RateLimited]): accepted, refused for the rate, or neither.
func Signal(f retry.Feedback, refusal func(retry.Feedback) bool) pacecore.Signal {
	if refusal == nil {
		refusal = retry.RateLimited
	}
	return pacecore.Outcome(f.Class == retry.Success, f.Class == retry.Throttled && refusal(f), f.Hinted, f.Wait,
		pacecore.Quota{Remaining: f.Quota.Remaining, Reset: f.Quota.Reset})
}

// TurnError returns err, an error of the core's Wait, as a Pacer returns
// it: a wait past the deadline as a [*retry.TurnTooLate].
func TurnError(err error) error {
	var late *pacecore.TooLate
	if errors.As(err, &late) {
		return &retry.TurnTooLate{Wait: late.Wait}
	}
	return err
}
