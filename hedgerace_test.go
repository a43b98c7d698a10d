package retry

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// byAttempt is a base transport that answers attempt n (Attempt of the
// request's context) with steps[n-1], each on its own goroutine.
type byAttempt []func(req *http.Request) (*http.Response, error)

func (b byAttempt) RoundTrip(req *http.Request) (*http.Response, error) {
	n := Attempt(req.Context())
	if n < 1 || n > len(b) {
		return nil, errors.New("unexpected attempt")
	}
	return b[n-1](req)
}

// answer returns a response of code with a body that records its Close.
func answerWith(req *http.Request, code int, closed *atomic.Int32) *http.Response {
	return &http.Response{StatusCode: code, Header: http.Header{}, Request: req,
		Body: &closeCount{Reader: strings.NewReader("body"), n: closed}}
}

type closeCount struct {
	io.Reader
	n *atomic.Int32
}

func (c *closeCount) Close() error { c.n.Add(1); return nil }

// When every copy fails in a way worth retrying, the call retries after
// its backoff, as it would have without them: the backoff counts retries,
// not copies, the copies count towards MaxAttempts, and every discarded
// response is closed.
func TestHedgeAllCopiesFailThenRetry(t *testing.T) {
	var closed atomic.Int32
	second, third := make(chan struct{}), make(chan struct{})
	pacer := &signallingPacer{throttled: third, after: 3}
	base := byAttempt{
		func(req *http.Request) (*http.Response, error) { <-second; return answerWith(req, 503, &closed), nil },
		func(req *http.Request) (*http.Response, error) {
			defer close(second)
			return answerWith(req, 503, &closed), nil
		},
		// Answers once the race has heard its copy's 503, the third.
		func(req *http.Request) (*http.Response, error) { <-third; return answerWith(req, 200, &closed), nil },
		func(req *http.Request) (*http.Response, error) { return answerWith(req, 503, &closed), nil },
	}
	rt, sums, clock := hedging(base, nil, WithPacer(pacer), WithBackoff(Exponential{Base: time.Second, Cap: time.Minute}))
	resp, err := rt.RoundTrip(mustRequest(t, "GET", "http://127.0.0.1/", nil))
	require.NoError(t, err)
	assert.Equal(t, 200, resp.StatusCode)
	resp.Body.Close()
	sum := sums.last(t)
	assert.Equal(t, 4, sum.Attempts)
	assert.Equal(t, 2, sum.Hedges)
	assert.False(t, sum.HedgeWon, "attempt 3, not its copy, answered")
	assert.Equal(t, int32(4), closed.Load(), "every response closed: three discarded, one by the caller")
	assert.Equal(t, []time.Duration{50 * time.Millisecond, time.Second, 50 * time.Millisecond}, clock.Waits(),
		"the hedge delay, the backoff of retry 1 (not 2), the hedge delay")
	assert.Equal(t, 4, pacer.waits, "every copy waits for its turn")
	require.Len(t, pacer.feedback, 4)
	classes := map[Class]int{}
	for _, f := range pacer.feedback {
		classes[f.Class]++
	}
	assert.Equal(t, map[Class]int{Throttled: 3, Success: 1}, classes)
}

// The copies still in flight when an answer wins are cancelled, with a
// cause that says so; their responses are closed; their turns are told
// the outcome is unknown, which neither a Pacer nor a Breaker counts.
func TestHedgeCancelsTheLosers(t *testing.T) {
	var closed atomic.Int32
	cause := make(chan error, 1)
	base := byAttempt{
		func(req *http.Request) (*http.Response, error) {
			<-req.Context().Done()
			cause <- context.Cause(req.Context())
			return answerWith(req, 200, &closed), nil // came too late
		},
		func(req *http.Request) (*http.Response, error) { return answerWith(req, 200, &closed), nil },
	}
	pacer, circuits := &recordingPacer{}, &recordingPacer{}
	br := breakerFunc(func(*http.Request) (Turn, error) { return recordingTurn{circuits}, nil })
	rt, sums, _ := hedging(base, nil, WithPacer(pacer), WithBreaker(br))
	resp, err := rt.RoundTrip(mustRequest(t, "GET", "http://127.0.0.1/", nil))
	require.NoError(t, err)
	assert.Equal(t, int32(1), closed.Load(), "the loser's response is closed before RoundTrip returns")
	resp.Body.Close()
	assert.ErrorIs(t, <-cause, errHedgeLost)
	assert.True(t, sums.last(t).HedgeWon)
	for _, p := range []*recordingPacer{pacer, circuits} {
		require.Len(t, p.feedback, 2)
		assert.ElementsMatch(t, []Class{Success, Undecided}, []Class{p.feedback[0].Class, p.feedback[1].Class})
		assert.Zero(t, p.abandoned)
	}
}

// countingBudget records what it is asked, and allows retries while
// allow is true.
type countingBudget struct {
	allow     bool
	mu        sync.Mutex
	asked     []Class
	successes []Class
}

