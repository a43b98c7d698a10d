package retry

import (
	"fmt"
	"net/http"
)

// Prepare is what a [Transport.BeforeAttempt] hook is given: the request of
// the attempt about to be sent, and what the attempt before it met.
type Prepare struct {
	// Attempt is the attempt's number: 1 for the first.
	Attempt int
	// Request is the attempt's request, a clone of the caller's with a
	// header of its own: the hook may set and delete its header fields (a
	// fresh signature, a new token), which this attempt alone sends. The
	// rest is the Transport's: the hook must not change the body, URL,
	// method or context, nor read the body.
	Request *http.Request
	// Previous is the outcome of the attempt before, nil for the first.
	// Its response, if it had one, has been drained: read its status and
	// header, not its body. Class is its class, Undecided for the first
	// attempt.
	Previous *Outcome
	Class    Class
}

// prepare calls the BeforeAttempt hook, if any, on the attempt's request
// areq. An error it returns ends the call.
func (r *roundTrip) prepare(areq *http.Request, n int) error {
	h := r.s.beforeAttempt
	if h == nil {
		return nil
	}
	class := Undecided
	if r.last != nil {
		class = r.end
	}
	if err := h(Prepare{Attempt: n, Request: areq, Previous: r.last, Class: class}); err != nil {
		return fmt.Errorf("retry: BeforeAttempt refused attempt %d: %w", n, err)
	}
	return nil
}

// bothPrepares returns a BeforeAttempt hook that calls first and then,
// unless first refused the attempt, second; either may be nil.
func bothPrepares(first, second func(Prepare) error) func(Prepare) error {
	switch {
	case second == nil:
		return first
	case first == nil:
		return second
	}
	return func(p Prepare) error {
		if err := first(p); err != nil {
			return err
		}
		return second(p)
	}
}
