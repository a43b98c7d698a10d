package retry

import (
	"context"
	"fmt"
	"net/http"
	"time"
)

// roundTrip is the state of one call to RoundTrip.
type roundTrip struct {
	s    *settings
	req  *http.Request
	safe bool
	body *replayBody // nil unless the body is buffered for replay
	// lengths checks the bodies of a request with GetBody against its
	// ContentLength; nil until an attempt's body needs it.
	lengths *lengthCheck

	prev   time.Duration // the wait slept before the current attempt
	rounds int           // attempts sent but for copies: the backoff's retry count + 1
	racing bool          // the current attempt may have copies (see Hedge)
	// heldOff is when the longest server wait of the current attempt's
	// overtaken copies ends (see holdOff); zero when none asked for one.
	heldOff time.Time
	turn    Turn // the Pacer's turn of the current attempt; nil without a Pacer
	// circuit is the Breaker's turn of the next attempt; nil without a
	// Breaker.
	circuit Turn
	// kept is the last response, its body read into memory, and lastErr
	// the last error, while the next attempt waits and passes its gates
	// (see refused).
	kept    *http.Response
	lastErr error
	retried Class // the outcome the current attempt retries; Undecided for the first
	// limited is whether the last outcome refused its attempt for the
	// rate (RateLimited), and free whether the current attempt, its
	// retry, was paid for by its Pacer turn rather than the Budget.
	limited, free bool
	// last is the outcome of the attempt before the current one, its
	// response drained and closed, for the BeforeAttempt hook; nil before
	// the first.
	last *Outcome

	// waitCtx is what the waits between attempts end on, made by waits
	// when the request has a Cancel channel; nil until then.
	waitCtx    context.Context
	waitCancel context.CancelCauseFunc

	// For the hooks: what they report of the call so far. Times are
	// measured only when a hook is set (timed).
	timed  bool
	start  time.Time     // when RoundTrip began
	waited time.Duration // time spent between attempts: backoff, server waits, pacing
	took   time.Duration // how long attempt tookOf took
	tookOf int           // the number of the last outcome's attempt; 0 before the first
	sent   int           // attempts handed to the base transport, copies included
	hedged int           // copies of attempts sent (see Hedge)
	won    bool          // the response returned is a copy's
	end    Class         // the last outcome's class; Unsent before the first
	reason StopReason    // why no further attempt was made; StopNone on success
	// retryAt is when another call makes sense, set where the call stops
	// on a wait it will not sleep; zero otherwise.
	retryAt time.Time
}

func (r *roundTrip) run() (*http.Response, error) {
	req := r.req
	hasBody := req.Body != nil && req.Body != http.NoBody
	if hasBody && req.GetBody == nil && r.s.maxAttempts > 1 {
		r.body = newReplayBody(req.Body, req.ContentLength, r.s.maxBuffered)
		r.body.abortOn(req.Context())
		defer r.body.finish()
	}
	ctx := req.Context()
	//lint:ignore SA1019 net/http still honours the deprecated channel.
	if req.Cancel != nil {
		defer r.endWaits()
	}
	r.end = Unsent // until an attempt is sent
	var delay time.Duration
	for {
		if r.rounds > 0 {
			if err := r.timedWait(ctx, delay); err != nil {
				return r.refused(StopCanceled, err)
			}
			r.prev = delay
		}
		g, stop, err := r.gates(ctx)
		if stop != StopNone {
			return r.refused(stop, err)
		}
		r.rounds++
		r.kept, r.lastErr, r.heldOff = nil, nil, time.Time{}
		var o Outcome
		var class Class
		a := g.a
		if g.copies > 0 {
			o, class, a = r.race(ctx, g.req, a, r.sent+1, g.copies)
		} else {
			o, class = r.send(ctx, g.req, a, r.sent+1)
		}
		r.limited = r.report(r.turn, r.circuit, o, class)
		r.turn, r.circuit = nil, nil
		r.end = class
		if class == Success {
			if b := r.s.budget; b != nil {
				b.Success(r.paidFor())
			}
			return a.keepAlive(o.Response, r.s), nil
		}

		var fromServer bool
		delay, fromServer, stop = r.next(ctx, o, class)
		if stop != StopNone {
			if o.Err != nil {
				a.release()
				return nil, r.giveUp(o.Attempt, class, nil, o.Err, stop)
			}
			if b := r.s.budget; b != nil && class == Permanent {
				// An answer not worth retrying still shows a server able
				// to answer: the retry that reached it cost nothing, as
				// gRPC's retry throttling counts such an answer a success.
				b.Success(r.paidFor())
			}
			r.giveUp(o.Attempt, class, o.Response, nil, stop)
			return r.ended(a.keepAlive(o.Response, r.s), r.sent, stop), nil
		}
		if h := r.s.onRetry; h != nil {
			h(r.event(o.Attempt, class, o.Response, o.Err, delay, fromServer, StopNone))
		}
		r.discard(o)
		if r.s.beforeAttempt != nil {
			last := o // a copy: o itself stays on the stack
			r.last = &last
		}
		a.release()
	}
}

