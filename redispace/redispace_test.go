package redispace

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/backoff-jitter/retry"
	"github.com/backoff-jitter/retry/internal/pacecore"
	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"
)

// TestMain fails the tests when a goroutine outlives them, and silences
// go-redis's logger (a Redis down on purpose makes it log): the tests
// print nothing.
func TestMain(m *testing.M) {
	redis.SetLogger(quiet{})
	goleak.VerifyTestMain(m)
}

type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}

func request(t *testing.T, host string) *http.Request {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, "http://"+host+"/", nil)
	if err != nil {
		t.Fatal(err)
	}
	return req
}

// rate returns the rate p's fleet paces key at, 0 when not engaged.
func rate(t *testing.T, p *Pacer, key string) float64 {
	t.Helper()
	// The tests' own read of the state: on a loaded machine Redis may
	// answer it after the Pacer's Timeout, which is not what they test.
	var r float64
	var engaged bool
	var err error
	for range 5 {
		if r, engaged, err = p.Rate(context.Background(), key); !errors.Is(err, errTimeout) {
			break
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	if !engaged {
		return 0
	}
	return r
}

// refusalsToEngage throttles in a row engage a key whose CUSUM is at zero
// (after successes), coldRefusalsToEngage a new key: package pace's rules.
const (
	refusalsToEngage     = 7
	coldRefusalsToEngage = 3
)

// engageKey engages req's key, new: three throttles of its first three
// answers.
func engageKey(t *testing.T, p *Pacer, req *http.Request) {
	t.Helper()
	for range coldRefusalsToEngage {
		turn, _ := wait(t, p, req)
		turn.Done(retry.Feedback{Class: retry.Throttled})
	}
	if r := rate(t, p, p.key(req)); r <= 0 {
		t.Fatal("three throttles of a new key's three answers did not engage it")
	}
}

func wait(t *testing.T, p *Pacer, req *http.Request) (retry.Turn, time.Duration) {
	t.Helper()
	start := time.Now()
	turn, err := p.Wait(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	return turn, time.Since(start)
}

// A key nobody throttled is not paced.
func TestIdleKeyIsNotPaced(t *testing.T) {
	rdb, _ := startRedis(t)
	p := &Pacer{Client: rdb}
	req := request(t, "api.example")
	for i := 0; i < 50; i++ {
		turn, d := wait(t, p, req)
		if d > 100*time.Millisecond {
			t.Fatalf("turn %d waited %v", i, d)
		}
		turn.Done(retry.Feedback{Class: retry.Success})
	}
	if r := rate(t, p, "api.example"); r != 0 {
		t.Errorf("rate %v; want 0 (not engaged)", r)
	}
}

// One process's throttle engages the key for every process: two Pacers on
// one Redis (as two processes) share one rate and one schedule. A burst of
// throttles of attempts paced at one rate cuts once.
func TestFleetSharesRateAndTurns(t *testing.T) {
	rdb, _ := startRedis(t)
	a, b := &Pacer{Client: rdb, InitialWindow: -1}, &Pacer{Client: rdb, InitialWindow: -1}
	req := request(t, "api.example")
	// 20 attempts, 10 accepted: then throttles from a, seven in a row
	// (see refusalsToEngage) engaging the key.
	var turns []retry.Turn
	for i := 0; i < 20; i++ {
		turn, _ := wait(t, a, req)
		turns = append(turns, turn)
	}
	for _, tn := range turns[:10] {
		tn.Done(retry.Feedback{Class: retry.Success})
	}
	for i, tn := range turns[10 : 10+refusalsToEngage] {
		tn.Done(retry.Feedback{Class: retry.Throttled})
		if r := rate(t, a, "api.example"); (r > 0) != (i == refusalsToEngage-1) {
			t.Fatalf("rate %v after %d throttles following 10 successes; want engaged on the %dth", r, i+1, refusalsToEngage)
		}
	}
	r := rate(t, a, "api.example")
	// The rest of the burst was paced before the cut: it cuts nothing.
	for _, tn := range turns[10+refusalsToEngage:] {
		tn.Done(retry.Feedback{Class: retry.Throttled})
	}
	if r2 := rate(t, a, "api.example"); r2 != r {
		t.Errorf("rate %v after the burst's other throttles; want %v (one cut a burst)", r2, r)
	}
	// b takes turns from the same schedule: spaced at the shared rate.
	interval := time.Duration(float64(time.Second) / r)
	start := time.Now()
	for i := 0; i < 3; i++ {
		if i%2 == 0 {
			wait(t, a, req)
		} else {
			wait(t, b, req)
		}
	}
	if d := time.Since(start); d < 2*interval-interval/2 {
		t.Errorf("3 turns from two Pacers took %v; want about %v at the shared rate %.1f/s", d, 2*interval, r)
	}
}

// A key new to the fleet is in slow start: at most InitialWindow attempts
// unanswered at once, one slot more per answer, until a throttle.
func TestSlowStart(t *testing.T) {
	rdb, _ := startRedis(t)
	p := &Pacer{Client: rdb, InitialWindow: 2}
	req := request(t, "api.example")
	a, _ := wait(t, p, req)
	b, _ := wait(t, p, req)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if _, err := p.Wait(ctx, req); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a third attempt with two unanswered: %v; want it to wait for a slot", err)
	}
	a.Done(retry.Feedback{Class: retry.Success}) // a slot back, and one more
	c, _ := wait(t, p, req)
	d, _ := wait(t, p, req)
	b.Abandon()
	e, _ := wait(t, p, req)
	for _, tn := range []retry.Turn{c, d, e} {
		tn.Done(retry.Feedback{Class: retry.Success})
	}
	if r := rate(t, p, "api.example"); r != 0 {
		t.Errorf("rate %v in slow start; want 0", r)
	}
}

// The server's requested wait pauses the key for the fleet; a turn past
// the caller's deadline is refused at once and given back.
func TestServerWaitAndDeadline(t *testing.T) {
	rdb, _ := startRedis(t)
	p := &Pacer{Client: rdb}
	req := request(t, "api.example")
	turn, _ := wait(t, p, req)
	turn.Done(retry.Feedback{Class: retry.Throttled, Wait: 30 * time.Second, Hinted: true})
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	start := time.Now()
	_, err := p.Wait(ctx, req)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Wait = %v; want a refusal wrapping context.DeadlineExceeded", err)
	}
	if d := time.Since(start); d > 500*time.Millisecond {
		t.Errorf("the refusal took %v; want it at once", d)
	}
}

// Redis that is down or slow never fails a call nor holds it: the Pacer
// turns to its Fallback within Timeout, says so, and keeps to it for
// RetryAfter.
func TestFallback(t *testing.T) {
	t.Run("down", func(t *testing.T) {
		ln, _ := net.Listen("tcp", "127.0.0.1:0")
		addr := ln.Addr().String()
		ln.Close()
		rdb := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
		defer rdb.Close()
		var fallbacks atomic.Int32
		p := &Pacer{Client: rdb, OnFallback: func(error) { fallbacks.Add(1) }}
		req := request(t, "api.example")
		for i := 0; i < 2*tripAfter; i++ {
			turn, d := wait(t, p, req)
			if d > time.Second {
				t.Fatalf("Wait took %v with Redis down", d)
			}
			turn.Done(retry.Feedback{Class: retry.Success})
		}
		// go-redis may spend past Timeout retrying a refused dial, so the
		// refusal can look like slowness: the Pacer trips by the
		// tripAfter-th failure at the latest.
		if n := fallbacks.Load(); n < 1 || n > tripAfter {
			t.Errorf("OnFallback called %d times; want 1 to %d (then the Pacer keeps to Fallback for RetryAfter)", n, tripAfter)
		}
	})
	t.Run("slow", func(t *testing.T) {
		// A server that accepts and never answers.
		ln, _ := net.Listen("tcp", "127.0.0.1:0")
		defer ln.Close()
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				defer c.Close()
			}
		}()
		rdb := redis.NewClient(&redis.Options{Addr: ln.Addr().String(), MaxRetries: -1})
		defer rdb.Close()
		var fallbacks atomic.Int32
		p := &Pacer{Client: rdb, Timeout: 100 * time.Millisecond, OnFallback: func(error) { fallbacks.Add(1) }}
		_, d := wait(t, p, request(t, "api.example"))
		if d > time.Second {
			t.Errorf("Wait took %v with Redis silent; want about Timeout (100ms)", d)
		}
		if fallbacks.Load() != 1 {
			t.Errorf("OnFallback called %d times; want 1", fallbacks.Load())
		}
	})
}

