package redispace

import (
	"math"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/backoff-jitter/retry"
)

// After an outage (every request refused for two seconds, as a load
// balancer's 503s during a deploy), the fleet starts afresh, in slow
// start, instead of growing back from the rate the outage's refusals cut
// it to: a token bucket of 200/s is used at its rate within the second
// after. Before the outage rule, the fleet was paced at 20/s there, 47
// successes in the 2 s after against 420 allowed.
func TestOutageRestarts(t *testing.T) {
	rdb, _ := startRedis(t)
	p := &Pacer{Client: rdb}
	const limit, burst = 200.0, 20.0
	tb := newTokenBucket(limit, burst)
	start := time.Now()
	var after atomic.Int64
	answer := func() retry.Class {
		switch el := time.Since(start); {
		case el > 500*time.Millisecond && el < 2500*time.Millisecond:
			return retry.Throttled // the outage
		case !tb.take():
			return retry.Throttled
		case el >= 2500*time.Millisecond:
			after.Add(1)
		}
		return retry.Success
	}
	fleetRun(t, p, "outage.example", 8, math.MaxInt, 3500*time.Millisecond, answer, 0, nil)
	if n := after.Load(); n < 150 {
		t.Errorf("%d successes in the second after a 2 s outage, against a limit that allows %d; want the fleet restarted", n, int(limit+burst))
	}
}

// A window limiter, which admits its quota at the start of each second
// and refuses the rest, is silent for most of each second: that is no
// outage. The fleet stays engaged, paced near the quota, instead of
// restarting in slow start every second (restarted by half a second of
// silence, it was refused 384 times for 88 successes in 4 s).
func TestWindowLimitIsNoOutage(t *testing.T) {
	rdb, _ := startRedis(t)
	p := &Pacer{Client: rdb}
	const quota = 20
	var mu sync.Mutex
	start := time.Now()
	window, used := int64(-1), 0
	var ok, refused atomic.Int64
	answer := func() retry.Class {
		mu.Lock()
		defer mu.Unlock()
		if w := int64(time.Since(start) / time.Second); w != window {
			window, used = w, 0
		}
		if used >= quota {
			refused.Add(1)
			return retry.Throttled
		}
		used++
		ok.Add(1)
		return retry.Success
	}
	engaged, idle := false, 0
	fleetRun(t, p, "window.example", 8, math.MaxInt, 3*time.Second, answer, 20*time.Millisecond, func() {
		if rate(t, rdb, "window.example") > 0 {
			engaged = true
		} else if engaged {
			idle++
		}
	})
	if !engaged || idle > 0 {
		t.Errorf("engaged %v, then seen idle %d times; want engaged throughout, once the quota was found", engaged, idle)
	}
	if k, n := refused.Load(), ok.Load(); k > 2*n {
		t.Errorf("%d refused for %d successes; want fewer than twice as many", k, n)
	}
}

// A key refused from its first attempt on, nothing ever accepted (an
// outage from the start, or a quota spent), holds its rate at a quarter
// of the rate its first cut set, probing, instead of being cut on to
// MinRate: the rate says nothing of the server, and the requests waiting
// for turns would be pushed past their deadlines.
func TestNeverAcceptedHolds(t *testing.T) {
	rdb, _ := startRedis(t)
	p := &Pacer{Client: rdb, InitialWindow: -1}
	first, lowest := 0.0, 0.0
	fleetRun(t, p, "down.example", 8, math.MaxInt, 2*time.Second, func() retry.Class { return retry.Throttled }, 10*time.Millisecond, func() {
		r := rate(t, rdb, "down.example")
		if r > 0 && first == 0 {
			first = r
		}
		if r > 0 && (lowest == 0 || r < lowest) {
			lowest = r
		}
	})
	if first == 0 {
		t.Fatal("the key never engaged")
	}
	if lowest < 0.25*first*0.99 {
		t.Errorf("rate cut to %v, from a first cut to %v; want a quarter of it at least (%v)", lowest, first, 0.25*first)
	}
	if lowest > 0.5*first {
		t.Errorf("rate %v at its lowest, from a first cut to %v; want the refusals to cut it", lowest, first)
	}
}