func (b *countingBudget) AllowRetry(c Class) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.asked = append(b.asked, c)
	return b.allow
}

func (b *countingBudget) Success(retried Class) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.successes = append(b.successes, retried)
}

// A copy costs what a retry after a Transient outcome costs, given back
// when its answer wins; no copy is sent when the Budget refuses it, nor
// when the Breaker or the BeforeAttempt hook does, and the first attempt
// carries on.
func TestHedgeRefused(t *testing.T) {
	t.Run("budget pays for a copy that wins", func(t *testing.T) {
		budget := &countingBudget{allow: true}
		base := byAttempt{
			func(req *http.Request) (*http.Response, error) {
				<-req.Context().Done()
				return nil, req.Context().Err()
			},
			func(req *http.Request) (*http.Response, error) { return answerWith(req, 200, new(atomic.Int32)), nil },
		}
		rt, _, _ := hedging(base, nil, WithBudget(budget))
		resp, err := rt.RoundTrip(mustRequest(t, "GET", "http://127.0.0.1/", nil))
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, []Class{Transient}, budget.asked)
		assert.Equal(t, []Class{Transient}, budget.successes, "the copy's cost given back")
	})
	for _, tc := range []struct {
		name string
		opt  func(asked chan<- struct{}) Option
	}{
		{"budget", func(asked chan<- struct{}) Option {
			return WithBudget(budgetFunc(func(Class) bool { close(asked); return false }))
		}},
		{"breaker", func(asked chan<- struct{}) Option {
			n := 0
			return WithBreaker(breakerFunc(func(*http.Request) (Turn, error) {
				if n++; n == 2 {
					close(asked)
					return nil, &CircuitOpen{Key: "127.0.0.1"}
				}
				return recordingTurn{&recordingPacer{}}, nil
			}))
		}},
		{"BeforeAttempt", func(asked chan<- struct{}) Option {
			return WithBeforeAttempt(func(p Prepare) error {
				if p.Attempt == 2 {
					close(asked)
					return errors.New("no copy")
				}
				return nil
			})
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			asked := make(chan struct{})
			base := byAttempt{func(req *http.Request) (*http.Response, error) {
				<-asked
				return answerWith(req, 200, new(atomic.Int32)), nil
			}}
			rt, sums, _ := hedging(base, nil, tc.opt(asked))
			resp, err := rt.RoundTrip(mustRequest(t, "GET", "http://127.0.0.1/", nil))
			require.NoError(t, err)
			resp.Body.Close()
			assert.Equal(t, 1, sums.last(t).Attempts)
			assert.Zero(t, sums.last(t).Hedges)
		})
	}
}

type budgetFunc func(Class) bool

func (f budgetFunc) AllowRetry(c Class) bool { return f(c) }
func (budgetFunc) Success(Class)             {}

// Copies count towards MaxAttempts: with two attempts, one copy at most,
// whatever MaxHedges says, and none at all with MaxAttempts 1.
func TestHedgeWithinMaxAttempts(t *testing.T) {
	for _, tc := range []struct{ attempts, hedges int }{{2, 1}, {1, 0}, {5, 3}} {
		var sent atomic.Int32
		all := make(chan struct{})
		step := func(req *http.Request) (*http.Response, error) {
			if int(sent.Add(1)) == tc.hedges+1 {
				close(all)
			}
			<-all
			return answerWith(req, 200, new(atomic.Int32)), nil
		}
		rt, sums, _ := hedging(byAttempt{step, step, step, step, step}, nil,
			WithMaxAttempts(tc.attempts), WithHedge(Hedge{Delay: 50 * time.Millisecond, MaxHedges: 3}))
		resp, err := rt.RoundTrip(mustRequest(t, "GET", "http://127.0.0.1/", nil))
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, tc.hedges, sums.last(t).Hedges, "MaxAttempts %d", tc.attempts)
	}
}

// A caller that gives up ends every copy: the call returns the context's
// error, and nothing outlives it (goleak checks).
func TestHedgeCallerCancels(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	started := make(chan struct{}, 2)
	step := func(req *http.Request) (*http.Response, error) {
		started <- struct{}{}
		<-req.Context().Done()
		return nil, req.Context().Err()
	}
	rt, sums, _ := hedging(byAttempt{step, step}, nil)
	go func() {
		<-started
		<-started
		cancel()
	}()
	_, err := rt.RoundTrip(mustRequest(t, "GET", "http://127.0.0.1/", nil).WithContext(ctx))
	require.ErrorIs(t, err, context.Canceled)
	assert.Equal(t, StopCanceled, sums.last(t).Reason)
	assert.Equal(t, 2, sums.last(t).Attempts)
}

