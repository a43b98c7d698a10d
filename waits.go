package retry

import (
	"context"
	"fmt"
	"time"
)

// The waits between attempts: slept on the Transport's clock, ended by the
// request's context or its deprecated Cancel channel.

// timedWait sleeps for d, the wait before a retry, adding the time
// waited to r.waited when a hook wants it. It returns early, with an
// error, when the wait's context is done (see waits).
func (r *roundTrip) timedWait(ctx context.Context, d time.Duration) error {
	ctx = r.waits(ctx)
	var start time.Time
	if r.timed {
		start = r.s.now()
	}
	err := r.s.sleep(ctx, d)
	if r.timed {
		r.waited += r.s.now().Sub(start)
	}
	return r.waitErr(ctx, err)
}

// errRequestCanceled is the error of a wait that the request's deprecated
// Cancel channel ended.
var errRequestCanceled = fmt.Errorf("retry: request canceled through Request.Cancel: %w", context.Canceled)

// waits returns the context a wait between attempts ends on: ctx, the
// request's, which also ends when the request's deprecated Cancel channel
// is closed, as net/http still honours it. The channel is watched only
// from the first wait of a request that has one (http.Client sets one when
// it has a Timeout), not on the way of a first attempt that succeeds.
func (r *roundTrip) waits(ctx context.Context) context.Context {
	//lint:ignore SA1019 net/http still honours the deprecated channel.
	cancelCh := r.req.Cancel
	if cancelCh == nil {
		return ctx
	}
	if r.waitCtx == nil {
		r.waitCtx, r.waitCancel = context.WithCancelCause(ctx)
		wctx, cancel := r.waitCtx, r.waitCancel
		go func() {
			select {
			case <-cancelCh:
				cancel(errRequestCanceled)
			case <-wctx.Done():
			}
		}()
	}
	return r.waitCtx
}

// endWaits ends the watch of the request's Cancel channel.
func (r *roundTrip) endWaits() {
	if r.waitCancel != nil {
		r.waitCancel(nil)
	}
}

// waitErr returns err, a wait's error, as the caller should see it: the
// Cancel channel's, when that ended the wait rather than the request's
// context.
func (r *roundTrip) waitErr(wctx context.Context, err error) error {
	if err != nil && wctx != r.req.Context() && r.req.Context().Err() == nil {
		return context.Cause(wctx)
	}
	return err
}
