package redispace

import (
	"context"
	"math"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/backoff-jitter/retry"
	"github.com/backoff-jitter/retry/internal/pacecore"
)

// outageThen answers as a server that accepts what tb accepts, but
// refuses everything from one second to three seconds from now (an
// outage); it counts in after the successes once the outage is over. The
// outage begins after the key's first half-second: a silence that comes
// before any rate of successes was measured cannot be told from a cold
// start's refusals, and is no outage (see package pace's rules).
func outageThen(tb *tokenBucket, after *atomic.Int64) func() retry.Class {
	start := time.Now()
	return func() retry.Class {
		switch el := time.Since(start); {
		case el > time.Second && el < 3*time.Second:
			return retry.Throttled // the outage
		case !tb.take():
			return retry.Throttled
		case el >= 3*time.Second:
			after.Add(1)
		}
		return retry.Success
	}
}

// After an outage (every request refused for two seconds, as a load
// balancer's 503s during a deploy), the fleet starts afresh, in slow
// start, instead of growing back from the rate the outage's refusals cut
// it to: a token bucket of 200/s is used at its rate within the second
// after. Once the silence is as long as an outage's, the rate holds,
// probing, so that the first probe after the outage comes within a turn
// and the waiting calls keep within their deadlines: cut on through the
// outage instead, to about 1/s, the fleet made 11 successes in that
// second, package pace's Pacer 49.
func TestOutageRestarts(t *testing.T) {
	rdb, _ := startRedis(t)
	p := &Pacer{Client: rdb}
	const limit, burst = 200.0, 20.0
	tb := newTokenBucket(limit, burst)
	var after atomic.Int64
	answer := outageThen(tb, &after)
	fleetRun(t, p, "outage.example", 8, math.MaxInt, 4*time.Second, answer, 0, nil)
	if n := after.Load(); n < 150 {
		t.Errorf("%d successes in the second after a 2 s outage, against a limit that allows %d; want the fleet restarted", n, int(limit+burst))
	}
}

// A window limiter, which admits its quota at the start of each second
// and refuses the rest, is silent for most of each second: that is no
// outage. The fleet stays engaged, paced near the quota, instead of
// restarting in slow start every second (restarted by half a second of
// silence, it was refused 319 times for 68 successes in these 3 s, about
// a hundred times a window).
//
// The windows are judged one by one, not by a ratio over the run: the
// successes of the run's last, partial window depend on how the workers'
// last turns straddle its start, and a slow machine (CI under -race) once
// counted 59 instead of 68, against 122 refusals.
func TestWindowLimitIsNoOutage(t *testing.T) {
	rdb, _ := startRedis(t)
	p := &Pacer{Client: rdb}
	const quota, windows = 20, 3
	var mu sync.Mutex
	start := time.Now()
	var ok, refused [windows + 2]int
	answer := func() retry.Class {
		mu.Lock()
		defer mu.Unlock()
		w := min(int(time.Since(start)/time.Second), len(ok)-1)
		if ok[w] >= quota {
			refused[w]++
			return retry.Throttled
		}
		ok[w]++
		return retry.Success
	}
	engaged, idle := false, 0
	fleetRun(t, p, "window.example", 8, math.MaxInt, windows*time.Second, answer, 20*time.Millisecond, func() {
		if rate(t, p, "window.example") > 0 {
			engaged = true
		} else if engaged {
			idle++
		}
	})
	mu.Lock()
	defer mu.Unlock()
	t.Logf("per window: %v successes, %v refused", ok, refused)
	if !engaged || idle > 0 {
		t.Errorf("engaged %v, then seen idle %d times; want engaged throughout, once the quota was found", engaged, idle)
	}
	// The first window pays for finding the quota: the fleet's first
	// burst, and a rate bounded by the successes over the time since
	// (20/t) until the window ends.
	if refused[0] > 200 {
		t.Errorf("%d refused in the first window; want at most 200", refused[0])
	}
	// Each whole window after it: paced near the quota, refused a few
	// times at its end, not restarted. The silence's end resumes the
	// rate at 0.9 of what the windows accepted (16 to 20 successes in the
	// second window, 18 to 20 in the third; 10 to 12 in each without).
	for w := 1; w < windows; w++ {
		if ok[w] < 2*quota/3 || refused[w] > 10 {
			t.Errorf("window %d: %d successes and %d refused; want %d successes at least and 10 refused at most", w, ok[w], refused[w], 2*quota/3)
		}
	}
}

