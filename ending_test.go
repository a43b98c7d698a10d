package retry

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A failed answer returned instead of retried carries its Ending, through
// an http.Client too: the attempts, the reason, and when to come back.
func TestEndingOfAFailedAnswer(t *testing.T) {
	const s = time.Second
	tests := []struct {
		name     string
		steps    []func(http.ResponseWriter, *http.Request)
		opts     []Option
		timeout  time.Duration
		attempts int
		reason   StopReason
		retryIn  time.Duration // 0: no RetryAt
	}{
		{"server wait too long", []func(http.ResponseWriter, *http.Request){status(503, "Retry-After", "600")},
			nil, 0, 1, StopServerWait, 600 * s},
		{"backoff past the deadline", []func(http.ResponseWriter, *http.Request){status(503)},
			[]Option{WithBackoff(Constant{Base: 10 * s})}, 5 * s, 1, StopDeadline, 10 * s},
		{"budget", []func(http.ResponseWriter, *http.Request){status(503)},
			[]Option{WithBackoff(Constant{Base: 3 * s}), WithBudget(&TokenBucket{Capacity: 1})}, 0, 1, StopBudget, 3 * s},
		{"attempts", []func(http.ResponseWriter, *http.Request){status(503)},
			[]Option{WithBackoff(Constant{})}, 0, DefaultMaxAttempts, StopAttempts, 0},
		{"permanent", []func(http.ResponseWriter, *http.Request){status(404)}, nil, 0, 1, StopPermanent, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			sc := newScript(t, tc.steps...)
			tr, clock := testTransport(sc.base, tc.opts...)
			ctx := context.Background()
			if tc.timeout > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, tc.timeout)
				defer cancel()
			}
			req, err := http.NewRequestWithContext(ctx, "GET", sc.srv.URL, nil)
			require.NoError(t, err)
			resp, err := (&http.Client{Transport: tr}).Do(req)
			require.NoError(t, err)
			resp.Body.Close()
			e, ok := EndingOf(resp)
			require.True(t, ok)
			assert.Equal(t, tc.attempts, e.Attempts)
			assert.Equal(t, tc.reason, e.Reason)
			at, ok := RetryAt(resp, nil)
			if tc.retryIn == 0 {
				assert.False(t, ok)
				assert.True(t, e.RetryAt.IsZero())
				return
			}
			require.True(t, ok)
			assert.Equal(t, clock.Now().Add(tc.retryIn), at)
		})
	}
}

// A success carries no Ending; its attempt number is in its request.
func TestEndingOfASuccess(t *testing.T) {
	sc := newScript(t, status(503), status(200))
	tr, _ := testTransport(sc.base)
	resp, err := tr.RoundTrip(mustRequest(t, "GET", sc.srv.URL, nil))
	require.NoError(t, err)
	resp.Body.Close()
	_, ok := EndingOf(resp)
	assert.False(t, ok)
	assert.Equal(t, 2, Attempt(resp.Request.Context()))
	_, ok = EndingOf(nil)
	assert.False(t, ok)
	_, ok = EndingOf(&http.Response{Request: mustRequest(t, "GET", sc.srv.URL, nil)})
	assert.False(t, ok, "a response that did not come from a Transport")
}

// A call that ends on an error says when to come back in its *Error.
func TestRetryAtOfAnError(t *testing.T) {
	url := "http://" + closedAddr(t)
	tr, clock := testTransport(nil, WithBackoff(Constant{Base: 10 * time.Second}))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "GET", url, nil)
	require.NoError(t, err)
	_, err = (&http.Client{Transport: tr}).Do(req)
	require.Error(t, err)
	var e *Error
	require.ErrorAs(t, err, &e)
	assert.Equal(t, StopDeadline, e.Reason)
	at, ok := RetryAt(nil, err)
	require.True(t, ok)
	assert.Equal(t, clock.Now().Add(10*time.Second), at)
}

// A Pacer that refuses a turn past the deadline with TurnTooLate tells
// the caller when the turn would have come.
func TestRetryAtOfAPacerRefusal(t *testing.T) {
	sc := newScript(t, status(503))
	pacer := &recordingPacer{}
	var dones []Summary
	tr, clock := testTransport(sc.base, WithPacer(pacer), WithBackoff(Constant{}),
		WithOnRetry(func(Event) {
			pacer.mu.Lock()
			pacer.err = &TurnTooLate{Wait: 7 * time.Second}
			pacer.mu.Unlock()
		}),
		WithOnDone(func(s Summary) { dones = append(dones, s) }))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "GET", sc.srv.URL, nil)
	require.NoError(t, err)
	resp, err := tr.RoundTrip(req)
	require.NoError(t, err, "the last answer is returned")
	resp.Body.Close()
	e, ok := EndingOf(resp)
	require.True(t, ok)
	assert.Equal(t, Ending{Attempts: 1, Reason: StopDeadline, RetryAt: clock.Now().Add(7 * time.Second)}, e)
	require.Len(t, dones, 1)
	assert.Equal(t, e.RetryAt, dones[0].RetryAt, "the Summary says it too")
	assert.True(t, errors.Is(&TurnTooLate{}, context.DeadlineExceeded))
}
