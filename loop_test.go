package retry

import (
	"bytes"
	"context"
	"errors"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestRetryAfter(t *testing.T) {
	forEachProto(t, func(t *testing.T, p proto) {
		t.Run("floor over backoff", func(t *testing.T) {
			s := newScriptOver(t, p, status(503, "Retry-After", "3"), status(200))
			var events []Event
			rt, clock := testTransport(s.base, WithOnRetry(func(e Event) { events = append(events, e) }))
			defer rt.CloseIdleConnections()
			resp, _, err := do(t, rt, mustRequest(t, "GET", s.srv.URL, nil))
			require.NoError(t, err)
			assert.Equal(t, 200, resp.StatusCode)
			assert.Equal(t, []time.Duration{3 * time.Second}, clock.Waits())
			require.Len(t, events, 1)
			assert.True(t, events[0].FromServer)
			assert.Equal(t, 503, events[0].StatusCode)
			assert.Equal(t, Throttled, events[0].Class)
		})
		t.Run("backoff longer than server", func(t *testing.T) {
			s := newScriptOver(t, p, status(429, "Retry-After", "1"), status(200))
			rt, clock := testTransport(s.base, WithBackoff(Constant{Base: 2 * time.Second}))
			defer rt.CloseIdleConnections()
			_, _, err := do(t, rt, mustRequest(t, "GET", s.srv.URL, nil))
			require.NoError(t, err)
			assert.Equal(t, []time.Duration{2 * time.Second}, clock.Waits())
		})
		t.Run("http date", func(t *testing.T) {
			date := time.Now().Add(90 * time.Second).UTC().Format(http.TimeFormat)
			s := newScriptOver(t, p, status(503, "Retry-After", date), status(200))
			rt, clock := testTransport(s.base)
			_, _, err := do(t, rt, mustRequest(t, "GET", s.srv.URL, nil))
			require.NoError(t, err)
			w := clock.Waits()
			require.Len(t, w, 1)
			// The date has whole seconds: the wait is within a second of 90s.
			assert.InDelta(t, 90*time.Second, w[0], float64(time.Second))
		})
		t.Run("longer than MaxRetryAfter is returned at once", func(t *testing.T) {
			for _, v := range []string{"301", "86400", "99999999999999999999999"} {
				s := newScriptOver(t, p, status(503, "Retry-After", v), status(200))
				var gaveUp Event
				rt, clock := testTransport(s.base, WithOnGiveUp(func(e Event) { gaveUp = e }))
				resp, _, err := do(t, rt, mustRequest(t, "GET", s.srv.URL, nil))
				rt.CloseIdleConnections()
				require.NoError(t, err)
				assert.Equal(t, 503, resp.StatusCode, "Retry-After %s", v)
				assert.Empty(t, clock.Waits())
				assert.Len(t, s.requests(), 1)
				assert.Equal(t, StopServerWait, gaveUp.Reason)
			}
		})
		t.Run("malformed values are ignored", func(t *testing.T) {
			for _, v := range []string{"-5", "1.5", "soon", "0x10", ""} {
				s := newScriptOver(t, p, status(503, "Retry-After", v), status(200))
				rt, clock := testTransport(s.base)
				_, _, err := do(t, rt, mustRequest(t, "GET", s.srv.URL, nil))
				rt.CloseIdleConnections()
				require.NoError(t, err)
				assert.Equal(t, []time.Duration{50 * time.Millisecond}, clock.Waits(), "Retry-After %q", v)
			}
		})
	})
}

func TestDeadline(t *testing.T) {
	forEachProto(t, func(t *testing.T, p proto) {
		t.Run("backoff past deadline", func(t *testing.T) {
			s := newScriptOver(t, p, status(503), status(200))
			var gaveUp Event
			rt, clock := testTransport(s.base, WithBackoff(Constant{Base: time.Hour}), WithOnGiveUp(func(e Event) { gaveUp = e }))
			defer rt.CloseIdleConnections()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
			defer cancel()
			resp, _, err := do(t, rt, mustRequest(t, "GET", s.srv.URL, nil).WithContext(ctx))
			require.NoError(t, err)
			assert.Equal(t, 503, resp.StatusCode)
			assert.Empty(t, clock.Waits())
			assert.Equal(t, StopDeadline, gaveUp.Reason)
		})
		t.Run("server wait past deadline", func(t *testing.T) {
			s := newScriptOver(t, p, status(429, "Retry-After", "120"), status(200))
			rt, clock := testTransport(s.base)
			defer rt.CloseIdleConnections()
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			resp, _, err := do(t, rt, mustRequest(t, "GET", s.srv.URL, nil).WithContext(ctx))
			require.NoError(t, err)
			assert.Equal(t, 429, resp.StatusCode)
			assert.Empty(t, clock.Waits())
		})
		t.Run("error past deadline", func(t *testing.T) {
			addr := closedAddr(t)
			rt, _ := testTransport(nil, WithBackoff(Constant{Base: time.Hour}))
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			_, err := rt.RoundTrip(mustRequest(t, "GET", "http://"+addr, nil).WithContext(ctx))
			var re *Error
			require.ErrorAs(t, err, &re)
			assert.Equal(t, StopDeadline, re.Reason)
			assert.Equal(t, 1, re.Attempts)
		})
	})
}

func TestCancelDuringWait(t *testing.T) {
	forEachProto(t, func(t *testing.T, p proto) {
		s := newScriptOver(t, p, status(503))
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		// The real sleep: the hook cancels before the hour-long wait starts,
		// so the wait ends at once with the context's error.
		rt := New(s.base, WithBackoff(Constant{Base: time.Hour}), WithOnRetry(func(Event) { cancel() }))
		defer rt.CloseIdleConnections()
		start := time.Now()
		_, err := rt.RoundTrip(mustRequest(t, "GET", s.srv.URL, nil).WithContext(ctx))
		require.Error(t, err)
		assert.ErrorIs(t, err, context.Canceled)
		var re *Error
		require.ErrorAs(t, err, &re)
		assert.Equal(t, StopCanceled, re.Reason)
		assert.Less(t, time.Since(start), time.Minute)
		assert.Len(t, s.requests(), 1)
	})
}

func TestErrorsWrapTheLastError(t *testing.T) {
	addr := closedAddr(t)
	var retries []Event
	rt, clock := testTransport(nil, WithMaxAttempts(3), WithOnRetry(func(e Event) { retries = append(retries, e) }))
	client := &http.Client{Transport: rt}
	// A POST is retried too: a refused dial sent nothing.
	_, err := client.Post("http://"+addr+"/x", "text/plain", strings.NewReader("body"))
	require.Error(t, err)
	var re *Error
	require.ErrorAs(t, err, &re)
	assert.Equal(t, 3, re.Attempts)
	assert.Equal(t, StopAttempts, re.Reason)
	var op *net.OpError
	assert.ErrorAs(t, err, &op, "errors.As must reach the dial error through *url.Error and *Error")
	assert.Contains(t, err.Error(), "3 attempts")
	assert.Len(t, clock.Waits(), 2)
	require.Len(t, retries, 2)
	assert.Equal(t, Unsent, retries[0].Class)
}

// Endless error bodies are drained only up to the limit, then closed.
func TestEndlessErrorBody(t *testing.T) {
	forEachProto(t, func(t *testing.T, p proto) {
		done := make(chan struct{})
		defer close(done)
		var attempts atomic.Int32
		srv := p.server(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if attempts.Add(1) == 3 {
				w.WriteHeader(200)
				return
			}
			w.WriteHeader(503)
			chunk := bytes.Repeat([]byte("e"), 32<<10)
			for i := 0; i < 1<<15; i++ { // bounded: at most 1 GiB
				select {
				case <-done:
					return
				case <-r.Context().Done():
					return
				default:
				}
				if _, err := w.Write(chunk); err != nil {
					return
				}
			}
		}))
		rt, _ := testTransport(p.base(t, srv))
		defer rt.CloseIdleConnections()
		resp, _, err := do(t, rt, mustRequest(t, "GET", srv.URL, nil))
		require.NoError(t, err)
		assert.Equal(t, 200, resp.StatusCode)
		assert.EqualValues(t, 3, attempts.Load())
	})
}

