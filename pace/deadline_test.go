package pace

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/backoff-jitter/retry"
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
	p := &Pacer{now: func() time.Time { return now }}
	req := hostRequest(t, "api.example")
	s := p.state(req)
	s.mu.Lock()
	s.setRate(10, p.minRate()) // engaged: turns 100 ms apart
	s.mu.Unlock()
	first, res := s.reserveAt(now)
	require.NotNil(t, res)
	require.Zero(t, first)

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
	assert.Equal(t, 100*time.Millisecond, next, "the next turn after 1600 refused waits")
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
