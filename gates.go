package retry

import (
	"context"
	"errors"
	"net/http"
)

// The gates of an attempt. Every attempt, after the wait that precedes a
// retry, passes them in one order:
//
//	the Pacer's turn, the Breaker, the request (GetBody), BeforeAttempt,
//	the Budget (retries only), then the send.
//
// Each is asked as late as it can be, so that what it answers holds when
// the attempt goes (a circuit opened by other calls during the wait stops
// the retry), and a gate that refuses gives back what the gates before it
// took: a Pacer's turn and a Breaker's are abandoned, and the Budget,
// asked last, is charged only for an attempt that is sent.

// errBudget is the error of a call whose retry the Budget refused, when
// the last outcome can be returned neither as a response (its body was
// too long to keep in memory) nor as an error of its own.
var errBudget = errors.New("retry: retry budget refuses the retry")

// gated is an attempt that passed its gates: its request, what to release
// with it, and how many copies of it may be sent (see Hedge).
type gated struct {
	req    *http.Request
	a      attempt
	copies int
}

// gates takes the attempt's turns and builds its request. When a gate
// refuses, nothing is sent, what was taken is given back, and stop says
// why, with the gate's error.
func (r *roundTrip) gates(ctx context.Context) (g gated, stop StopReason, err error) {
	n := r.sent + 1
	if r.s.pacer != nil {
		if stop, err = r.pace(ctx); err != nil {
			return g, stop, err
		}
	}
	if err = r.admit(); err != nil {
		r.unpace()
		return g, StopBreaker, err
	}
	g.copies = r.hedges()
	r.racing, r.won = g.copies > 0, false
	g.req, g.a, err = r.attemptRequest(ctx, n)
	if err != nil {
		// GetBody failed: nothing was sent for this attempt.
		r.ungate()
		return g, StopBody, err
	}
	if err = r.prepare(g.req, n); err != nil {
		// The attempt's body is closed as the base would have closed
		// it, the caller's with it on a first attempt that sends the
		// caller's own body.
		r.drop(g)
		return g, StopBeforeAttempt, err
	}
	if r.rounds > 0 && !r.charge() {
		r.drop(g)
		return g, StopBudget, errBudget
	}
	return g, StopNone, nil
}

// charge asks the Budget for the retry about to be sent, of an outcome of
// class r.retried. A retry of a refusal for the rate (RateLimited) that
// waited for its Pacer turn at a learned rate is paid for by that wait,
// not by the Budget: a rate limit is finished, not failed. A 503 with no
// server wait is no such refusal, and is charged as any other.
func (r *roundTrip) charge() bool {
	r.free = false
	b := r.s.budget
	if b == nil {
		return true
	}
	if p, ok := r.turn.(interface{ Paced() bool }); ok && r.limited && p.Paced() {
		r.free = true
		return true
	}
	return b.AllowRetry(r.retried)
}

// budgetRefuses reports whether the Budget would refuse a retry of an
// outcome of class c now, so that the call stops at once instead of
// waiting to be refused: only a Budget that can tell (an Affords method,
// see [Budget]) is asked.
func (r *roundTrip) budgetRefuses(c Class) bool {
	b, ok := r.s.budget.(interface{ Affords(Class) bool })
	return ok && !b.Affords(c)
}

// drop gives back the gates of g, an attempt that is not sent, and closes
// its body.
func (r *roundTrip) drop(g gated) {
	closeRequestBody(g.req)
	g.a.release()
	r.ungate()
}

// ungate gives back the Pacer's and the Breaker's turns of an attempt
// that is not sent.
func (r *roundTrip) ungate() {
	r.unpace()
	r.unadmit()
}

// refused returns what RoundTrip returns when a gate refused the next
// attempt for stop, with err. Before any attempt was sent, that is an
// error. After, it is the last outcome when the refusal is about whether
// to go on (the Pacer's turn past the deadline, the Breaker, the Budget):
// its response, kept in memory while the call waited, or its error. The
// other refusals (the hook's, a failed GetBody, the caller's cancellation
// during a wait) end the call with their own error.
func (r *roundTrip) refused(stop StopReason, err error) (*http.Response, error) {
	if r.sent == 0 && r.body == nil {
		closeRequestBody(r.req) // nothing was sent: RoundTrip still owns it
	}
	class := r.end // the last attempt's, or Unsent before the first
	if stop == StopBody {
		class = Permanent
	}
	last := r.kept
	r.kept = nil
	lastOn := stop == StopDeadline || stop == StopBreaker || stop == StopBudget
	switch {
	case lastOn && last != nil:
		r.giveUp(r.tookOf, class, last, nil, stop)
		return r.ended(last, r.sent, stop), nil
	case lastOn && r.lastErr != nil && stop != StopDeadline:
		// The Pacer's refusal keeps its own error, which says when the
		// turn would have come (TurnTooLate).
		err = r.lastErr
	}
	return nil, r.giveUp(r.tookOf, class, nil, err, stop)
}
