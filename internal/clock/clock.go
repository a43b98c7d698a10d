// Package clock holds the one context-aware sleep of this module and its
// nested ones (the retry loop, pace and redispace).
package clock

import (
	"context"
	"time"
)

// Sleep waits for d or until ctx is done, and returns ctx's error in the
// second case. A d that is not positive creates no timer: it returns at
// once, with ctx's error if it is done.
func Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-timer.C:
		return nil
	}
}