// HedgeWon says whose answer the call returned, not whether a copy won an
// earlier race: here the copy's 503 is the first race's outcome, and the
// retry, with no attempt left for a copy, answers.
func TestHedgeWonIsTheLastRaces(t *testing.T) {
	copyStarted, heard := make(chan struct{}), make(chan struct{})
	pacer := &signallingPacer{throttled: heard}
	base := byAttempt{
		func(req *http.Request) (*http.Response, error) {
			<-copyStarted
			return answerWith(req, 503, new(atomic.Int32)), nil
		},
		func(req *http.Request) (*http.Response, error) {
			close(copyStarted)
			<-heard // fails once the race has heard the first attempt fail
			return answerWith(req, 503, new(atomic.Int32)), nil
		},
		func(req *http.Request) (*http.Response, error) { return answerWith(req, 200, new(atomic.Int32)), nil },
	}
	rt, sums, _ := hedging(base, nil, WithMaxAttempts(3), WithPacer(pacer))
	var retried []Event
	rt.OnRetry = func(e Event) { retried = append(retried, e) }
	resp, err := rt.RoundTrip(mustRequest(t, "GET", "http://127.0.0.1/", nil))
	require.NoError(t, err)
	resp.Body.Close()
	require.Len(t, retried, 1)
	assert.Equal(t, 2, retried[0].Attempt, "the retry follows the copy's 503, the race's last answer")
	sum := sums.last(t)
	assert.Equal(t, 3, sum.Attempts)
	assert.Equal(t, 1, sum.Hedges)
	assert.False(t, sum.HedgeWon)
}

// signallingPacer is a recordingPacer that closes throttled once it has
// been told of after throttles (1 when zero): the race has heard them.
type signallingPacer struct {
	recordingPacer
	throttled chan struct{}
	after     int
	heard     atomic.Int32
}

func (p *signallingPacer) Wait(ctx context.Context, req *http.Request) (Turn, error) {
	p.recordingPacer.Wait(ctx, req)
	return signallingTurn{p}, nil
}

type signallingTurn struct{ p *signallingPacer }

func (t signallingTurn) Done(f Feedback) {
	recordingTurn{&t.p.recordingPacer}.Done(f)
	if f.Class == Throttled && int(t.p.heard.Add(1)) == max(t.p.after, 1) {
		close(t.p.throttled)
	}
}

func (t signallingTurn) Abandon() { recordingTurn{&t.p.recordingPacer}.Abandon() }

// A throttled copy sends no further copy of the attempt: the server said
// it is overloaded. The attempt in flight still answers.
func TestHedgeStopsOnAThrottle(t *testing.T) {
	throttled := make(chan struct{})
	pacer := &signallingPacer{throttled: throttled}
	base := byAttempt{
		func(req *http.Request) (*http.Response, error) {
			<-throttled // answers once the race has heard the copy's 429
			return answerWith(req, 200, new(atomic.Int32)), nil
		},
		func(req *http.Request) (*http.Response, error) {
			resp := answerWith(req, 429, new(atomic.Int32))
			resp.Header.Set("Retry-After", "10")
			return resp, nil
		},
		func(req *http.Request) (*http.Response, error) {
			t.Error("a copy was sent after a throttle")
			return answerWith(req, 200, new(atomic.Int32)), nil
		},
	}
	rt, sums, _ := hedging(base, nil, WithPacer(pacer), WithHedge(Hedge{Delay: 50 * time.Millisecond, MaxHedges: 2}))
	waits := 0
	rt.sleep = func(ctx context.Context, d time.Duration) error {
		if waits++; waits == 1 {
			return nil // the first copy goes at once
		}
		select { // the second would go once the throttle is heard
		case <-throttled:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	resp, err := rt.RoundTrip(mustRequest(t, "GET", "http://127.0.0.1/", nil))
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, 200, resp.StatusCode)
	assert.Equal(t, 1, sums.last(t).Hedges)
}

// OnGiveUp names the attempt whose outcome ends the call, which with a
// copy is not always the last one sent; the attempts counted are all of
// them.
func TestHedgeGiveUpNamesTheLastOutcome(t *testing.T) {
	heard := make(chan struct{})
	pacer := &signallingPacer{throttled: heard}
	base := byAttempt{
		func(req *http.Request) (*http.Response, error) {
			<-heard // fails once the race has heard the copy fail
			return answerWith(req, 503, new(atomic.Int32)), nil
		},
		func(req *http.Request) (*http.Response, error) { return answerWith(req, 503, new(atomic.Int32)), nil },
	}
	var gaveUp giveUps
	rt, sums, _ := hedging(base, nil, WithMaxAttempts(2), WithOnGiveUp(gaveUp.hook), WithPacer(pacer))
	resp, err := rt.RoundTrip(mustRequest(t, "GET", "http://127.0.0.1/", nil))
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, 503, resp.StatusCode)
	e := gaveUp.last(t)
	assert.Equal(t, 1, e.Attempt, "the first attempt's 503 is the one returned")
	assert.Equal(t, StopAttempts, e.Reason)
	assert.Equal(t, 2, sums.last(t).Attempts)
	ending, ok := EndingOf(resp)
	require.True(t, ok)
	assert.Equal(t, 2, ending.Attempts)
}
