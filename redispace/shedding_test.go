package redispace

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/backoff-jitter/retry"
	"github.com/redis/go-redis/v9"
)

// The scripts' binomial tails match term-by-term sums, on both sides of
// the mean and on both sides of the log-factorials' switch to Stirling's
// series.
func TestBinomialTails(t *testing.T) {
	rdb, _ := startRedis(t)
	script := redis.NewScript(binomial + `
local k, n, p = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
return {tostring(atLeast(k, n, p)), tostring(atMost(k, n, p))}
`)
	exact := func(k, n int, p float64) float64 { // P(X >= k)
		sum := 0.0
		for i := max(k, 0); i <= n; i++ {
			lg := func(x int) float64 { v, _ := math.Lgamma(float64(x + 1)); return v }
			sum += math.Exp(lg(n) - lg(i) - lg(n-i) + float64(i)*math.Log(p) + float64(n-i)*math.Log1p(-p))
		}
		return min(sum, 1)
	}
	for _, n := range []int{1, 5, 12, 15, 16, 40, 200, 1000} {
		for _, p := range []float64{0.01, 0.05, 0.25, 0.5, 0.9} {
			for _, k := range []int{0, 1, 2, n / 4, n / 2, n - 1, n} {
				res, err := script.Run(context.Background(), rdb, []string{"x"}, k, n, p).StringSlice()
				if err != nil {
					t.Fatal(err)
				}
				var least, most float64
				fmt.Sscan(res[0], &least)
				fmt.Sscan(res[1], &most)
				if want := exact(k, n, p); math.Abs(least-want) > 1e-8 {
					t.Errorf("atLeast(%d, %d, %v) = %v; want %v", k, n, p, least, want)
				}
				if want := 1 - exact(k+1, n, p); math.Abs(most-want) > 1e-8 {
					t.Errorf("atMost(%d, %d, %v) = %v; want %v", k, n, p, most, want)
				}
			}
		}
	}
}

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
	ctx := context.Background()
	h, err := rdb.HGetAll(ctx, defaultPrefix+"shed.example").Result()
	if err != nil {
		t.Fatal(err)
	}
	if h["rate"] != "0" {
		t.Errorf("rate %s after %d attempts refused 25%% at random; want 0 (idle)", h["rate"], n)
	}
	var share float64
	fmt.Sscan(h["share"], &share)
	// The share remembered is the one at the test's lower rate, counted
	// over a handful of outcomes (three refusals of six to twelve): 0.19
	// to 0.5 in 40 runs under -race, 0.33 in most.
	if share < 0.1 || share > 0.6 {
		t.Errorf("the share remembered is %v; want about 0.25 (0.1 to 0.6)", share)
	}
	if longest > 500*time.Millisecond {
		t.Errorf("an attempt waited %v for its turn; want a few milliseconds at most", longest)
	}
	// Idle, the same refusals engage nothing: every turn goes at once.
	_, longest = fleetRun(t, p, "shed.example", 8, 1000, 10*time.Second, shed, 0, nil)
	if r := rate(t, rdb, "shed.example"); r != 0 {
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
func TestLimitIsNoShedding(t *testing.T) {
	rdb, _ := startRedis(t)
	p := &Pacer{Client: rdb}
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
	h, err := rdb.HGetAll(context.Background(), defaultPrefix+"limit.example").Result()
	if err != nil {
		t.Fatal(err)
	}
	var r, share float64
	fmt.Sscan(h["rate"], &r)
	fmt.Sscan(h["share"], &share)
	if r < 0.5*limit || r > 1.5*limit {
		t.Errorf("rate %v after 2s against a limit of %v/s; want near the limit", r, limit)
	}
	if share != 0 {
		t.Errorf("a share of %v remembered; want none (a limit is no shedding)", share)
	}
	// Paced, the attempts are about the limit's: at most 2s × 200/s, the
	// burst and the first second's learning (a few hundred).
	mu.Lock()
	defer mu.Unlock()
	if n > 1000 {
		t.Errorf("%d attempts in 2s against %v/s (%d refused); want the key paced", n, limit, refused)
	}
}