// Through a retry.Transport: two Transports (two processes) share the
// Pacer's rate against a server that allows 20 requests a second; together
// they are refused less than two Transports with a Pacer each.
func TestTwoTransportsShareOneRate(t *testing.T) {
	rdb, _ := startRedis(t)
	var refused, served atomic.Int64
	var last atomic.Int64 // the last admission, Unix nanoseconds
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// A strict limiter: one request each 50ms.
		now := time.Now().UnixNano()
		prev := last.Load()
		if now-prev < int64(50*time.Millisecond) || !last.CompareAndSwap(prev, now) {
			refused.Add(1)
			w.WriteHeader(http.StatusTooManyRequests)
			return
		}
		served.Add(1)
	})}
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	go srv.Serve(ln)
	defer srv.Close()
	url := "http://" + ln.Addr().String() + "/"
	done := make(chan error, 2)
	for i := 0; i < 2; i++ {
		p := &Pacer{Client: rdb} // each "process" its own Pacer, one Redis
		rt := retry.New(nil, retry.WithPacer(p), retry.WithMaxAttempts(50), retry.WithBudget(retry.NoBudget),
			retry.WithBackoff(retry.Exponential{Base: 10 * time.Millisecond, Cap: 200 * time.Millisecond, Jitter: retry.FullJitter}))
		go func() {
			defer rt.CloseIdleConnections()
			for j := 0; j < 15; j++ {
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
				req.Header.Set("X-Client", strconv.Itoa(i))
				resp, err := rt.RoundTrip(req)
				cancel()
				if err != nil {
					done <- err
					return
				}
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					done <- errors.New(resp.Status)
					return
				}
			}
			done <- nil
		}()
	}
	for i := 0; i < 2; i++ {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	if served.Load() != 30 {
		t.Errorf("%d requests served; want 30", served.Load())
	}
	if r := rate(t, &Pacer{Client: rdb}, ln.Addr().String()); r <= 0 || r > 40 {
		t.Errorf("the shared rate is %.1f/s; want engaged, near the server's 20/s", r)
	}
	t.Logf("30 requests, %d refused", refused.Load())
}

