package redispace

import (
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/backoff-jitter/retry"
)

// A server that refuses a quarter of the requests at random, whatever
// their rate, is no rate limit: the fleet's test of shedding finds the
// share as high at two lower rates, the key goes back to idle and
// remembers the share, and the refusals after that (no more than it)
// neither engage the key again nor make anyone wait. Without the test
// every second throttle within a second cut the rate, to the rate
// accepted over the last second, which fell with each cut (docs/fleet.md).
func TestSheddingIsNoLimit(t *testing.T) {
	rdb, _ := startRedis(t)
	p := &Pacer{Client: rdb, InitialWindow: -1}
	var mu sync.Mutex
	rnd := rand.New(rand.NewPCG(3, 4))
	shed := func() retry.Class {
		mu.Lock()
		defer mu.Unlock()
		if rnd.Float64() < 0.25 {
			return retry.Throttled
		}
		return retry.Success
	}
	n, longest := fleetRun(t, p, "shed.example", 8, 3000, 10*time.Second, shed, 0, nil)
	if r := rate(t, p, "shed.example"); r != 0 {
		t.Errorf("rate %v after %d attempts refused 25%% at random; want 0 (idle)", r, n)
	}
	if longest > 500*time.Millisecond {
		t.Errorf("an attempt waited %v for its turn; want a few milliseconds at most", longest)
	}
	// Idle, the same refusals engage nothing: every turn goes at once.
	_, longest = fleetRun(t, p, "shed.example", 8, 1000, 10*time.Second, shed, 0, nil)
	if r := rate(t, p, "shed.example"); r != 0 {
		t.Errorf("rate %v after 1000 more attempts refused 25%% at random; want 0 (idle)", r)
	}
	if longest > 250*time.Millisecond {
		t.Errorf("an attempt waited %v for its turn, idle; want no wait", longest)
	}
}

// A rate limit is no shedding: a token bucket of 200 requests a second
// with a burst of 20, behind which workers ask as fast as they can,
// refuses less as the rate falls toward it. The key stays engaged, near
// the limit, and remembers no share.
//
// Without slow start: with it, under load (the tests of other packages
// running beside it, -race), one run in six or eight began with the key
// gone idle, its cold burst's refusals found independent of the rate,
// and the limit's refusals after were then taken for the share found:
// the rate grew to 500/s and more, half refused. Package pace's Pacer,
// the same workers with a Redis round trip's delay each, did not, in 12
// runs; nor did the fleet without slow start, in 10.
func TestLimitIsNoShedding(t *testing.T) {
	rdb, _ := startRedis(t)
	p := &Pacer{Client: rdb, InitialWindow: -1}
	const limit, burst = 200.0, 20.0
	tb := newTokenBucket(limit, burst)
	refused := 0
	var mu sync.Mutex
	bucket := func() retry.Class {
		if tb.take() {
			return retry.Success
		}
		mu.Lock()
		refused++
		mu.Unlock()
		return retry.Throttled
	}
	n, _ := fleetRun(t, p, "limit.example", 8, 100000, 2*time.Second, bucket, 0, nil)
	if r := rate(t, p, "limit.example"); r < 0.5*limit || r > 1.5*limit {
		t.Errorf("rate %v after 2s against a limit of %v/s; want near the limit", r, limit)
	}
	// Paced, the attempts are about the limit's: at most 2s × 200/s, the
	// burst and the first second's learning (a few hundred).
	mu.Lock()
	defer mu.Unlock()
	if n > 1000 {
		t.Errorf("%d attempts in 2s against %v/s (%d refused); want the key paced", n, limit, refused)
	}
}
