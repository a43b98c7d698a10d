package retry

import (
	"context"
	"io"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/backoff-jitter/retry/retrytest"
)

// roundTripAsync sends req through rt in a goroutine, the body read
// whole; the channel gives the status and body, or the error.
func roundTripAsync(t *testing.T, rt http.RoundTripper, req *http.Request) <-chan string {
	t.Helper()
	out := make(chan string, 1)
	go func() {
		resp, err := rt.RoundTrip(req)
		if err != nil {
			out <- err.Error()
			return
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			out <- err.Error()
			return
		}
		out <- resp.Status + " " + string(b)
	}()
	return out
}

// awaitTimers waits, bounded, until clk has n timers pending.
func awaitTimers(t *testing.T, clk *retrytest.Clock, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, clk.AwaitTimers(ctx, n), "no timer was set")
}

// A Transport whose Clock is a TimerClock times its attempts on it: an
// attempt that hangs ends when the test advances the clock past
// AttemptTimeout (an hour), and not before, and the retry answers. Over
// every protocol, with no real wait.
func TestAttemptTimeoutOnTheClock(t *testing.T) {
	forEachProto(t, func(t *testing.T, p proto) {
		var hits atomic.Int32
		arrived := make(chan struct{})
		srv := p.server(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if hits.Add(1) == 1 {
				close(arrived)
				<-r.Context().Done() // hangs until the attempt ends
				return
			}
			io.WriteString(w, "ok")
		}))
		clk := retrytest.NewClock(time.Now())
		rt := New(p.base(t, srv), WithClock(clk), WithRandom(func() float64 { return 0.5 }),
			WithAttemptTimeout(time.Hour))
		defer rt.CloseIdleConnections()
		got := roundTripAsync(t, rt, mustRequest(t, "GET", srv.URL, nil))
		<-arrived
		awaitTimers(t, clk, 1) // set before the attempt was sent
		clk.Advance(time.Hour - time.Millisecond)
		select {
		case s := <-got:
			t.Fatalf("the call ended before its attempt's timeout: %s", s)
		default:
		}
		clk.Advance(time.Millisecond)
		assert.Equal(t, "200 OK ok", <-got)
		assert.EqualValues(t, 2, hits.Load())
		assert.Equal(t, []time.Duration{50 * time.Millisecond}, clk.Waits(), "the backoff, on the same clock")
	})
}

// An attempt that a retry could follow waits at most half the time left
// before the deadline, so that the retry has the other half: under an
// hour's deadline, an attempt timeout of 50 minutes cuts the first
// attempt at 30, not before, and the retry answers. The last attempt
// waits the whole timeout.
func TestAttemptTimeoutLeavesRoomForARetry(t *testing.T) {
	forEachProto(t, func(t *testing.T, p proto) {
		var hits atomic.Int32
		arrived := make(chan struct{}, 2)
		srv := p.server(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get("X-Answer") == "" || hits.Add(1) == 1 {
				arrived <- struct{}{}
				<-r.Context().Done() // hangs until the attempt ends
				return
			}
			io.WriteString(w, "ok")
		}))
		for _, c := range []struct {
			name     string
			attempts int
			answer   bool
			cut      time.Duration
			want     string
		}{
			{"a retry can follow", 3, true, 30 * time.Minute, "200 OK ok"},
			{"the last attempt", 1, false, 50 * time.Minute, ErrAttemptTimeout.Error()},
		} {
			clk := retrytest.NewClock(time.Now())
			rt := New(p.base(t, srv), WithClock(clk), WithRandom(func() float64 { return 0.5 }),
				WithAttemptTimeout(50*time.Minute), WithMaxAttempts(c.attempts))
			ctx, cancel := context.WithDeadline(context.Background(), clk.Now().Add(time.Hour))
			req := mustRequest(t, "GET", srv.URL, nil).WithContext(ctx)
			if c.answer {
				req.Header.Set("X-Answer", "yes")
			}
			got := roundTripAsync(t, rt, req)
			<-arrived
			awaitTimers(t, clk, 1)
			clk.Advance(c.cut - time.Millisecond)
			select {
			case s := <-got:
				cancel()
				t.Fatalf("%s: the call ended before its attempt's timeout: %s", c.name, s)
			default:
			}
			clk.Advance(time.Millisecond)
			select {
			case s := <-got:
				assert.Contains(t, s, c.want, c.name)
			case <-time.After(10 * time.Second):
				cancel() // ends the hanging attempt, and its handler
				t.Fatalf("%s: the call did not end when the clock passed %v", c.name, c.cut)
			}
			cancel()
			rt.CloseIdleConnections()
		}
	})
}

// The bound on draining a discarded answer's body runs on a TimerClock
// too: a 503 whose body stalls is closed when the clock passes the bound,
// and the retry answers.
func TestDrainBoundOnTheClock(t *testing.T) {
	forEachProto(t, func(t *testing.T, p proto) {
		var hits atomic.Int32
		done := make(chan struct{})
		srv := p.server(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if hits.Add(1) > 1 {
				io.WriteString(w, "ok")
				return
			}
			w.Header().Set("Content-Length", "100")
			w.WriteHeader(http.StatusServiceUnavailable)
			io.WriteString(w, "partial")
			w.(http.Flusher).Flush()
			select { // stalls
			case <-done:
			case <-r.Context().Done():
			}
		}))
		defer close(done)
		clk := retrytest.NewClock(time.Now())
		rt := New(p.base(t, srv), WithClock(clk), WithRandom(func() float64 { return 0.5 }))
		defer rt.CloseIdleConnections()
		got := roundTripAsync(t, rt, mustRequest(t, "GET", srv.URL, nil))
		awaitTimers(t, clk, 1)
		clk.Advance(drainTimeout)
		assert.Equal(t, "200 OK ok", <-got)
		assert.EqualValues(t, 2, hits.Load())
	})
}
