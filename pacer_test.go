package retry

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// recordingPacer is a Pacer that grants every turn at once (or fails Wait
// with err) and records what the Transport tells it.
type recordingPacer struct {
	err error

	mu        sync.Mutex
	waits     int
	feedback  []Feedback
	abandoned int
}

func (p *recordingPacer) Wait(ctx context.Context, req *http.Request) (Turn, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.waits++
	if p.err != nil {
		return nil, p.err
	}
	return recordingTurn{p}, nil
}

type recordingTurn struct{ p *recordingPacer }

func (t recordingTurn) Done(f Feedback) {
	t.p.mu.Lock()
	defer t.p.mu.Unlock()
	t.p.feedback = append(t.p.feedback, f)
}

func (t recordingTurn) Abandon() {
	t.p.mu.Lock()
	defer t.p.mu.Unlock()
	t.p.abandoned++
}

// Every attempt waits for a turn and reports its outcome on it, with the
// server's wait read as the Transport reads it.
func TestPacerSeam(t *testing.T) {
	s := newScript(t,
		status(429, "Retry-After", "2"),
		status(503, "X-RateLimit-Reset", "7"),
		status(200, "RateLimit", `"default";r=0;t=5`),
	)
	p := &recordingPacer{}
	rt, _ := testTransport(s.base, WithPacer(p), WithRateLimitReset(ResetDeltaSeconds))
	resp, _, err := do(t, rt, mustRequest(t, "GET", s.srv.URL, nil))
	require.NoError(t, err)
	assert.Equal(t, 200, resp.StatusCode)
	assert.Equal(t, 3, p.waits)
	require.Len(t, p.feedback, 3)
	want := []struct {
		class  Class
		code   int
		wait   time.Duration
		hinted bool
	}{
		{Throttled, 429, 2 * time.Second, true},
		{Throttled, 503, 7 * time.Second, true}, // read with the Transport's RateLimitReset
		{Success, 200, 5 * time.Second, true},   // a success that says its quota is spent
	}
	for i, w := range want {
		f := p.feedback[i]
		assert.Equal(t, w.class, f.Class, "attempt %d", i+1)
		require.NotNil(t, f.Response)
		assert.Equal(t, w.code, f.Response.StatusCode)
		assert.Equal(t, w.wait, f.Wait, "attempt %d", i+1)
		assert.Equal(t, w.hinted, f.Hinted, "attempt %d", i+1)
	}
	assert.Zero(t, p.abandoned)
}

// An attempt that is not sent gives its turn back; an error outcome is
// reported without a response.
func TestPacerSeamAbandonAndErrors(t *testing.T) {
	s := newScript(t, status(500))
	p := &recordingPacer{}
	rt, _ := testTransport(s.base, WithPacer(p), WithMaxAttempts(2))
	req := mustRequest(t, "PUT", s.srv.URL, strings.NewReader("x"))
	req.GetBody = func() (io.ReadCloser, error) { return nil, errors.New("no body") }
	_, err := rt.RoundTrip(req) // 500, then GetBody fails: the retry is not sent
	require.ErrorContains(t, err, "no body")
	assert.Equal(t, 2, p.waits)
	require.Len(t, p.feedback, 1)
	assert.Equal(t, Transient, p.feedback[0].Class)
	assert.False(t, p.feedback[0].Hinted)
	assert.Equal(t, 1, p.abandoned)

	p = &recordingPacer{}
	rt, _ = testTransport(nil, WithPacer(p), WithMaxAttempts(1))
	_, err = rt.RoundTrip(mustRequest(t, "GET", "http://"+closedAddr(t), nil))
	require.Error(t, err)
	require.Len(t, p.feedback, 1)
	assert.Equal(t, Unsent, p.feedback[0].Class)
	assert.Nil(t, p.feedback[0].Response)
}

// A Wait that fails stops the call: on the context's end, StopCanceled;
// on a wait refused for the deadline, StopDeadline. Nothing is sent, and
// the caller's body is closed.
func TestPacerSeamWaitErrors(t *testing.T) {
	s := newScript(t, status(200))
	refused := fmt.Errorf("a wait of 1h would end past the deadline: %w", context.DeadlineExceeded)
	for _, tt := range []struct {
		name   string
		cancel bool
		err    error
		stop   StopReason
	}{
		{"deadline", false, refused, StopDeadline},
		{"canceled", true, context.Canceled, StopCanceled},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var gaveUp giveUps
			rt, _ := testTransport(s.base, WithPacer(&recordingPacer{err: tt.err}), WithOnGiveUp(gaveUp.hook))
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			if tt.cancel {
				cancel()
			}
			cc := &countingCloser{Reader: strings.NewReader("x")}
			_, err := rt.RoundTrip(mustRequest(t, "PUT", s.srv.URL, cc).WithContext(ctx))
			var re *Error
			require.ErrorAs(t, err, &re)
			assert.Equal(t, tt.stop, re.Reason)
			assert.Zero(t, re.Attempts)
			assert.ErrorIs(t, err, tt.err)
			assert.Equal(t, tt.stop, gaveUp.last(t).Reason)
			assert.Equal(t, Unsent, gaveUp.last(t).Class, "nothing was sent; not Undecided, which is no outcome")
			assert.EqualValues(t, 1, cc.closes.Load())
			assert.Empty(t, s.requests())
		})
	}
}