func TestEndlessThrottlingStopsAtMaxAttempts(t *testing.T) {
	forEachProto(t, func(t *testing.T, p proto) {
		s := newScriptOver(t, p, status(503, "Retry-After", "1"))
		var gaveUp Event
		rt, clock := testTransport(s.base, WithMaxAttempts(6), WithOnGiveUp(func(e Event) { gaveUp = e }))
		defer rt.CloseIdleConnections()
		resp, body, err := do(t, rt, mustRequest(t, "GET", s.srv.URL, nil))
		require.NoError(t, err)
		assert.Equal(t, 503, resp.StatusCode)
		assert.Equal(t, "status 503", body, "the last response is returned unread")
		assert.Len(t, s.requests(), 6)
		assert.Len(t, clock.Waits(), 5)
		assert.Equal(t, StopAttempts, gaveUp.Reason)
		assert.Equal(t, 6, gaveUp.Attempt)
	})
}

func TestPrevIsTheWaitSlept(t *testing.T) {
	forEachProto(t, func(t *testing.T, p proto) {
		s := newScriptOver(t, p, status(503, "Retry-After", "2"), status(503), status(200))
		var prevs []time.Duration
		b := BackoffFunc(func(n int, prev time.Duration, u float64) time.Duration {
			prevs = append(prevs, prev)
			return time.Second
		})
		rt, clock := testTransport(s.base, WithBackoff(b))
		defer rt.CloseIdleConnections()
		_, _, err := do(t, rt, mustRequest(t, "GET", s.srv.URL, nil))
		require.NoError(t, err)
		assert.Equal(t, []time.Duration{0, 2 * time.Second}, prevs)
		assert.Equal(t, []time.Duration{2 * time.Second, time.Second}, clock.Waits())
	})
}

