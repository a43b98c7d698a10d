package retry

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"strconv"
	"time"
)

// attemptRequest builds the request of one attempt: a shallow clone of the
// caller's with its own context, body and, where needed, headers and trace.
// The attempt returned must be released unless its response is returned
// (see attempt.keepAlive).
func (r *roundTrip) attemptRequest(ctx context.Context, n int) (*http.Request, attempt, error) {
	req := r.req
	var a attempt
	ctx = context.WithValue(ctx, attemptKey{}, n)
	// An unsafe request without a body needs a context of its own for
	// the trace to end, should the base begin to send it again by itself:
	// net/http replays such a request without GetBody, and one with a body
	// only with GetBody, which its attempts do not carry.
	stoppable := !r.safe && (req.Body == nil || req.Body == http.NoBody)
	// A copy of a race is cancelled when another copy's answer wins.
	timeout := r.attemptTimeout(ctx, n)
	// A body that may stall needs a context to end its connection by.
	if timeout > 0 || stoppable || r.racing || r.s.stallTimeout > 0 {
		var cancel context.CancelCauseFunc
		ctx, cancel = context.WithCancelCause(ctx)
		a.cancel = cancel
		if timeout > 0 {
			// A timer rather than a deadline, so that it can be stopped
			// when the response is returned: the timeout bounds the
			// attempt, not the caller's reading of the body.
			a.timer = r.s.afterFunc(timeout, func() { cancel(ErrAttemptTimeout) })
		}
	}
	if !r.safe {
		// Only a request that is unsafe to replay needs to know whether
		// it was written, and to stop the base from sending it again on
		// its own: an idempotent one is retried either way.
		a.trace = newWriteTrace(a.cancel)
		ctx = httptrace.WithClientTrace(ctx, &a.trace.hooks)
	}
	areq := req.WithContext(ctx)
	if !r.safe {
		// net/http's HTTP/2 code replays a request it can rewind after a
		// PROTOCOL_ERROR reset, which the server may have processed.
		// Without GetBody, an unsafe request with a body is sent by this
		// package's rules alone; one without a body, which net/http
		// replays without GetBody, is stopped by the trace.
		areq.GetBody = nil
	}
	if r.s.attemptHeader != "" || r.s.beforeAttempt != nil {
		// A header of the attempt's own: the caller's request is never
		// changed.
		areq.Header = req.Header.Clone()
		if areq.Header == nil {
			areq.Header = make(http.Header)
		}
	}
	if r.s.attemptHeader != "" {
		areq.Header.Set(r.s.attemptHeader, strconv.Itoa(n))
	}
	switch {
	case r.body != nil:
		body, err := r.body.reader(true)
		if err != nil {
			a.release()
			return nil, a, err
		}
		areq.Body, areq.GetBody = body, nil
		if r.safe {
			areq.GetBody = r.body.getBody
		}
	case req.GetBody == nil || req.Body == nil || req.Body == http.NoBody:
	case n > 1:
		body, err := req.GetBody()
		if err != nil {
			a.release()
			return nil, a, fmt.Errorf("retry: GetBody: %w", err)
		}
		areq.Body = r.checkLength(body)
	default:
		if _, known := knownLength(req.Body); !known {
			// An in-memory body was checked before the first attempt;
			// another (a file, a reader of the caller's with a GetBody
			// of its own) only as it is read.
			areq.Body = r.checkLength(req.Body)
		}
	}
	return areq, a, nil
}

// attemptTimeout returns how long attempt n may wait for its response
// (0: until ctx ends): AttemptTimeout, and, when a retry could follow it
// (the request is replay-safe, attempts are left and the budget affords
// a retry), at most half the time left before ctx's deadline, so that
// the retry has the other half. A timeout that takes the whole time left
// cuts an attempt short only to leave its retry no time.
func (r *roundTrip) attemptTimeout(ctx context.Context, n int) time.Duration {
	d := r.s.attemptTimeout
	if d <= 0 || !r.safe || n >= r.s.maxAttempts || r.budgetRefuses(Transient) {
		return d
	}
	if dl, ok := ctx.Deadline(); ok {
		if half := dl.Sub(r.s.now()) / 2; half > 0 {
			d = min(d, half)
		}
	}
	return d
}

// checkLength returns body counted against the request's ContentLength,
// when it declares one.
func (r *roundTrip) checkLength(body io.ReadCloser) io.ReadCloser {
	if r.req.ContentLength <= 0 {
		return body
	}
	if r.lengths == nil {
		r.lengths = &lengthCheck{declared: r.req.ContentLength}
	}
	return r.lengths.wrap(body)
}

// attempt holds what one attempt needs released: its context's cancel and
// timeout, and its write trace. All are nil when the attempt has no
// timeout and is safe to replay.
type attempt struct {
	cancel context.CancelCauseFunc
	timer  timer
	trace  *writeTrace
}

// release ends the attempt's context and timer.
func (a attempt) release() {
	a.timer.stop()
	if a.cancel != nil {
		a.cancel(errAttemptDone)
	}
}

// cancelAs ends the attempt's context, with cause as its cause. The
// attempt must have a context of its own.
func (a attempt) cancelAs(cause error) { a.cancel(cause) }

// errAttemptDone is the cause of an attempt's context once the Transport
// is done with the attempt.
var errAttemptDone = errors.New("retry: attempt done")

// cause returns the error an attempt's base transport returned, or, when
// the attempt's own context (not the caller's) ended it, that context's
// cause: net/http returns the cause over HTTP/1.1 but the bare
// context.Canceled or DeadlineExceeded over HTTP/2, and an attempt's error
// should not depend on the protocol.
func (a attempt) cause(parent, actx context.Context, err error) error {
	if a.cancel == nil || actx.Err() == nil || parent.Err() != nil {
		return err
	}
	if cause := context.Cause(actx); !errors.Is(err, cause) {
		return cause
	}
	return err
}

// keepAlive returns resp. The attempt's timeout stops here: it bounded the
// wait for the response, not the caller's reading of it. Its context is
// released when the body is closed rather than now, so the caller can still
// read the body.
func (a attempt) keepAlive(resp *http.Response, s *settings) *http.Response {
	a.timer.stop()
	if a.cancel == nil {
		return resp
	}
	if resp == nil || resp.Body == nil || resp.Body == http.NoBody {
		a.release()
		return resp
	}
	body := &cancelOnClose{ReadCloser: resp.Body, cancel: a.cancel}
	if w, ok := resp.Body.(io.Writer); ok {
		// The connection of a 101 Switching Protocols answer, which the
		// caller writes to as well.
		resp.Body = &cancelOnCloseWriter{cancelOnClose: body, w: w}
		return resp
	}
	resp.Body = body
	if s.stallTimeout > 0 {
		resp.Body = newStallBody(body, s, a.cancel)
	}
	return resp
}

// cancelOnClose releases an attempt's context when its body is closed.
type cancelOnClose struct {
	io.ReadCloser
	cancel context.CancelCauseFunc
}

func (b *cancelOnClose) Close() error {
	err := b.ReadCloser.Close()
	b.cancel(errAttemptDone)
	return err
}

// cancelOnCloseWriter is cancelOnClose for a body that can be written to.
type cancelOnCloseWriter struct {
	*cancelOnClose
	w io.Writer
}

func (b *cancelOnCloseWriter) Write(p []byte) (int, error) { return b.w.Write(p) }