// A call that outlives Timeout paces its attempt with Fallback but does
// not leave Redis for the whole process; and a write that outlives it
// (a slot of slow start taken for an attempt that went on with Fallback)
// is undone when it lands: a slot left held would narrow the window for
// the fleet. Redis is made slow with CLIENT PAUSE, which holds scripts
// that write.
func TestSlowCallGivesItsSlotBack(t *testing.T) {
	needRealRedis(t, "CLIENT PAUSE")
	rdb, _ := startRedis(t)
	ctx := context.Background()
	var fallbacks atomic.Int32
	p := &Pacer{Client: rdb, Timeout: 50 * time.Millisecond, InitialWindow: 4, OnFallback: func(error) { fallbacks.Add(1) }}
	req := request(t, "api.example")
	key := defaultPrefix + "api.example"
	// Open the Pacer's connection and load the scripts before Redis
	// pauses, so that only the pause is slow; the turn holds a slot.
	first, _ := wait(t, p, req)
	// The test reads the state with a Pacer that waits out the pauses
	// (its reads, which refresh the key's time to live, write too).
	reader := &Pacer{Client: rdb, Timeout: 5 * time.Second, InitialWindow: 4}
	inflight := func() int {
		st := stateOf(t, reader, key)
		n, _, _ := st.Window()
		return n
	}
	if n := inflight(); n != 1 {
		t.Fatalf("inflight %d with one attempt unanswered; want 1", n)
	}

	pause := func() {
		t.Helper()
		if err := rdb.Do(ctx, "CLIENT", "PAUSE", 200, "WRITE").Err(); err != nil {
			t.Fatal(err)
		}
	}
	pause()
	turn, d := wait(t, p, req) // paced by Fallback after Timeout
	if d > time.Second {
		t.Errorf("Wait took %v with Redis paused; want about Timeout (50ms)", d)
	}
	turn.Done(retry.Feedback{Class: retry.Success}) // Fallback's turn
	if fallbacks.Load() != 1 {
		t.Fatalf("OnFallback called %d times; want 1", fallbacks.Load())
	}
	if p.usingFallback() {
		t.Error("one slow call turned the Pacer to Fallback; want it on Redis")
	}
	time.Sleep(250 * time.Millisecond) // the pause's end: Redis's own timer

	// A step whose write lands after Timeout: read, then Redis pauses.
	snap, _, err := p.load(ctx, key, opRead)
	if err != nil {
		t.Fatal(err)
	}
	pause()
	take := func(st *pacecore.State, now time.Time, n, ok int64) (pacecore.Effects, int64) {
		return next(st, now, pacecore.Event{Sent: n, OK: ok}, false, time.Time{})
	}
	if _, _, err := p.update(key, &snap, take, func(fx pacecore.Effects) { p.giveBack(key, fx) }); err != errTimeout {
		t.Fatalf("a write while Redis is paused: %v; want %v", err, errTimeout)
	}
	deadline := time.Now().Add(5 * time.Second)
	for reader.versionOf(t, key) < snap.version+2 { // the late write, and its undoing
		if time.Now().After(deadline) {
			t.Fatalf("inflight %d 5s after the pause ended; want the late write's slot given back", inflight())
		}
		time.Sleep(5 * time.Millisecond) // polling another process, Redis
	}
	if n := inflight(); n != 1 {
		t.Errorf("inflight %d after the late write and its undoing; want 1 (the first attempt's)", n)
	}
	first.Done(retry.Feedback{Class: retry.Success})
	if fallbacks.Load() != 1 {
		t.Errorf("OnFallback called %d times; want 1", fallbacks.Load())
	}
}

