package retry

import (
	"context"
	"errors"
	"net/http"
	"time"
)

// The race of an attempt and its copies (see [Hedge]): every copy runs on
// a goroutine of its own, and the goroutine of RoundTrip collects their
// answers, sends each copy when it is due and cancels the losers. No
// goroutine of the race outlives it: each loser is waited for.

// errHedgeLost is the cause of the context of a copy cancelled because
// another copy's answer was returned.
var errHedgeLost = errors.New("retry: attempt cancelled: another copy of it answered first")

// errHedgeUnready is why no copy is sent of an attempt whose body cannot
// be replayed whole.
var errHedgeUnready = errors.New("retry: request body cannot be replayed for a copy")

// errHedgeBudget is why no copy is sent when the Budget refuses it.
var errHedgeBudget = errors.New("retry: retry budget refuses a copy")

// copyOf is one attempt of a race, with its turns.
type copyOf struct {
	req     *http.Request
	a       attempt
	n       int  // its attempt number
	hedge   bool // a copy sent beside the first attempt of the race
	turn    Turn // the Pacer's; nil without a Pacer
	circuit Turn // the Breaker's; nil without a Breaker
}

// answer is what the base transport made of one copy.
type answer struct {
	c    *copyOf
	resp *http.Response
	err  error
	took time.Duration
}

// due is the permission to send the next copy: its turns, or why none
// is sent.
type due struct {
	turn, circuit Turn
	err           error
}

func (d due) abandon() {
	if d.turn != nil {
		d.turn.Abandon()
	}
	if d.circuit != nil {
		d.circuit.Abandon()
	}
}

// race sends areq, attempt n, and up to copies copies of it, each when
// the ones before have gone unanswered for the hedge delay. It returns the
// outcome the call goes on with: the first answer not worth retrying, or,
// when every copy failed, the last to fail; and the attempt to keep or
// release with it. That outcome's turns are left in r.turn and r.circuit,
// as send leaves them; every other copy's are reported here.
func (r *roundTrip) race(ctx context.Context, areq *http.Request, a attempt, n, copies int) (Outcome, Class, attempt) {
	delay := r.hedgeDelay()
	answers := make(chan answer, copies+1)
	first := &copyOf{req: areq, a: a, n: n, turn: r.turn, circuit: r.circuit}
	r.turn, r.circuit = nil, nil
	r.launch(first, answers)
	flying := map[*copyOf]bool{first: true}

	var next <-chan due
	var stop func()
	schedule := func() { next, stop = r.schedule(ctx, delay) }
	schedule()
	defer func() {
		if stop != nil {
			stop()
		}
	}()

	var failed *answer // the last copy to fail, while others fly
	var o Outcome
	var class Class
	for {
		select {
		case d := <-next:
			next = nil
			if c := r.hedge(ctx, d, delay); c != nil {
				r.launch(c, answers)
				flying[c] = true
				if copies--; copies > 0 {
					stop()
					schedule()
				}
			}
			continue
		case ans := <-answers:
			delete(flying, ans.c)
			r.recordLatency(ans.took)
			o, class = r.outcome(ctx, ans.c.req, ans.c.a, ans.c.n, ans.resp, ans.err)
			if retryable(class) && len(flying) > 0 {
				// Overtaken by the copies still in flight: its turns learn
				// of it now, and it is the outcome the call goes on with
				// only if every other copy fails too.
				if failed != nil {
					r.dispose(failed)
				}
				r.holdOff(o)
				r.report(ans.c.turn, ans.c.circuit, o, class)
				ans.c.turn, ans.c.circuit = nil, nil
				ans.resp = o.Response
				failed = &ans
				if class == Throttled && copies > 0 {
					// The server says it is overloaded: no further copy
					// adds to its load, and the ones in flight carry on.
					stop()
					next, copies = nil, 0
				}
				continue
			}
			if failed != nil {
				r.dispose(failed)
			}
			r.took, r.tookOf = ans.took, ans.c.n
			r.turn, r.circuit = ans.c.turn, ans.c.circuit
			if r.won = ans.c.hedge; r.won {
				// The Budget gives back what the copy cost, not the
				// first attempt's retry, when the copy's answer is the
				// one the call goes on with.
				r.retried = Transient
			}
			r.cancelLosers(flying, answers)
			return o, class, ans.c.a
		}
	}
}

// holdOff notes the server's wait of o, a failed copy overtaken by the
// copies still in flight: the retry after the race waits for the longest
// of its copies' server waits, not only for the last copy's (see next).
func (r *roundTrip) holdOff(o Outcome) {
	now := r.s.now()
	if sw, ok := r.copyWait(o, now); ok {
		if until := now.Add(sw); until.After(r.heldOff) {
			r.heldOff = until
		}
	}
}

