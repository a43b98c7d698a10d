package retry

import (
	"context"
	"errors"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The Breaker is asked after the wait, just before the send: a circuit
// that other calls open while a retry waits stops the retry, and the last
// answer is returned with StopBreaker.
func TestBreakerAskedAfterTheWait(t *testing.T) {
	forEachProto(t, func(t *testing.T, p proto) {
		sc := newScriptOver(t, p, status(503))
		var open atomic.Bool
		circuits := &recordingPacer{}
		br := breakerFunc(func(*http.Request) (Turn, error) {
			if open.Load() {
				return nil, &CircuitOpen{Key: "k"}
			}
			return recordingTurn{circuits}, nil
		})
		var gaveUp giveUps
		tr, clock := testTransport(sc.base, WithBreaker(br), WithMaxAttempts(2), WithOnGiveUp(gaveUp.hook))
		tr.sleep = func(ctx context.Context, d time.Duration) error {
			open.Store(true) // other calls' failures open the circuit meanwhile
			return clock.Sleep(ctx, d)
		}
		resp, body, err := do(t, tr, mustRequest(t, "GET", sc.srv.URL, nil))
		require.NoError(t, err)
		assert.Equal(t, 503, resp.StatusCode)
		assert.Equal(t, "status 503", body, "the last answer, kept through the wait")
		assert.Len(t, sc.requests(), 1, "the retry never reached the server")
		assert.Equal(t, StopBreaker, gaveUp.last(t).Reason)
		assert.Len(t, circuits.feedback, 1)
	})
}

// The Budget is charged only for an attempt that is sent: a retry that a
// later gate refuses, or a copy that BeforeAttempt refuses, costs nothing,
// and the turns taken before the refusal are given back.
func TestBudgetChargedOnlyWhenSent(t *testing.T) {
	noCopy := func(p Prepare) error {
		if p.Attempt > 1 {
			return errors.New("no copy")
		}
		return nil
	}
	for _, tc := range []struct {
		name      string
		calls     int
		opts      func(pacer *recordingPacer) []Option
		abandoned int // Pacer turns given back
	}{
		{"the breaker refuses the retry", 1, func(*recordingPacer) []Option {
			n := 0
			return []Option{WithBreaker(breakerFunc(func(*http.Request) (Turn, error) {
				if n++; n > 1 {
					return nil, &CircuitOpen{Key: "k"}
				}
				return recordingTurn{&recordingPacer{}}, nil
			}))}
		}, 1},
		{"BeforeAttempt refuses the retry", 1, func(*recordingPacer) []Option {
			return []Option{WithBeforeAttempt(noCopy)}
		}, 1},
		{"BeforeAttempt refuses the copies of ten calls", 10, func(*recordingPacer) []Option {
			return []Option{WithHedge(Hedge{Delay: time.Millisecond}), WithBeforeAttempt(noCopy)}
		}, 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			budget := &TokenBucket{}
			pacer := &recordingPacer{}
			var base http.RoundTripper = roundTripFunc(func(r *http.Request) (*http.Response, error) {
				return &http.Response{StatusCode: 500, Body: http.NoBody, Request: r}, nil
			})
			var release chan struct{}
			if tc.calls > 1 {
				// The first attempt answers once its copy was refused.
				release = make(chan struct{})
				base = roundTripFunc(func(r *http.Request) (*http.Response, error) {
					<-release
					return &http.Response{StatusCode: 200, Body: http.NoBody, Request: r}, nil
				})
			}
			opts := append([]Option{WithBudget(budget), WithPacer(pacer)}, tc.opts(pacer)...)
			tr, _ := testTransport(base, opts...)
			if release != nil {
				before := tr.BeforeAttempt
				tr.BeforeAttempt = func(p Prepare) error {
					err := before(p)
					if p.Attempt > 1 {
						release <- struct{}{}
					}
					return err
				}
			}
			for range tc.calls {
				resp, err := tr.RoundTrip(mustRequest(t, "GET", "http://127.0.0.1/", nil))
				if err == nil {
					resp.Body.Close()
				}
			}
			assert.Equal(t, 500, budget.Tokens())
			assert.Equal(t, tc.abandoned, pacer.abandoned, "Pacer turns given back")
		})
	}
}

// A retry the Budget refuses is refused before its wait when the Budget
// can tell (TokenBucket.Affords): the call does not wait to be refused.
// One that cannot tell is refused after the wait, and its turns are
// given back.
func TestBudgetRefusesBeforeTheWait(t *testing.T) {
	t.Run("affords", func(t *testing.T) {
		sc := newScript(t, status(503))
		tr, clock := testTransport(sc.base, WithBudget(&TokenBucket{Capacity: 1}))
		resp, _, err := do(t, tr, mustRequest(t, "GET", sc.srv.URL, nil))
		require.NoError(t, err)
		assert.Equal(t, 503, resp.StatusCode)
		assert.Empty(t, clock.Waits())
	})
	t.Run("cannot tell", func(t *testing.T) {
		sc := newScript(t, status(503))
		pacer, circuits := &recordingPacer{}, &recordingPacer{}
		br := breakerFunc(func(*http.Request) (Turn, error) { return recordingTurn{circuits}, nil })
		var gaveUp giveUps
		tr, clock := testTransport(sc.base, WithBudget(budgetFunc(func(Class) bool { return false })),
			WithPacer(pacer), WithBreaker(br), WithOnGiveUp(gaveUp.hook))
		resp, body, err := do(t, tr, mustRequest(t, "GET", sc.srv.URL, nil))
		require.NoError(t, err)
		assert.Equal(t, 503, resp.StatusCode)
		assert.Equal(t, "status 503", body)
		assert.Len(t, clock.Waits(), 1)
		assert.Equal(t, StopBudget, gaveUp.last(t).Reason)
		assert.Equal(t, 1, pacer.abandoned)
		assert.Equal(t, 1, circuits.abandoned)
		assert.Len(t, sc.requests(), 1)
	})
	t.Run("an error outcome", func(t *testing.T) {
		tr, _ := testTransport(roundTripFunc(func(*http.Request) (*http.Response, error) {
			return nil, errors.New("connection reset")
		}), WithBudget(budgetFunc(func(Class) bool { return false })))
		_, err := tr.RoundTrip(mustRequest(t, "GET", "http://127.0.0.1/", nil))
		var e *Error
		require.ErrorAs(t, err, &e)
		assert.Equal(t, StopBudget, e.Reason)
		assert.ErrorContains(t, err, "connection reset", "the last attempt's error, not the budget's")
	})
}