func TestQuotaExhausted(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		name   string
		header []string
		wait   time.Duration
		ok     bool
	}{
		{"RateLimit r=0", []string{"RateLimit", `"default";r=0;t=5`}, 5 * time.Second, true},
		{"legacy RateLimit-Remaining 0", []string{"RateLimit-Remaining", "0", "RateLimit-Reset", "2"}, 2 * time.Second, true},
		{"quota left", []string{"RateLimit", `"default";r=40;t=5`, "RateLimit-Remaining", "7", "RateLimit-Reset", "2"}, 0, false},
		{"none", nil, 0, false},
		{"a Retry-After on a success is not a spent quota", []string{"Retry-After", "3"}, 0, false},
	}
	for _, tt := range tests {
		h := http.Header{}
		for i := 0; i+1 < len(tt.header); i += 2 {
			h.Set(tt.header[i], tt.header[i+1])
		}
		wait, ok := quotaExhausted(h, func() time.Time { return now })
		if wait != tt.wait || ok != tt.ok {
			t.Errorf("%s: quotaExhausted = %v, %v; want %v, %v", tt.name, wait, ok, tt.wait, tt.ok)
		}
	}
}

// deadlinePacer grants the first turn of each call and refuses the next
// for the deadline, as a Pacer whose turn is too far away.
type deadlinePacer struct{ waits int }

func (p *deadlinePacer) Wait(ctx context.Context, req *http.Request) (Turn, error) {
	p.waits++
	if p.waits%2 == 0 {
		return nil, fmt.Errorf("a turn in 7m: %w", context.DeadlineExceeded)
	}
	return recordingTurn{&recordingPacer{}}, nil
}

// A retry whose pacing wait would end past the deadline returns the last
// answer, body and all, as a backoff's wait past the deadline does; not
// the Pacer's refusal.
func TestPacerDeadlineReturnsTheLastAnswer(t *testing.T) {
	forEachProto(t, func(t *testing.T, p proto) {
		s := newScriptOver(t, p, status(429), status(200))
		var gaveUp giveUps
		var done []Summary
		rt, _ := testTransport(s.base, WithPacer(&deadlinePacer{}), WithOnGiveUp(gaveUp.hook),
			WithOnDone(func(sm Summary) { done = append(done, sm) }))
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		resp, body, err := do(t, rt, mustRequest(t, "GET", s.srv.URL, nil).WithContext(ctx))
		require.NoError(t, err)
		assert.Equal(t, 429, resp.StatusCode)
		assert.Equal(t, "status 429", body, "the answer's body is returned whole")
		assert.Len(t, s.requests(), 1)
		e := gaveUp.last(t)
		assert.Equal(t, StopDeadline, e.Reason)
		assert.Equal(t, 429, e.StatusCode)
		assert.Equal(t, Throttled, e.Class)
		require.Len(t, done, 1)
		assert.Equal(t, 1, done[0].Attempts)
		assert.Equal(t, StopDeadline, done[0].Reason)
		assert.EqualValues(t, 1, s.newConn.Load(), "the kept answer's connection was reused")
	})
	t.Run("a body too long to keep", func(t *testing.T) {
		big := strings.Repeat("x", drainLimit+1)
		s := newScript(t, func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(429)
			io.WriteString(w, big)
		})
		var gaveUp giveUps
		var done Summary
		rt, _ := testTransport(s.base, WithPacer(&deadlinePacer{}), WithOnGiveUp(gaveUp.hook),
			WithOnDone(func(sm Summary) { done = sm }))
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_, err := rt.RoundTrip(mustRequest(t, "GET", s.srv.URL, nil).WithContext(ctx))
		var re *Error
		require.ErrorAs(t, err, &re)
		assert.Equal(t, StopDeadline, re.Reason)
		assert.ErrorIs(t, err, context.DeadlineExceeded)
		assert.Equal(t, Throttled, gaveUp.last(t).Class, "the last attempt's class")
		assert.Equal(t, Throttled, done.Class)
	})
}
