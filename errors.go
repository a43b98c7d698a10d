package retry

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Error is the error RoundTrip returns when the last attempt failed with an
// error. It wraps that error, so [errors.Is] and [errors.As] see it,
// also through the [*url.Error] an [http.Client] adds.
type Error struct {
	// Attempts is the number of attempts made.
	Attempts int
	// Reason is why no further attempt was made.
	Reason StopReason
	// Err is the last attempt's error.
	Err error
	// RetryAt is the earliest time another call makes sense, zero when
	// none is known (see [Ending]).
	RetryAt time.Time
}

func (e *Error) Error() string {
	s := "s"
	if e.Attempts == 1 {
		s = ""
	}
	verb := "giving up"
	if !e.Reason.GaveUp() {
		verb = "stopped" // not a give-up: nothing to retry, or retries off
	}
	return fmt.Sprintf("retry: %s after %d attempt%s (%v): %v", verb, e.Attempts, s, e.Reason, e.Err)
}

func (e *Error) Unwrap() error { return e.Err }

// Timeout reports whether the last error was a timeout, so that
// [url.Error.Timeout] and [os.IsTimeout]-style checks keep working.
func (e *Error) Timeout() bool {
	var t interface{ Timeout() bool }
	return errors.As(e.Err, &t) && t.Timeout()
}

// ErrAttemptTimeout is the cause the [Transport] gives the context of an
// attempt it limits in time,
//
//	ctx, cancel := context.WithTimeoutCause(req.Context(), d, ErrAttemptTimeout)
//
// so that [DefaultClassifier] tells the attempt's deadline from the
// caller's. An error outcome whose Request has a context that ended is the
// caller's, and [Permanent], unless the context's cause is
// ErrAttemptTimeout: then the attempt timed out, which is [Transient], or
// [Unsent] when nothing was written. net/http returns the cause itself as
// the attempt's error.
//
// ErrAttemptTimeout is a [net.Error] whose Timeout method reports true, and
// errors.Is(ErrAttemptTimeout, context.DeadlineExceeded) is true, as for
// net/http's own timeouts.
var ErrAttemptTimeout error = attemptTimeoutError{}

type attemptTimeoutError struct{}

// ErrBodyStalled is the error of a Read of a response body that got no
// bytes for [Transport.StallTimeout]. It is a [net.Error] whose Timeout
// method reports true, and errors.Is(ErrBodyStalled,
// context.DeadlineExceeded) is true.
var ErrBodyStalled error = bodyStalledError{}

type bodyStalledError struct{}

func (bodyStalledError) Error() string { return "retry: response body stalled" }

func (bodyStalledError) Timeout() bool { return true }

func (bodyStalledError) Temporary() bool { return true }

func (bodyStalledError) Is(target error) bool { return target == context.DeadlineExceeded }

func (attemptTimeoutError) Error() string { return "retry: attempt timed out" }

func (attemptTimeoutError) Timeout() bool { return true }

func (attemptTimeoutError) Temporary() bool { return true }

func (attemptTimeoutError) Is(target error) bool { return target == context.DeadlineExceeded }