// A hedged attempt whose copies all fail waits, before its retry, for the
// longest wait any copy's server asked for, not only the last copy's.
func TestHedgeRoundKeepsTheLongestServerWait(t *testing.T) {
	heard := make(chan struct{})
	pacer := &signallingPacer{throttled: heard}
	base := byAttempt{
		func(req *http.Request) (*http.Response, error) {
			<-heard // fails once the race has heard the copy's 429
			return answerWith(req, 500, new(atomic.Int32)), nil
		},
		func(req *http.Request) (*http.Response, error) {
			resp := answerWith(req, 429, new(atomic.Int32))
			resp.Header.Set("Retry-After", "7")
			return resp, nil
		},
		func(req *http.Request) (*http.Response, error) { return answerWith(req, 200, new(atomic.Int32)), nil },
	}
	rt, _, clock := hedging(base, nil, WithPacer(pacer), WithMaxAttempts(3))
	resp, err := rt.RoundTrip(mustRequest(t, "GET", "http://127.0.0.1/", nil))
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, 200, resp.StatusCode)
	assert.Equal(t, []time.Duration{50 * time.Millisecond, 7 * time.Second}, clock.Waits(),
		"the hedge delay, then the copy's Retry-After")
}

// ServerWaitJitter's spread never turns a server wait that fits before
// the deadline into a give-up: the spread is cut at the deadline. A
// server wait that does not fit is still refused.
func TestServerWaitJitterWithinTheDeadline(t *testing.T) {
	for _, tc := range []struct {
		retryAfter string
		status     int
	}{
		{"10", 200}, // 10 s fits in 11 s; 12.5 s with the spread does not
		{"12", 429},
	} {
		t.Run(tc.retryAfter, func(t *testing.T) {
			sc := newScript(t, status(429, "Retry-After", tc.retryAfter), status(200))
			tr, clock := testTransport(sc.base, WithServerWaitJitter(Spread(0.5)))
			ctx, cancel := context.WithTimeout(context.Background(), 11*time.Second)
			defer cancel()
			req := mustRequest(t, "GET", sc.srv.URL, nil).WithContext(ctx)
			resp, _, err := do(t, tr, req)
			require.NoError(t, err)
			assert.Equal(t, tc.status, resp.StatusCode)
			if tc.status == 200 {
				require.Len(t, clock.Waits(), 1)
				w := clock.Waits()[0]
				assert.True(t, w >= 10*time.Second && w < 11*time.Second+time.Second/2, "wait %v: not past the deadline", w)
			}
		})
	}
}

// pacedPacer is a Pacer whose turns say they were paced at a learned
// rate, from its second turn on.
type pacedPacer struct{ recordingPacer }

type pacedTurn struct {
	recordingTurn
	paced bool
}

func (t pacedTurn) Paced() bool { return t.paced }

func (p *pacedPacer) Wait(ctx context.Context, req *http.Request) (Turn, error) {
	p.recordingPacer.Wait(ctx, req)
	return pacedTurn{recordingTurn{&p.recordingPacer}, p.waits > 1}, nil
}

// A retry of a refusal for the rate that waited for a paced turn is paid
// for by that wait, not by the budget; a 503 with no server wait is no
// such refusal (RateLimited), and its retry is charged.
func TestPacedRetryIsFree(t *testing.T) {
	for _, tc := range []struct {
		name   string
		first  func(http.ResponseWriter, *http.Request)
		tokens int
	}{
		{"429", status(429), 500},
		{"503 with Retry-After", status(503, "Retry-After", "1"), 500},
		{"bare 503", status(503), 487}, // two retries at 14 (a transient's price); the answer gives back the last's, and 1
	} {
		t.Run(tc.name, func(t *testing.T) {
			sc := newScript(t, tc.first, tc.first, status(200))
			budget := &TokenBucket{}
			tr, _ := testTransport(sc.base, WithBudget(budget), WithPacer(&pacedPacer{}))
			resp, _, err := do(t, tr, mustRequest(t, "GET", sc.srv.URL, nil))
			require.NoError(t, err)
			assert.Equal(t, 200, resp.StatusCode)
			// Every retry's turn was paced (the first attempt's was not).
			assert.Equal(t, tc.tokens, budget.Tokens())
		})
	}
}

// NoPacer turns the Transport's own Pacer off, for the Transport or for
// one request; a nil Pacer is the Transport's own.
func TestNoPacer(t *testing.T) {
	tr := New(nil)
	s, err := tr.settings()
	require.NoError(t, err)
	_, own := s.pacer.(*ownPacer)
	assert.True(t, own, "a nil Pacer is the Transport's own")
	s, err = New(nil, WithPacer(NoPacer)).settings()
	require.NoError(t, err)
	assert.Nil(t, s.pacer)
	one, err := tr.resolved.withOptions([]Option{WithPacer(NoPacer)})
	require.NoError(t, err)
	assert.Nil(t, one.pacer, "NoPacer among a request's options")
}
