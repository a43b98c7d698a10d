package retry

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"
)

// Pacer spaces the attempts a [Transport] sends, so that fewer are
// refused in the first place: every attempt, the first included, waits
// for a turn, and reports its outcome on it. Package
// [github.com/backoff-jitter/retry/pace] provides one that learns each
// host's rate from its throttling.
//
// Implementations must be safe for concurrent use: Wait, and the methods
// of the turns it returns, are called from concurrent RoundTrips. If a
// Pacer also has a Validate() error method, the Transport calls it once,
// at first use, and refuses every request with its error.
type Pacer interface {
	// Wait returns when the next attempt of req may be sent, with its
	// turn. It returns the error of ctx when ctx ends first, and, without
	// waiting, an error that wraps [context.DeadlineExceeded] when the
	// wait would end past ctx's deadline. req is the caller's request,
	// which Wait must not modify.
	Wait(ctx context.Context, req *http.Request) (Turn, error)
}

// TurnTooLate is the error a [Pacer]'s Wait returns when the turn it would
// give comes past the request's deadline: Wait is how long from the call
// the turn would have come. It wraps [context.DeadlineExceeded]. A Pacer
// that returns it tells the caller when to come back ([RetryAt]).
type TurnTooLate struct {
	Wait time.Duration
}

func (e *TurnTooLate) Error() string {
	return fmt.Sprintf("retry: pacing wait of %v would end past the context's deadline", e.Wait)
}

func (e *TurnTooLate) Unwrap() error { return context.DeadlineExceeded }

// Turn is an attempt's place in a [Pacer]'s schedule. The Transport calls
// exactly one of its methods, once.
type Turn interface {
	// Done reports the outcome of the attempt sent on the turn.
	Done(Feedback)
	// Abandon gives the turn back: its attempt was not sent.
	Abandon()
}

// Feedback is what a [Transport] tells a [Pacer] of an attempt sent on one
// of its turns.
type Feedback struct {
	// Class is the attempt's outcome class; Undecided for a copy of a
	// hedged attempt cancelled because another copy's answer won (see
	// [Hedge]): it was sent, but its answer was not waited for.
	Class Class
	// Response is the attempt's response, nil when it failed with an
	// error. A Pacer may read its header, and peek at its body with
	// [PeekBody], which puts back what it reads; not consume it.
	Response *http.Response
	// Wait is how long the server asked its clients to hold off, and
	// Hinted whether it asked: the [ServerWait] of a throttled response
	// (read with the Transport's RateLimitReset), or, for a response that
	// still succeeded, the reset of a quota it says is spent (an IETF
	// RateLimit field with r=0, or RateLimit-Remaining: 0); at most the
	// Transport's MaxRetryAfter, the longest server wait it honours.
	Wait   time.Duration
	Hinted bool
	// Quota is the quota the response publishes (see [ParseQuota]), for
	// a success or a throttle; the zero Quota when it publishes none.
	Quota Quota
}

// feedback is what the Transport tells its Pacer of outcome o of class c.
func (r *roundTrip) feedback(o Outcome, c Class) Feedback {
	f := Feedback{Class: c, Response: o.Response}
	if o.Response == nil {
		return f
	}
	switch c {
	case Throttled:
		f.Wait, f.Hinted = ServerWait(o.Response.Header, r.s.now(), r.s.rateLimitReset)
	case Success:
		f.Wait, f.Hinted = quotaExhausted(o.Response.Header, r.s.now)
	default:
		return f
	}
	f.Wait = min(f.Wait, r.s.maxRetryAfter) // no Transport's wait is longer
	var ok bool
	if f.Quota, ok = readQuota(o.Response.Header, r.s.now); ok {
		// Nor is a quota spread past it: a wait for its reset is one.
		if limit := r.s.now().Add(r.s.maxRetryAfter); f.Quota.Reset.After(limit) {
			f.Quota.Reset = limit
		}
	}
	return f
}

// pace waits for the Pacer's turn before an attempt, after its backoff.
// When the Pacer refuses, it returns its error and why no attempt follows:
// a turn past the deadline tells when to come back (RetryAt).
func (r *roundTrip) pace(ctx context.Context) (StopReason, error) {
	var start time.Time
	if r.timed {
		start = r.s.now()
	}
	wctx := r.waits(ctx)
	turn, err := r.s.pacer.Wait(wctx, r.req)
	if r.timed {
		r.waited += r.s.now().Sub(start)
	}
	if err != nil {
		if wctx.Err() == nil {
			// The Pacer refused a wait past the deadline.
			var late *TurnTooLate
			if errors.As(err, &late) {
				r.retryAt = r.s.now().Add(late.Wait)
			}
			return StopDeadline, err
		}
		return StopCanceled, r.waitErr(wctx, err)
	}
	r.turn = turn
	return StopNone, nil
}

// unpace gives back the turn of an attempt that is not sent.
func (r *roundTrip) unpace() {
	if r.turn != nil {
		r.turn.Abandon()
		r.turn = nil
	}
}