// retryable reports whether an answer of class c leaves the race open.
func retryable(c Class) bool { return c != Success && c != Permanent }

// launch hands c to the base transport on a goroutine of its own.
func (r *roundTrip) launch(c *copyOf, answers chan<- answer) {
	r.sent++
	if c.hedge {
		r.hedged++
	}
	s := r.s // not r, which would then escape to the heap on every call
	start := s.now()
	go func() {
		resp, err := s.base.RoundTrip(c.req)
		answers <- answer{c: c, resp: resp, err: err, took: s.now().Sub(start)}
	}()
}

// schedule starts the wait for the next copy: the hedge delay, then the
// Pacer's turn, the Breaker's and the Budget's, delivered on the channel.
// stop ends the wait, gives back what it took unused, and returns once
// its goroutine has.
func (r *roundTrip) schedule(ctx context.Context, delay time.Duration) (<-chan due, func()) {
	ctx, cancel := context.WithCancel(ctx)
	ch := make(chan due, 1)
	done := make(chan struct{})
	s, req, body := r.s, r.req, r.body // not r, which would escape
	go func() {
		defer close(done)
		ch <- hedgeTurns(ctx, s, req, body, delay)
	}()
	return ch, func() {
		cancel()
		<-done
		select {
		case d := <-ch:
			d.abandon()
		default:
		}
	}
}

// hedgeTurns waits delay, then takes the turns a copy of req needs under
// settings s, the Pacer's and the Breaker's; the Budget is asked last, by
// hedge (see gates). body is the call's replayBody, nil when it has none.
func hedgeTurns(ctx context.Context, s *settings, req *http.Request, body *replayBody, delay time.Duration) due {
	if err := s.sleep(ctx, delay); err != nil {
		return due{err: err}
	}
	if body != nil {
		// The copy replays what the first attempt has sent; a copy that
		// read the caller's body beside it would race it for the bytes.
		if err := body.awaitComplete(ctx); err != nil {
			return due{err: err}
		}
	}
	var d due
	var err error
	if p := s.pacer; p != nil {
		if d.turn, err = p.Wait(ctx, req); err != nil {
			return due{err: err}
		}
	}
	if b := s.breaker; b != nil {
		if d.circuit, err = b.Allow(req); err != nil {
			d.abandon()
			return due{err: err}
		}
	}
	if err := ctx.Err(); err != nil {
		d.abandon()
		return due{err: err}
	}
	return d
}

// hedge makes the copy that d permits, or returns nil, giving d's turns
// back, when none can be sent.
func (r *roundTrip) hedge(ctx context.Context, d due, delay time.Duration) *copyOf {
	if d.err != nil {
		return nil
	}
	n := r.sent + 1
	areq, a, err := r.attemptRequest(ctx, n)
	if err == nil {
		err = r.prepare(areq, n)
		if b := r.s.budget; err == nil && b != nil && !b.AllowRetry(Transient) {
			err = errHedgeBudget
		}
		if err != nil {
			closeRequestBody(areq)
			a.release()
		}
	}
	if err != nil {
		d.abandon() // the copy is not sent; the race goes on without it
		return nil
	}
	if h := r.s.onHedge; h != nil {
		h(Event{Request: r.req, Attempt: n, Delay: delay})
	}
	return &copyOf{req: areq, a: a, n: n, hedge: true, turn: d.turn, circuit: d.circuit}
}

// dispose drains and closes the response of a failed copy that is not the
// outcome the call goes on with, and releases its attempt.
func (r *roundTrip) dispose(ans *answer) {
	if ans.resp != nil {
		r.s.drain(ans.resp.Body, drainLimit, drainTimeout)
	}
	ans.c.a.release()
}

// cancelLosers cancels the copies still in flight and waits for each: its
// response, if it got one, is drained and closed, and its turns are told
// the outcome is unknown (Undecided): it was sent, but its answer was not
// waited for. Neither a Pacer nor a Breaker learns anything from it.
func (r *roundTrip) cancelLosers(flying map[*copyOf]bool, answers <-chan answer) {
	for c := range flying {
		c.a.cancelAs(errHedgeLost)
	}
	for range len(flying) {
		ans := <-answers
		// How long it ran before it was cancelled: a bound below its
		// latency, which keeps the slow answers hedging cut short in the
		// percentile the next delays are taken from.
		r.recordLatency(ans.took)
		if ans.resp != nil && ans.resp.Body != nil {
			r.s.drain(ans.resp.Body, drainLimit, drainTimeout)
		}
		ans.c.a.release()
		f := Feedback{Class: Undecided}
		if ans.c.turn != nil {
			ans.c.turn.Done(f)
		}
		if ans.c.circuit != nil {
			ans.c.circuit.Done(f)
		}
	}
}