type fakeBudget struct{ allow bool }

func (b *fakeBudget) AllowRetry(Class) bool { return b.allow }

func (b *fakeBudget) Success(Class) {}

func TestBudgetRefusal(t *testing.T) {
	forEachProto(t, func(t *testing.T, p proto) {
		s := newScriptOver(t, p, status(503))
		var gaveUp Event
		rt, _ := testTransport(s.base, WithBudget(&fakeBudget{}), WithOnGiveUp(func(e Event) { gaveUp = e }))
		defer rt.CloseIdleConnections()
		resp, _, err := do(t, rt, mustRequest(t, "GET", s.srv.URL, nil))
		require.NoError(t, err)
		assert.Equal(t, 503, resp.StatusCode)
		assert.Len(t, s.requests(), 1)
		assert.Equal(t, StopBudget, gaveUp.Reason)
	})
}

// OnDone sees every call once, successes included, with its attempts,
// waits, time and end.
func TestOnDone(t *testing.T) {
	forEachProto(t, func(t *testing.T, p proto) {
		var s *script
		s = newScriptOver(t, p, func(w http.ResponseWriter, r *http.Request) {
			switch r.URL.Path {
			case "/ok":
				status(200)(w, r)
			case "/missing":
				status(404)(w, r)
			case "/busy":
				// 503, 429, then 200, counting this path's requests.
				n := 0
				for _, seen := range s.requests() {
					if seen.header.Get("X-Path") == "busy" {
						n++
					}
				}
				status([]int{503, 429, 200}[min(n-1, 2)])(w, r)
			}
		})
		var done []Summary
		rt, _ := testTransport(s.base, WithOnDone(func(sm Summary) { done = append(done, sm) }))
		get := func(path string) {
			req := mustRequest(t, "GET", s.srv.URL+path, nil)
			req.Header.Set("X-Path", strings.TrimPrefix(path, "/"))
			_, _, err := do(t, rt, req)
			require.NoError(t, err)
		}
		get("/ok")
		get("/busy")
		get("/missing")
		require.Len(t, done, 3)
		assert.Equal(t, Summary{Request: done[0].Request, Attempts: 1, Class: Success, StatusCode: 200}, done[0])
		// Exponential{100ms, 20s, FullJitter} with u = 0.5: 50ms, then 100ms,
		// on the fake clock, which moves only when the Transport sleeps.
		busy := done[1]
		assert.Equal(t, 3, busy.Attempts)
		assert.Equal(t, 150*time.Millisecond, busy.Wait)
		assert.Equal(t, 150*time.Millisecond, busy.Elapsed)
		assert.Equal(t, Success, busy.Class)
		assert.Equal(t, StopNone, busy.Reason)
		missing := done[2]
		assert.Equal(t, 1, missing.Attempts)
		assert.Equal(t, Permanent, missing.Class)
		assert.Equal(t, StopPermanent, missing.Reason)
		assert.False(t, missing.Reason.GaveUp())
		assert.Equal(t, 404, missing.StatusCode)
	})
	t.Run("errors", func(t *testing.T) {
		var done []Summary
		rt, _ := testTransport(nil, WithMaxAttempts(3), WithOnDone(func(sm Summary) { done = append(done, sm) }))
		_, err := rt.RoundTrip(mustRequest(t, "GET", "http://"+closedAddr(t), nil))
		require.Error(t, err)
		require.Len(t, done, 1)
		assert.Equal(t, 3, done[0].Attempts)
		assert.Equal(t, Unsent, done[0].Class)
		assert.Equal(t, StopAttempts, done[0].Reason)
		assert.Equal(t, err, done[0].Err)
		assert.Zero(t, done[0].StatusCode)

		// Nothing sent: a body that contradicts its length.
		req := mustRequest(t, "PUT", "http://"+closedAddr(t), strings.NewReader("12345"))
		req.ContentLength = 3
		_, err = rt.RoundTrip(req)
		require.Error(t, err)
		require.Len(t, done, 2)
		assert.Zero(t, done[1].Attempts)
		assert.Equal(t, StopPermanent, done[1].Reason)
		assert.Equal(t, err, done[1].Err)
	})
}

