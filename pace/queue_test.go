package pace

import (
	"context"
	"net/http"
	"runtime"
	"testing"
	"time"

	"github.com/backoff-jitter/retry"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// engagedKey returns a key engaged at rate 10/s (one turn every 100 ms),
// with no turn handed out yet.
func engagedKey(t *testing.T) (*Pacer, *keyState) {
	t.Helper()
	p := &Pacer{InitialWindow: -1}
	req := hostRequest(t, "api.example")
	s := p.state(req)
	s.mu.Lock()
	s.setRate(10, p.minRate())
	s.mu.Unlock()
	return p, s
}

// A retry takes the place of its call among the waiting turns: the first
// waiting turn of a call begun later, whose own moves back one turn, and
// so on; the times handed out are the schedule's, whoever holds them.
func TestPacerRetryKeepsItsCallsPlace(t *testing.T) {
	now := pacerEpoch
	_, s := engagedKey(t)
	calls := []time.Time{now.Add(-3 * time.Second), now.Add(-2 * time.Second), now.Add(-time.Second)}
	var res []*reservation
	for _, c := range calls {
		_, r := s.reserveCall(now, c)
		require.NotNil(t, r)
		res = append(res, r)
	}
	assert.Equal(t, []time.Time{now, now.Add(100 * time.Millisecond), now.Add(200 * time.Millisecond)},
		[]time.Time{res[0].at, res[1].at, res[2].at})

	// The retry of a call begun 2.5 s ago goes after the first call and
	// before the two others.
	d, retried := s.reserveCall(now, now.Add(-2500*time.Millisecond))
	assert.Equal(t, 100*time.Millisecond, d)
	assert.Equal(t, now.Add(100*time.Millisecond), retried.at)
	assert.Equal(t, now.Add(200*time.Millisecond), res[1].at)
	assert.Equal(t, now.Add(300*time.Millisecond), res[2].at)
	assert.Equal(t, now, res[0].at)

	// A turn pushed back waits on: at its old time, it has 100 ms left.
	left, stale := res[1].take(now.Add(100 * time.Millisecond))
	assert.False(t, stale)
	assert.Equal(t, 100*time.Millisecond, left)
	// Taken at its time, it leaves the queue.
	left, _ = res[1].take(now.Add(200 * time.Millisecond))
	assert.Zero(t, left)
	s.mu.Lock()
	assert.Len(t, s.sched.queue, 3)
	s.mu.Unlock()

	// A new call goes last.
	d, _ = s.reserveCall(now, now)
	assert.Equal(t, 400*time.Millisecond, d)

	// A cut voids the queue.
	s.mu.Lock()
	s.void()
	assert.Empty(t, s.sched.queue)
	s.mu.Unlock()
	_, stale = res[2].take(now)
	assert.True(t, stale)
}

// The last turn given back is the schedule's again; a turn given back in
// the middle leaves the queue and its time spent.
func TestPacerCancelLeavesTheQueue(t *testing.T) {
	now := pacerEpoch
	_, s := engagedKey(t)
	_, a := s.reserveCall(now, now)
	_, b := s.reserveCall(now, now)
	_, c := s.reserveCall(now, now)
	b.cancel()
	c.cancel()
	s.mu.Lock()
	assert.Equal(t, []*reservation{a}, s.sched.queue)
	assert.Equal(t, now.Add(200*time.Millisecond), s.sched.next, "c's time given back, b's spent")
	s.mu.Unlock()
	c.cancel() // twice: nothing more
	s.mu.Lock()
	assert.Equal(t, now.Add(200*time.Millisecond), s.sched.next)
	s.mu.Unlock()
}

// A failed attempt's turn remembers when its call began, and the next
// Wait of the same request, its retry, gets it back, once.
func TestPacerRemembersTheCall(t *testing.T) {
	now := pacerEpoch
	p, s := engagedKey(t)
	p.now = func() time.Time { return now }
	p.sleep = func(ctx context.Context, d time.Duration) error { now = now.Add(d); return nil }
	req := hostRequest(t, "api.example")
	other := hostRequest(t, "api.example")

	turn, err := p.Wait(context.Background(), req)
	require.NoError(t, err)
	began := now
	now = now.Add(3 * time.Second)
	turn.Done(retry.Feedback{Class: retry.Transient})
	assert.Equal(t, began, s.callOf(req, now), "the retry's call began with its first attempt")
	assert.Equal(t, now, s.callOf(req, now), "once")
	assert.Equal(t, now, s.callOf(other, now))

	// A success, or a permanent failure, ends the call: nothing is kept.
	turn, err = p.Wait(context.Background(), other)
	require.NoError(t, err)
	turn.Done(retry.Feedback{Class: retry.Success, Response: response(200)})
	s.mu.Lock()
	assert.Empty(t, s.sched.calls)
	s.mu.Unlock()
}

// The memory of calls holds no request: one given up is collected, and
// its entry goes once the memory is full.
func TestPacerCallMemoryIsWeak(t *testing.T) {
	_, s := engagedKey(t)
	for i := 0; i < maxCalls; i++ {
		req, err := http.NewRequest("GET", "http://api.example/", nil)
		require.NoError(t, err)
		s.remember(req, pacerEpoch, pacerEpoch)
	}
	runtime.GC()
	kept := hostRequest(t, "api.example")
	s.remember(kept, pacerEpoch, pacerEpoch)
	s.mu.Lock()
	n := len(s.sched.calls)
	s.mu.Unlock()
	assert.Less(t, n, maxCalls, "collected requests were forgotten")
	assert.Equal(t, pacerEpoch, s.callOf(kept, pacerEpoch.Add(time.Second)))
	runtime.KeepAlive(kept)
}