// paidFor returns the class of the outcome whose retry the Budget paid
// for, given back on an answer: Undecided for a first attempt, or a retry
// its Pacer turn paid for.
func (r *roundTrip) paidFor() Class {
	if r.free {
		return Undecided
	}
	return r.retried
}

// send sends the attempt areq through the base transport and returns its
// outcome and class.
func (r *roundTrip) send(ctx context.Context, areq *http.Request, a attempt, n int) (Outcome, Class) {
	var sent time.Time
	if r.timed {
		sent = r.s.now()
	}
	r.sent++
	r.tookOf = n
	resp, err := r.s.base.RoundTrip(areq)
	if r.timed {
		r.took = r.s.now().Sub(sent)
		r.recordLatency(r.took)
	}
	return r.outcome(ctx, areq, a, n, resp, err)
}

// outcome returns the outcome and class of what the base transport
// returned for attempt n, areq.
func (r *roundTrip) outcome(ctx context.Context, areq *http.Request, a attempt, n int, resp *http.Response, err error) (Outcome, Class) {
	o := Outcome{Request: areq, Response: resp, Err: err, Attempt: n, Wrote: a.trace.state()}
	if err == nil {
		o.Err = nil
	} else {
		o.Response = nil
		if resp != nil && resp.Body != nil {
			resp.Body.Close() // a RoundTripper that broke its contract
		}
		o.Err = a.cause(ctx, areq.Context(), err)
	}
	class := r.classify(o)
	if class != Success {
		if lerr := r.lengthMismatch(); lerr != nil {
			// The caller's body contradicts its ContentLength, which no
			// attempt will change: whatever the server or net/http made
			// of it, the call fails as the caller's error.
			class = Permanent
			if o.Err != nil {
				o.Err = fmt.Errorf("%w (%w)", lerr, o.Err)
			}
		}
	}
	return o, class
}

// lengthMismatch returns the error that says the caller's body, or a body
// its GetBody made, contradicted the request's ContentLength, or nil.
func (r *roundTrip) lengthMismatch() error {
	if r.body != nil {
		if err := r.body.mismatch(); err != nil {
			return err
		}
	}
	if r.lengths != nil {
		return r.lengths.mismatch()
	}
	return nil
}

// classify asks the Transport's classifier, then the default one.
// A classifier's answer that cannot be acted on safely is taken as
// Permanent: a success without a response (RoundTrip must return one or
// an error), a class this package does not know, or no answer at all.
func (r *roundTrip) classify(o Outcome) Class {
	class := Undecided
	if cl := r.s.classifier; cl != nil {
		class = cl(o)
	}
	if class == Undecided {
		class = DefaultClassifier(o)
	}
	switch {
	case class > Unsent || class == Undecided:
		return Permanent
	case class == Success && o.Response == nil:
		return Permanent
	}
	return class
}

// next decides whether a failed attempt is retried, and after what wait.
func (r *roundTrip) next(ctx context.Context, o Outcome, class Class) (delay time.Duration, fromServer bool, stop StopReason) {
	switch {
	case callerGone(r.req):
		return 0, false, StopCanceled
	case class == Permanent: // classify never answers Undecided
		return 0, false, StopPermanent
	case r.s.maxAttempts == 1:
		return 0, false, StopRetriesOff
	case class == Transient && !r.safe:
		return 0, false, StopUnsafe
	case r.sent >= r.s.maxAttempts:
		return 0, false, StopAttempts
	case r.body != nil && !r.body.replayable():
		return 0, false, StopBody
	}
	delay = r.s.backoff.Delay(r.rounds, r.prev, r.s.rand())
	delay = max(delay, 0)
	least := delay // the wait that must fit before the deadline
	now := r.s.now()
	if sw, ok := r.serverWait(o, now); ok {
		var u float64
		if r.s.serverJitter != nil {
			u = r.s.rand()
		}
		wait, ok := serverDelay(sw, r.s.maxRetryAfter, r.s.longWait, r.s.serverJitter, u)
		if !ok {
			r.retryAt = now.Add(sw)
			return 0, false, StopServerWait
		}
		if wait > delay {
			delay, fromServer = wait, true
		}
		least = max(least, min(sw, r.s.maxRetryAfter))
	}
	if dl, ok := ctx.Deadline(); ok && delay > dl.Sub(now) {
		if least > dl.Sub(now) {
			r.retryAt = now.Add(delay)
			return 0, false, StopDeadline
		}
		// Only ServerWaitJitter's spread reaches past the deadline: the
		// server's own wait fits, and the spread is cut to it.
		delay = dl.Sub(now)
	}
	charged := r.chargedAs(class)
	if r.budgetRefuses(charged) && !(r.limited && r.s.pacer != nil) {
		// Refused now, the retry would be refused after its wait too
		// (a throttled one may yet be paid for by its Pacer turn).
		r.retryAt = now.Add(delay)
		return 0, false, StopBudget
	}
	if r.body != nil && !r.body.retire() {
		// The last attempt's writer, which net/http lets run on, took the
		// body past MaxBufferedBody since the check above.
		return 0, false, StopBody
	}
	r.retried = charged
	return delay, fromServer, StopNone
}