// Event.Duration is the time an attempt took, on the Transport's clock.
func TestEventDuration(t *testing.T) {
	var clock *fakeClock
	calls := 0
	base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		calls++
		clock.Advance(30 * time.Millisecond) // the attempt takes 30ms
		code := 503
		if calls == 2 {
			code = 404
		}
		return &http.Response{StatusCode: code, Body: http.NoBody, Request: r}, nil
	})
	var events []Event
	hook := func(e Event) { events = append(events, e) }
	rt, c := testTransport(base, WithOnRetry(hook), WithOnGiveUp(hook))
	clock = c
	resp, err := rt.RoundTrip(mustRequest(t, "GET", "http://127.0.0.1/", nil))
	require.NoError(t, err)
	assert.Equal(t, 404, resp.StatusCode)
	require.Len(t, events, 2)
	assert.Equal(t, 30*time.Millisecond, events[0].Duration)
	assert.Equal(t, 30*time.Millisecond, events[1].Duration)
}

// With retries off, a failed outcome stops with a reason of its own, which
// is no give-up: give-up counters do not count calls that opted out.
func TestRetriesOff(t *testing.T) {
	s := newScript(t, status(503))
	for _, perRequest := range []bool{false, true} {
		var gaveUp Event
		var done Summary
		opts := []Option{WithOnGiveUp(func(e Event) { gaveUp = e }), WithOnDone(func(s Summary) { done = s })}
		ctx := context.Background()
		if perRequest {
			ctx = ContextWithOptions(ctx, WithMaxAttempts(1))
		} else {
			opts = append(opts, WithMaxAttempts(1))
		}
		rt, _ := testTransport(s.base, opts...)
		resp, _, err := do(t, rt, mustRequest(t, "GET", s.srv.URL, nil).WithContext(ctx))
		require.NoError(t, err)
		assert.Equal(t, 503, resp.StatusCode)
		assert.Equal(t, StopRetriesOff, gaveUp.Reason)
		assert.False(t, gaveUp.Reason.GaveUp())
		assert.Equal(t, "retries_off", gaveUp.Reason.Label())
		assert.Equal(t, StopRetriesOff, done.Reason)

		_, err = rt.RoundTrip(mustRequest(t, "GET", "http://"+closedAddr(t)+"/", nil).WithContext(ctx))
		var e *Error
		require.ErrorAs(t, err, &e)
		assert.Equal(t, StopRetriesOff, e.Reason)
		assert.Contains(t, err.Error(), "retry: stopped after 1 attempt (retries off): ")
	}
	assert.Len(t, s.requests(), 2)

	// A permanent outcome stays StopPermanent with retries off too.
	nf := newScript(t, status(404))
	var gaveUp Event
	rt, _ := testTransport(nf.base, WithMaxAttempts(1), WithOnGiveUp(func(e Event) { gaveUp = e }))
	_, _, err := do(t, rt, mustRequest(t, "GET", nf.srv.URL, nil))
	require.NoError(t, err)
	assert.Equal(t, StopPermanent, gaveUp.Reason)
}

