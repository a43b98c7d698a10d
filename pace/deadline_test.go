package pace

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/backoff-jitter/retry"
	"github.com/backoff-jitter/retry/internal/pacecore"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Waits refused for their deadline take no turn: callers that fail fast
// and call again (a worker pool whose jobs have deadlines) do not push the
// schedule out. Before, a refused wait took a turn and gave it back only
// if no other was taken meanwhile; eight goroutines refused 200 times
// each (under -race) pushed the next turn from 100 ms to 8.5 s away.
func TestRefusedWaitsTakeNoTurn(t *testing.T) {
	now := pacerEpoch
	p := &Pacer{MinRate: 10, now: func() time.Time { return now }}
	req := hostRequest(t, "api.example")
	s := p.state(req)
	engageAtMinRate(p, req, now) // turns 100 ms apart
	first, res := s.reserveAt(now)
	require.NotNil(t, res)
	require.Equal(t, 100*time.Millisecond, first, "one interval after the throttle")

	ctx, cancel := context.WithDeadline(context.Background(), now.Add(50*time.Millisecond))
	defer cancel()
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 200 {
				_, err := p.Wait(ctx, req)
				if !errors.Is(err, context.DeadlineExceeded) {
					t.Errorf("Wait = %v; want a refusal for the deadline", err)
					return
				}
			}
		}()
	}
	wg.Wait()
	next, res := s.reserveAt(now)
	require.NotNil(t, res)
	assert.Equal(t, 200*time.Millisecond, next, "the next turn after 1600 refused waits")
}

// A quota spent on a key's first answers (a success whose RateLimit field
// says none remains) engages it at the rate the client was sending at,
// read over the bucket so far, not at MinRate: the smoothed rate is not
// measured before half a second, and engaged at 0.5/s the key took 4 s of
// successes to grow back to 21/s.
func TestHintOnAFreshKeyEngagesAtItsRate(t *testing.T) {
	p := &Pacer{InitialWindow: -1}
	req := hostRequest(t, "api.example")
	for range 20 {
		p.reserve(req, pacerEpoch)
	}
	s := p.state(req)
	p.observeState(s, false, retry.Feedback{Class: retry.Success, Wait: 100 * time.Millisecond, Hinted: true}, 0, pacerEpoch.Add(5*time.Millisecond))
	r, engaged := p.Rate("api.example")
	require.True(t, engaged)
	assert.GreaterOrEqual(t, r, 1000.0, "20 sent within 10 ms: 2000/s")
}

// While a key holds its rate through an outage (refused from its first
// attempt on, nothing accepted yet), a wait past the deadline is no
// forecast: the rate held is a probe's, and the first success restarts
// the key. Such a wait takes no turn and is not refused: the attempt
// waits for the hold to end, or for its context. Refused at once, the
// attempts of 1000 clients held at AIMD's 125/s failed at 1 to 2 s, on
// deadlines of 8 s, in an outage of 1 s (bench/storm, a run in three).
func TestHeldOutageWaitIsNoForecast(t *testing.T) {
	for _, tc := range []struct {
		name    string
		spacing time.Duration // between the outage's refusals
		restart bool          // whether the success restarts the key
	}{
		{"restarted", 20 * time.Millisecond, true},
		// A success before outageTime ends the hold without a restart.
		{"soon", time.Millisecond, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			now := time.Now()
			p := &Pacer{Adapt: AdaptAIMD, afterFunc: (&fakeLimit{}).afterFunc, now: func() time.Time { return now }}
			req := hostRequest(t, "api.example")
			s := p.state(req)
			for range 10 {
				p.reserve(req, now)
			}
			for range 40 {
				now = now.Add(tc.spacing)
				p.observe(req, retry.Throttled, response(503), curGen(p, req), now)
			}
			s.mu.Lock()
			holding := s.st.Mode() == pacecore.ModeHeld
			s.mu.Unlock()
			require.True(t, holding, "refused from the first attempt on, the rate is held")
			// Turns for the next 10 s are taken.
			for i := 0; ; i++ {
				require.Less(t, i, 1_000_000, "the queue never reached 10 s")
				if d, _ := p.reserve(req, now); d > 10*time.Second {
					break
				}
			}
			ctx, cancel := context.WithDeadline(context.Background(), now.Add(5*time.Second))
			defer cancel()
			d, res, ok, held := s.reserve(ctx, now)
			require.False(t, ok, "the turn would come past the deadline")
			require.Nil(t, res)
			require.NotNil(t, held, "held through an outage, the wait is no forecast")
			next, _ := s.reserveAt(now)
			assert.Equal(t, d, next, "the wait past the deadline took no turn")
			select {
			case <-held:
				t.Fatal("the hold ended with nothing answered")
			default:
			}

			// Its context ends first: Wait returns the context's error,
			// not a refusal for the deadline.
			ended, end := context.WithDeadline(context.Background(), now.Add(5*time.Second))
			end()
			_, err := p.Wait(ended, req)
			assert.ErrorIs(t, err, context.Canceled)

			// The server answers: the hold ends, and wakes the attempt.
			now = now.Add(time.Millisecond)
			p.observe(req, retry.Success, response(200), curGen(p, req), now)
			select {
			case <-held:
			default:
				t.Fatal("the end of the hold did not wake the attempt")
			}
			_, engaged := p.Rate("api.example")
			assert.Equal(t, !tc.restart, engaged, "restarted")
			if tc.restart {
				turn, err := p.Wait(ctx, req)
				require.NoError(t, err, "restarted, the attempt goes in slow start")
				turn.Done(retry.Feedback{Class: retry.Success})
			}
		})
	}
}

// A key that has had a success does not hold its rate: its wait is the
// limit's, and a wait past the deadline is refused at once, as before.
func TestOutageAfterSuccessesRefusesPastDeadline(t *testing.T) {
	now := time.Now()
	p := &Pacer{InitialWindow: -1, MinRate: 1, now: func() time.Time { return now }}
	req := hostRequest(t, "api.example")
	p.observe(req, retry.Success, response(200), 0, now)
	engageAtMinRate(p, req, now) // turns a second apart
	for range 20 {
		p.reserve(req, now)
	}
	ctx, cancel := context.WithDeadline(context.Background(), now.Add(5*time.Second))
	defer cancel()
	_, err := p.Wait(ctx, req)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Contains(t, err.Error(), "would end past the context's deadline")
}

// engageAtMinRate engages req's key at p's MinRate: a throttle that says
// when to come back engages a key at once, at the rate it was sent at
// (none here), and no slower than MinRate.
func engageAtMinRate(p *Pacer, req *http.Request, now time.Time) {
	p.observeState(p.state(req), false, retry.Feedback{Class: retry.Throttled, Response: response(429), Hinted: true}, 0, now)
}
