package redispace

import (
	"context"
	"errors"
	"math"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/backoff-jitter/retry"
)

// outageThen answers as a server that accepts what tb accepts, but
// refuses everything from half a second to two and a half seconds from
// now (an outage); it counts in after the successes once the outage is
// over.
func outageThen(tb *tokenBucket, after *atomic.Int64) func() retry.Class {
	start := time.Now()
	return func() retry.Class {
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
}

// After an outage (every request refused for two seconds, as a load
// balancer's 503s during a deploy), the fleet starts afresh, in slow
// start, instead of growing back from the rate the outage's refusals cut
// it to: a token bucket of 200/s is used at its rate within the second
// after. Without the outage rule, 6 successes in that second, of 220
// allowed (and 46-47 in 2 s, of 420, in a longer run of the scenario).
func TestOutageRestarts(t *testing.T) {
	rdb, _ := startRedis(t)
	p := &Pacer{Client: rdb}
	const limit, burst = 200.0, 20.0
	tb := newTokenBucket(limit, burst)
	var after atomic.Int64
	answer := outageThen(tb, &after)
	fleetRun(t, p, "outage.example", 8, math.MaxInt, 3500*time.Millisecond, answer, 0, nil)
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
		if rate(t, rdb, "window.example") > 0 {
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

// Once the key's first throttle has found the server's bucket empty, and
// while the fleet keeps it empty, the rate accepted is the successes
// since over the time since, not the bucket's: a fixed window's quota,
// accepted at once, read as 20/t over the bucket so far, and the rate
// fell as 18/t through the silence that followed (100 to 130 refusals in
// the first second of TestWindowLimitIsNoOutage's scenario; 50 to 80
// since).
func TestDrainedBucketBoundsTheCut(t *testing.T) {
	rdb, p, _, key := engagedPacer(t)
	ctx := context.Background()
	now := redisNow(t, rdb)
	gen, err := rdb.HGet(ctx, key, "gen").Int64()
	if err != nil {
		t.Fatal(err)
	}
	// 20 accepted in the bucket's first 100 ms, then the key's first
	// throttle (100 ms ago) and 20 refusals since; a lone throttle let
	// pass just now, so that the next one cuts.
	rdb.HSet(ctx, key, "rate", 150, "since", now-100_000, "ok", 20, "prevOk", -1, "measured", 0, "accepted", 0,
		"drained", now-100_000, "drOk", 0, "drRef", 20, "strike", now, "cutsOk", 1, "stAfter", 1, "okOnce", 1)
	if _, err := p.run(ctx, feedbackScript, key, "throttled", gen, -1, p.minRate(), keyTTL.Milliseconds(), 0, 0); err != nil {
		t.Fatal(err)
	}
	// Without the bound: min(0.9 × 150, max(20 / 0.1 s, 75)) = 135/s.
	// With it: min(135, max(8 / 0.1 s, 75)) = 80/s.
	if r := rate(t, rdb, "api.example"); r < 70 || r > 90 {
		t.Errorf("cut from 150/s to %v/s, 20 refused and none accepted in the 0.1 s since the bucket went empty; want about 80/s", r)
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

// After an outage, against a strict limit (a token bucket of 50/s without
// burst), with 16 workers whose calls have 1 s deadlines, the fleet
// restarts and is paced near the limit again. Three things failed here:
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
	fleetRun(t, p, "strict.example", 16, math.MaxInt, 4*time.Second, answer, 0, nil)
	if r := rate(t, rdb, "strict.example"); r < 10 {
		t.Errorf("rate %v after the outage, against a limit of 50/s; want the key engaged near it", r)
	}
	if n := after.Load(); n < 50 {
		t.Errorf("%d successes in the 1.5 s after the outage, against a limit of 50/s; want 50 at least (%d fallbacks)", n, fallbacks.Load())
	}
}

// A turn given back from the middle of the queue (its attempt's deadline
// came first) is taken by the next caller while it is still to come,
// instead of staying spent; and a wait past the caller's deadline takes
// no turn at all.
func TestGivenBackTurnIsTaken(t *testing.T) {
	rdb, p, _, key := engagedPacer(t)
	ctx := context.Background()
	rdb.HSet(ctx, key, "rate", 10, "head", 0, "tail", 0)
	var turns []reservation
	for range 4 {
		r, err := p.reserve(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		turns = append(turns, r)
	}
	if _, err := p.run(ctx, cancelScript, key, turns[1].n, 0); err != nil {
		t.Fatal(err)
	}
	r, err := p.reserve(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if r.n != turns[1].n {
		t.Errorf("took turn %d after turn %d was given back (the tail is %d); want %d", r.n, turns[1].n, turns[3].n+1, turns[1].n)
	}
	short, cancel := context.WithTimeout(ctx, 150*time.Millisecond)
	defer cancel()
	if r, err := p.reserve(short, key); err != nil || r.wait != -2 {
		t.Fatalf("reserve with 150ms left, the next turn 400ms away = %+v, %v; want refused (-2)", r, err)
	}
	if r, err := p.reserve(ctx, key); err != nil || r.n != turns[3].n+1 {
		t.Errorf("the turn after a refused one is %d, %v; want %d (the refusal took none)", r.n, err, turns[3].n+1)
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
	if r := rate(t, rdb, "api.example"); r < 100 {
		t.Errorf("engaged at %v/s by a hint after 20 turns at once; want 200/s (20 over a tenth of a second)", r)
	}
}

// While a key holds its rate through an outage, a wait past the deadline
// is no forecast (the rate held is a probe's, and the first success
// restarts the key): the attempt takes no turn and asks again until the
// hold ends, instead of failing at once. Once the hold ends, the wait is
// a forecast again, and refused.
func TestHeldWaitAsksAgain(t *testing.T) {
	for _, tc := range []struct {
		name  string
		end   []any // what the hold's end sets
		fails bool  // whether the wait is refused then
	}{
		{"restarted", []any{"rate", 0, "holding", 0}, false},
		{"limited", []any{"holding", 0}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rdb, p, req, key := engagedPacer(t)
			ctx := context.Background()
			rdb.HSet(ctx, key, "rate", 1, "head", 0, "tail", 0, "holding", 1)
			for range 10 {
				if _, err := p.reserve(ctx, key); err != nil {
					t.Fatal(err)
				}
			}
			var polls []time.Duration
			p.sleep = func(_ context.Context, d time.Duration) error {
				if len(polls) == 2 {
					rdb.HSet(ctx, key, tc.end...)
				}
				polls = append(polls, d)
				return nil
			}
			short, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			turn, err := p.Wait(short, req)
			if len(polls) != 3 {
				t.Errorf("asked again %d times (%v); want 3, until the hold ended", len(polls), polls)
			}
			for _, d := range polls {
				if d < heldPoll/2 || d > heldPoll {
					t.Errorf("asked again after %v; want %v to %v", d, heldPoll/2, heldPoll)
				}
			}
			if tc.fails {
				if !errors.Is(err, context.DeadlineExceeded) || turn != nil {
					t.Errorf("Wait = %v, %v once the hold ended, the queue 10 s long; want refused for the deadline", turn, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Wait = %v once the key restarted; want a turn", err)
			}
			turn.Done(retry.Feedback{Class: retry.Success})
		})
	}
}