// A retry that reached a server able to answer costs nothing, and the
// answer puts a token back, whether it succeeded or was not worth
// retrying (a 503 then a 404), while one
// whose answer was a failure worth retrying keeps its cost.
func TestBudgetRefundsAnAnswer(t *testing.T) {
	for _, tt := range []struct {
		name  string
		steps []func(http.ResponseWriter, *http.Request)
		want  int
	}{
		{"503 then 200", []func(http.ResponseWriter, *http.Request){status(503), status(200)}, 501},
		{"503 then 404", []func(http.ResponseWriter, *http.Request){status(503), status(404)}, 501},
		{"503 then 501", []func(http.ResponseWriter, *http.Request){status(503), status(501)}, 501},
		{"503 then 500 for a POST", []func(http.ResponseWriter, *http.Request){status(503), status(500)}, 486},
		{"503 four times", []func(http.ResponseWriter, *http.Request){status(503)}, 458}, // a bare 503's retry costs 14
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := newScript(t, tt.steps...)
			budget := &TokenBucket{}
			budget.spent.Store(100) // a success on a full bucket changes nothing
			rt, _ := testTransport(s.base, WithBudget(budget))
			_, _, err := do(t, rt, mustRequest(t, "POST", s.srv.URL, strings.NewReader("x")))
			require.NoError(t, err)
			assert.Equal(t, tt.want-100, budget.Tokens(), "tokens, less the 100 spent before")
		})
	}
}

// blockingSleep is a sleep seam that waits, as a long real wait would,
// until ctx is done; it gives up after a minute, and records it, only if
// the wait was never ended (a regression).
func blockingSleep(stuck *atomic.Bool, during func()) func(context.Context, time.Duration) error {
	return func(ctx context.Context, d time.Duration) error {
		if during != nil {
			during()
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Minute):
			stuck.Store(true)
			return nil
		}
	}
}

// blockingPacer grants the first turn and blocks the next until ctx is
// done, calling during first, as blockingSleep does.
type blockingPacer struct {
	waits int
	sleep func(context.Context, time.Duration) error
}

func (p *blockingPacer) Wait(ctx context.Context, req *http.Request) (Turn, error) {
	if p.waits++; p.waits == 1 {
		return recordingTurn{&recordingPacer{}}, nil
	}
	if err := p.sleep(ctx, time.Hour); err != nil {
		return nil, err
	}
	return nil, errors.New("never granted")
}

// The deprecated Request.Cancel, which net/http still honours, ends a
// backoff wait and a Pacer's wait as the context does: closed during the
// wait, the call returns at once, and no second attempt is made.
func TestRequestCancelEndsWaits(t *testing.T) {
	for _, paced := range []bool{false, true} {
		s := newScript(t, status(503))
		cancelCh := make(chan struct{})
		var stuck atomic.Bool
		var gaveUp giveUps
		rt, _ := testTransport(s.base, WithBackoff(Constant{Base: time.Hour}), WithOnGiveUp(gaveUp.hook))
		closeCancel := func() { close(cancelCh) }
		if paced {
			rt.Pacer = &blockingPacer{sleep: blockingSleep(&stuck, closeCancel)}
			rt.Backoff = Constant{}
		} else {
			rt.sleep = blockingSleep(&stuck, closeCancel)
		}
		req := mustRequest(t, "POST", s.srv.URL, strings.NewReader("x"))
		//lint:ignore SA1019 the deprecated channel is what is tested.
		req.Cancel = cancelCh
		_, err := rt.RoundTrip(req)
		require.False(t, stuck.Load(), "the wait did not end on Request.Cancel")
		var e *Error
		require.ErrorAs(t, err, &e, "paced=%v", paced)
		assert.Equal(t, StopCanceled, e.Reason)
		assert.ErrorIs(t, err, context.Canceled)
		assert.Equal(t, Throttled, gaveUp.last(t).Class)
		assert.Len(t, s.requests(), 1, "no attempt after the cancel")
	}
}
