package retry

import (
	"context"
	"errors"
	"net/http"
	"time"
)

// Ending is how a call ended that returned a response the Transport would
// have retried, or an error: how many attempts were made, why no more
// were, and the earliest time another try makes sense, for a caller that
// parks the work (a job queue) instead of failing it.
type Ending struct {
	// Attempts is the number of attempts sent.
	Attempts int
	// Reason is why no further attempt was made.
	Reason StopReason
	// RetryAt is the earliest time a new call makes sense, when the
	// Transport knew one: the end of the wait it refused to sleep (a
	// server's wait longer than MaxRetryAfter, a wait past the
	// context's deadline, the Pacer's turn past it) or the wait it would
	// have slept when the budget refused the retry. Zero when none is
	// known (attempts ran out, the request was unsafe to replay, the
	// outcome was permanent).
	RetryAt time.Time
}

type endingKey struct{}

// EndingOf returns how the call that returned resp ended, when resp is a
// failed answer the Transport returned instead of retrying it (a 503 whose
// Retry-After was too long, the last throttle when attempts ran out, an
// ordinary 404): ok is false for a success, and for a response that did
// not come from a Transport. It reads resp.Request, the request of the
// attempt that got it.
func EndingOf(resp *http.Response) (e Ending, ok bool) {
	if resp == nil || resp.Request == nil {
		return Ending{}, false
	}
	p, ok := resp.Request.Context().Value(endingKey{}).(*Ending)
	if !ok {
		return Ending{}, false
	}
	return *p, true
}

// RetryAt returns the earliest time another call makes sense, from what a
// Transport's RoundTrip (or an [http.Client] over it) returned: the
// Ending of resp, or the [*Error] in err's chain. ok is false when neither
// knows one.
func RetryAt(resp *http.Response, err error) (time.Time, bool) {
	if e, ok := EndingOf(resp); ok && !e.RetryAt.IsZero() {
		return e.RetryAt, true
	}
	var re *Error
	if errors.As(err, &re) && !re.RetryAt.IsZero() {
		return re.RetryAt, true
	}
	return time.Time{}, false
}

// ended returns resp, the failed answer RoundTrip returns, with its Ending
// attached: resp.Request is replaced by a shallow copy whose context holds
// it. Only this path pays for the Ending; a success returns as it came.
func (r *roundTrip) ended(resp *http.Response, attempts int, stop StopReason) *http.Response {
	if resp == nil || resp.Request == nil {
		return resp
	}
	e := &Ending{Attempts: attempts, Reason: stop, RetryAt: r.retryAt}
	resp.Request = resp.Request.WithContext(context.WithValue(resp.Request.Context(), endingKey{}, e))
	return resp
}
