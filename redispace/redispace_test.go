package redispace

import (
	"context"
	"errors"
	"net"
	"net/http"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/backoff-jitter/retry"
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

func rate(t *testing.T, rdb *redis.Client, key string) float64 {
	t.Helper()
	v, err := rdb.HGet(context.Background(), defaultPrefix+key, "rate").Float64()
	if err != nil && !errors.Is(err, redis.Nil) {
		t.Fatal(err)
	}
	return v
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
	if r := rate(t, rdb, "api.example"); r != 0 {
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
	// 20 attempts, 10 accepted: then a throttle from a.
	var turns []retry.Turn
	for i := 0; i < 20; i++ {
		turn, _ := wait(t, a, req)
		turns = append(turns, turn)
	}
	for _, tn := range turns[:10] {
		tn.Done(retry.Feedback{Class: retry.Success})
	}
	turns[10].Done(retry.Feedback{Class: retry.Throttled})
	r := rate(t, rdb, "api.example")
	if r <= 0 {
		t.Fatal("the throttle did not engage the key")
	}
	// The rest of the burst was paced before the cut: it cuts nothing.
	for _, tn := range turns[11:] {
		tn.Done(retry.Feedback{Class: retry.Throttled})
	}
	if r2 := rate(t, rdb, "api.example"); r2 != r {
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

// A throttle of an attempt paced at the rate in force cuts again, no
// further than 0.9 times the accepted rate; successes grow it back.
func TestCutsAndGrowth(t *testing.T) {
	rdb, _ := startRedis(t)
	p := &Pacer{Client: rdb}
	req := request(t, "api.example")
	turn, _ := wait(t, p, req)
	turn.Done(retry.Feedback{Class: retry.Throttled})
	r1 := rate(t, rdb, "api.example")
	if r1 <= 0 {
		t.Fatal("a throttle did not engage the key")
	}
	turn, _ = wait(t, p, req)
	turn.Done(retry.Feedback{Class: retry.Throttled})
	r2 := rate(t, rdb, "api.example")
	if !(r2 < r1) {
		t.Fatalf("rate %v after a throttle at the rate in force; want below %v", r2, r1)
	}
	// Ten seconds after the cut (set back in Redis), a success grows the
	// rate along the cubic curve.
	ctx := context.Background()
	cut, _ := rdb.HGet(ctx, defaultPrefix+"api.example", "cut").Int64()
	rdb.HSet(ctx, defaultPrefix+"api.example", "cut", cut-10_000_000, "measured", 1000)
	turn, _ = wait(t, p, req)
	turn.Done(retry.Feedback{Class: retry.Success})
	if r3 := rate(t, rdb, "api.example"); !(r3 > r2) {
		t.Errorf("rate %v after a success 10s after the cut; want above %v", r3, r2)
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
	if r := rate(t, rdb, "api.example"); r != 0 {
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
		for i := 0; i < 5; i++ {
			turn, d := wait(t, p, req)
			if d > time.Second {
				t.Fatalf("Wait took %v with Redis down", d)
			}
			turn.Done(retry.Feedback{Class: retry.Success})
		}
		if n := fallbacks.Load(); n != 1 {
			t.Errorf("OnFallback called %d times; want 1 (then the Pacer keeps to Fallback for RetryAfter)", n)
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
	if r := rate(t, rdb, ln.Addr().String()); r <= 0 || r > 40 {
		t.Errorf("the shared rate is %.1f/s; want engaged, near the server's 20/s", r)
	}
	t.Logf("30 requests, %d refused", refused.Load())
}