// A key refused from its first attempt on, nothing ever accepted (an
// outage from the start, or a quota spent), is cut, but holds its rate
// at a quarter of the rate its first cut set at most (sooner, once the
// silence has lasted an outage's half second), probing, instead of being
// cut on to MinRate: the rate says nothing of the server, and the
// requests waiting for turns would be pushed past their deadlines.
func TestNeverAcceptedHolds(t *testing.T) {
	rdb, _ := startRedis(t)
	p := &Pacer{Client: rdb, InitialWindow: -1}
	first, lowest := 0.0, 0.0
	fleetRun(t, p, "down.example", 8, math.MaxInt, 2*time.Second, func() retry.Class { return retry.Throttled }, 10*time.Millisecond, func() {
		r := rate(t, p, "down.example")
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
	if lowest >= first {
		t.Errorf("rate %v at its lowest, from a first cut to %v; want the refusals to cut it", lowest, first)
	}
}

// After an outage, against a strict limit (a token bucket of 50/s without
// burst), with 16 workers whose calls have 1 s deadlines, the fleet
// restarts and is paced near the limit again. Four things failed here:
// the outage's cuts took the rate to about 1/s, and the calls waiting for
// turns failed on their deadlines, so that no probe found the server
// back for seconds (see TestOutageRestarts);
// turns refused for the deadline, and turns a cut pushed past it, stayed
// spent in the middle of the queue and held it out of every deadline (no
// attempt for 1.4 s; with callers that call again at once, for as long as
// they do);
// the turns waiting at the restart left all at once instead of taking
// slots of slow start; and the first refusal then engaged the key from a
// bucket that counted none of them, at the lowest rate.
func TestRestartAgainstALimit(t *testing.T) {
	rdb, _ := startRedis(t)
	var fallbacks atomic.Int64
	p := &Pacer{Client: rdb, OnFallback: func(error) { fallbacks.Add(1) }}
	tb := newTokenBucket(50, 1)
	var after atomic.Int64
	answer := outageThen(tb, &after)
	fleetRun(t, p, "strict.example", 16, math.MaxInt, 4500*time.Millisecond, answer, 0, nil)
	if r := rate(t, p, "strict.example"); r < 10 {
		t.Errorf("rate %v after the outage, against a limit of 50/s; want the key engaged near it", r)
	}
	if n := after.Load(); n < 50 {
		t.Errorf("%d successes in the 1.5 s after the outage, against a limit of 50/s; want 50 at least (%d fallbacks)", n, fallbacks.Load())
	}
}

// A server's hint (Retry-After, or a quota spent) on a key in its first
// second engages it at the rate the fleet was sending at, read over the
// bucket so far, not at MinRate: the smoothed rate is not measured yet,
// and a curve scaled to MinRate takes seconds to grow back.
func TestHintOnAFreshKeyEngagesAtItsRate(t *testing.T) {
	rdb, _ := startRedis(t)
	p := &Pacer{Client: rdb, InitialWindow: -1}
	req := request(t, "api.example")
	var turns []retry.Turn
	for range 20 {
		turn, _ := wait(t, p, req)
		turns = append(turns, turn)
	}
	turns[0].Done(retry.Feedback{Class: retry.Success, Wait: time.Millisecond, Hinted: true})
	if r := rate(t, p, "api.example"); r < 100 {
		t.Errorf("engaged at %v/s by a hint after 20 turns at once; want 200/s (20 over a tenth of a second)", r)
	}
}

// Before a key's first success its waits past a deadline are held, as
// while it holds through an outage (package pacecore's reserve), and the
// mirror says so: the waiters read it, and wait on without a step, as
// they do for a hold. Mirrored as paced, every waiter of a storm's cold
// outage stepped the state at each poll, and the fleet's writes refused
// each other. A success ends it.
func TestColdKeyWaitsAreHeldWithoutAStep(t *testing.T) {
	rdb, _ := startRedis(t)
	p := &Pacer{Client: rdb, InitialWindow: -1}
	req := request(t, "cold.example")
	key := p.prefix() + p.key(req)
	engageKey(t, p, req) // three refusals, no success
	ctx := context.Background()
	mode := func() string {
		t.Helper()
		m, err := rdb.HGet(ctx, key, "m").Result()
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	if m := mode(); m != strconv.Itoa(int(pacecore.ModeHeld)) {
		t.Fatalf("mode mirrored as %s with no success yet; want held (%d)", m, pacecore.ModeHeld)
	}
	if ready, err := p.ready(ctx, key, "hold"); err != nil || ready {
		t.Fatalf("a held waiter told to step (%v, %v); want to wait on", ready, err)
	}
	turn, _ := wait(t, p, req)
	turn.Done(retry.Feedback{Class: retry.Success})
	if m := mode(); m != strconv.Itoa(int(pacecore.ModePaced)) {
		t.Errorf("mode mirrored as %s after a success; want paced (%d)", m, pacecore.ModePaced)
	}
	if ready, err := p.ready(ctx, key, "hold"); err != nil || !ready {
		t.Errorf("a held waiter told to wait on after a success (%v, %v); want it to step", ready, err)
	}
}
