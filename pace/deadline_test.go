package pace

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

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