// chargedAs returns the class the Budget charges a retry of an outcome
// of class c as: a throttle that refused no rate (a 503 that names no
// wait: a full queue, a balancer with no backend) says the server is
// overloaded, and its retry costs what a transient one does, not a
// throttle's lower price. r.limited must be c's outcome's.
func (r *roundTrip) chargedAs(c Class) Class {
	if c == Throttled && !r.limited {
		return Transient
	}
	return c
}

// serverWait returns the wait the server asked for before o's retry, and
// whether there is one: o's own (see copyWait), or, when a copy of the
// same attempt asked for longer (see holdOff), that copy's.
func (r *roundTrip) serverWait(o Outcome, now time.Time) (time.Duration, bool) {
	sw, ok := r.copyWait(o, now)
	if !r.heldOff.IsZero() {
		if d := max(r.heldOff.Sub(now), 0); !ok || d > sw {
			sw, ok = d, true
		}
	}
	return sw, ok
}

// copyWait returns the wait the server asked for in answer to o alone:
// the longer of its headers' (RFC 9110 §10.2.3: Retry-After says how long
// the client ought to wait; the backoff may choose longer, never shorter)
// and the WaitFloor's, and whether there is one.
func (r *roundTrip) copyWait(o Outcome, now time.Time) (time.Duration, bool) {
	var sw time.Duration
	ok := false
	if o.Response != nil {
		sw, ok = ServerWait(o.Response.Header, now, r.s.rateLimitReset)
	}
	if f := r.s.waitFloor; f != nil {
		if floor := f(o); floor > 0 && floor >= sw {
			sw, ok = floor, true
		}
	}
	return sw, ok
}

// discard disposes of the response of an outcome that is retried:
// drained and closed, so that its connection is reused, and, when a gate
// of the retry may refuse it (see gates), kept in memory, to be returned
// then; its error, when it has one, is kept too.
func (r *roundTrip) discard(o Outcome) {
	r.lastErr = o.Err
	switch {
	case o.Response == nil:
	case r.s.pacer != nil || r.s.breaker != nil || r.s.budget != nil:
		r.kept = r.s.keep(o.Response, drainLimit, drainTimeout)
	default:
		r.s.drain(o.Response.Body, drainLimit, drainTimeout)
	}
}

// giveUp reports a final failure to the OnGiveUp hook and, when it ended
// on an error, returns the error RoundTrip returns. n is the number of the
// attempt whose outcome the event reports, the last (with copies of
// hedged attempts, not always the last sent); 0 before the first.
func (r *roundTrip) giveUp(n int, class Class, resp *http.Response, err error, stop StopReason) error {
	r.end, r.reason = class, stop
	if h := r.s.onGiveUp; h != nil {
		h(r.event(n, class, resp, err, 0, false, stop))
	}
	if err == nil {
		return nil
	}
	return &Error{Attempts: r.sent, Reason: stop, Err: err, RetryAt: r.retryAt}
}

func (r *roundTrip) event(attempt int, class Class, resp *http.Response, err error, delay time.Duration, fromServer bool, stop StopReason) Event {
	e := Event{Request: r.req, Attempt: attempt, Class: class, Err: err, Delay: delay, FromServer: fromServer, Reason: stop}
	if attempt == r.tookOf {
		e.Duration = r.took
	}
	if resp != nil {
		e.StatusCode = resp.StatusCode
	}
	return e
}

// summary is what the OnDone hook is told of the call that returns resp
// and err.
func (r *roundTrip) summary(resp *http.Response, err error) Summary {
	s := Summary{Request: r.req, Attempts: r.sent, Hedges: r.hedged, HedgeWon: r.won, Wait: r.waited, Class: r.end, Reason: r.reason, Err: err, RetryAt: r.retryAt}
	if r.timed {
		s.Elapsed = r.s.now().Sub(r.start)
	}
	if resp != nil {
		s.StatusCode = resp.StatusCode
	}
	return s
}

func closeRequestBody(req *http.Request) {
	if req.Body != nil {
		req.Body.Close()
	}
}