// versionOf returns the version of key's state in Redis.
func (p *Pacer) versionOf(t *testing.T, key string) int64 {
	t.Helper()
	snap, _, err := p.load(context.Background(), key, opRead)
	if err != nil {
		t.Fatal(err)
	}
	return snap.version
}

// Calls that keep outliving Timeout for tripAfter-1 Timeouts turn the
// Pacer to Fallback; many at one moment (a fleet's cold start) do not, nor
// do timeouts with an answer between them. An error trips it at once.
func TestTripOnLastingTimeouts(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	p := &Pacer{Timeout: 50 * time.Millisecond, now: func() time.Time { return now }}
	for range 10 { // ten calls time out together
		p.trip(errTimeout)
	}
	if p.usingFallback() {
		t.Fatal("tripped by timeouts all at one moment")
	}
	now = now.Add(60 * time.Millisecond)
	p.record(nil) // an answer
	for i := 1; i < tripAfter; i++ {
		p.trip(errTimeout)
		now = now.Add(50 * time.Millisecond)
	}
	if p.usingFallback() {
		t.Fatalf("tripped by %d timeouts after an answer; want %d", tripAfter-1, tripAfter)
	}
	p.trip(errTimeout)
	if !p.usingFallback() {
		t.Fatalf("not tripped by timeouts lasting %d Timeouts", tripAfter-1)
	}
	now = now.Add(defaultRetryAfter)
	if p.usingFallback() {
		t.Fatal("still on Fallback after RetryAfter")
	}
	q := &Pacer{now: func() time.Time { return now }}
	q.trip(errors.New("connection refused"))
	if !q.usingFallback() {
		t.Fatal("not tripped at once by an error that is not a timeout")
	}
}

// A throttle that Refusal says was not for the rate (a conflict) does not
// engage the key; an ordinary one does.
func TestRefusalIgnoresConflicts(t *testing.T) {
	rdb, _ := startRedis(t)
	notConflict := func(f retry.Feedback) bool { return f.Response == nil || f.Response.Header.Get("X-Conflict") == "" }
	p := &Pacer{Client: rdb, InitialWindow: -1, Refusal: notConflict}
	req := request(t, "api.example")
	conflict := &http.Response{StatusCode: http.StatusBadRequest, Header: http.Header{"X-Conflict": {"1"}}}
	for i := 0; i < 3; i++ {
		turn, _ := wait(t, p, req)
		turn.Done(retry.Feedback{Class: retry.Throttled, Response: conflict})
	}
	if r := rate(t, p, "api.example"); r != 0 {
		t.Fatalf("rate %v after three conflicts; want 0 (not engaged)", r)
	}
	for range 4 {
		turn, _ := wait(t, p, req)
		turn.Done(retry.Feedback{Class: retry.Throttled, Response: &http.Response{StatusCode: http.StatusTooManyRequests, Header: http.Header{}}})
	}
	if r := rate(t, p, "api.example"); r <= 0 {
		t.Error("four throttles of four answers did not engage the key")
	}
}

// A conflict's Retry-After is the request's own: it neither engages nor
// pauses the fleet's key, even from a slot of slow start (which reports
// every answer to Redis).
func TestRefusalIgnoresAHintedConflict(t *testing.T) {
	rdb, _ := startRedis(t)
	notConflict := func(f retry.Feedback) bool { return f.Response == nil || f.Response.Header.Get("X-Conflict") == "" }
	p := &Pacer{Client: rdb, InitialWindow: 4, Refusal: notConflict}
	req := request(t, "api.example")
	conflict := &http.Response{StatusCode: http.StatusBadRequest, Header: http.Header{"X-Conflict": {"1"}}}
	turn, _ := wait(t, p, req)
	turn.Done(retry.Feedback{Class: retry.Throttled, Response: conflict, Wait: 30 * time.Second, Hinted: true})
	if r := rate(t, p, "api.example"); r != 0 {
		t.Fatalf("rate %v after a hinted conflict; want 0 (not engaged)", r)
	}
	if turn, d := wait(t, p, req); d > 100*time.Millisecond {
		t.Errorf("the next turn waited %v after a conflict's 30s Retry-After; want no wait", d)
	} else {
		turn.Abandon()
	}
}

// A cut while an attempt waits for its turn voids the turn, as package
// pace's Pacer voids it: the attempt, looking at it halfway through a
// long wait, or as it goes after a short one, takes a new turn at the
// new rate instead of going at the old schedule's, among the new one's
// turns (which a limiter without a burst refuses).
func TestCutVoidsAWaitingTurn(t *testing.T) {
	for _, long := range []bool{true, false} {
		t.Run(fmt.Sprint("long ", long), func(t *testing.T) {
			rdb, _ := startRedis(t)
			// One fake clock for the process and for Redis, which only
			// the sleeps move: on the real one, a machine slow enough to
			// take half a second from engaging to the cut found the key
			// in an outage's silence, holding.
			clk := time.Now()
			p := &Pacer{Client: rdb, InitialWindow: -1, now: func() time.Time { return clk }, redisNow: func() time.Time { return clk }}
			req := request(t, "api.example")
			key := defaultPrefix + "api.example"
			engageKey(t, p, req)
			ctx := context.Background()
			cutter, err := p.Wait(ctx, req) // the cutter's own turn, first
			if err != nil {
				t.Fatal(err)
			}
			if long {
				// Turns far enough ahead (the key engaged at about 200/s)
				// that the waiter looks halfway.
				for range 30 {
					if _, _, err := p.take(ctx, key, false, false); err != nil {
						t.Fatal(err)
					}
				}
			}
			var slept []time.Duration
			p.sleep = func(_ context.Context, d time.Duration) error {
				if len(slept) == 0 {
					// While the waiter sleeps, an attempt paced at the
					// rate in force is refused: a cut.
					cutter.Done(retry.Feedback{Class: retry.Throttled})
				}
				slept = append(slept, d)
				clk = clk.Add(d)
				return nil
			}
			st := stateOf(t, p, key)
			before := st.Gen()
			got, err := p.Wait(ctx, req)
			if err != nil {
				t.Fatal(err)
			}
			st = stateOf(t, p, key)
			after := st.Gen()
			if after == before {
				t.Fatal("the throttle cut nothing")
			}
			if g := got.(*turn).gen; g != after {
				t.Errorf("the attempt went at a turn of generation %d; want the new schedule's, %d (slept %v)", g, after, slept)
			}
			if long {
				// Half the old wait, then a look that finds the turn void,
				// then the new turn, an interval or so after the cut: not
				// the whole old wait.
				var total time.Duration
				for _, d := range slept {
					total += d
				}
				if len(slept) == 0 || slept[0] <= recheckAbove/2 || total > slept[0]*3/2 {
					t.Errorf("slept %v; want half of a long wait, then a new turn", slept)
				}
			}
		})
	}
}
