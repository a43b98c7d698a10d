package retrytest_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/backoff-jitter/retry"
	"github.com/backoff-jitter/retry/retrytest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func transport(base http.RoundTripper, clock *retrytest.Clock) *retry.Transport {
	return retry.New(base, retry.WithClock(clock), retry.WithRandom(func() float64 { return 0.5 }))
}

// An unsent POST is retried with the same body; one written and then
// reset is not, since the server may have executed it; a GET is, either
// way. The clock records the waits, exactly.
func TestScriptSteps(t *testing.T) {
	for _, tc := range []struct {
		name     string
		method   string
		first    retrytest.Step
		attempts int
		reason   retry.StopReason
	}{
		{"POST unsent", http.MethodPost, retrytest.Unsent(nil), 2, retry.StopNone},
		{"POST written", http.MethodPost, retrytest.Written(nil), 1, retry.StopUnsafe},
		{"GET written", http.MethodGet, retrytest.Written(nil), 2, retry.StopNone},
		{"POST throttled", http.MethodPost, retrytest.Respond(503, "Retry-After", "2"), 2, retry.StopNone},
		{"POST refused stream", http.MethodPost, retrytest.RefusedStream(), 2, retry.StopNone},
		{"POST after GOAWAY", http.MethodPost, retrytest.GoAway(), 1, retry.StopUnsafe},
		{"GET after GOAWAY", http.MethodGet, retrytest.GoAway(), 2, retry.StopNone},
	} {
		t.Run(tc.name, func(t *testing.T) {
			script := retrytest.NewScript(tc.first, retrytest.Respond(200))
			clock := retrytest.NewClock(time.Now())
			var done retry.Summary
			rt := retry.New(script, retry.WithClock(clock), retry.WithRandom(func() float64 { return 0.5 }),
				retry.WithOnDone(func(s retry.Summary) { done = s }))
			req, err := http.NewRequest(tc.method, "http://api.example/orders", strings.NewReader("order 1"))
			if err != nil {
				t.Fatal(err)
			}
			resp, err := rt.RoundTrip(req)
			if err == nil {
				resp.Body.Close()
			}
			attempts := script.Attempts()
			if len(attempts) != tc.attempts || done.Reason != tc.reason {
				t.Fatalf("%d attempts, reason %v (error %v); want %d, %v", len(attempts), done.Reason, err, tc.attempts, tc.reason)
			}
			for i, a := range attempts {
				if string(a.Body) != "order 1" || a.Method != tc.method {
					t.Errorf("attempt %d sent %s %q; want %s %q", i+1, a.Method, a.Body, tc.method, "order 1")
				}
			}
			if tc.attempts == 2 {
				want := 50 * time.Millisecond // full jitter of 100ms at u = 0.5
				if tc.name == "POST throttled" {
					want = 2 * time.Second
				}
				if w := clock.Waits(); len(w) != 1 || w[0] != want {
					t.Errorf("waits %v; want [%v]", w, want)
				}
			}
		})
	}
}

// Executions counts per Idempotency-Key over a real server: a POST with a
// key is retried after a reset, and the server sees it twice, which is
// what the key is for; without a key it is never sent twice.
func TestExecutions(t *testing.T) {
	var mu sync.Mutex
	first := map[string]bool{}
	ex := &retrytest.Executions{Next: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key := r.Header.Get("Idempotency-Key")
		mu.Lock()
		seen := first[key]
		first[key] = true
		mu.Unlock()
		if !seen {
			// Executed, then the connection is dropped before the answer.
			panic(http.ErrAbortHandler)
		}
		w.WriteHeader(http.StatusCreated)
	})}
	srv := httptest.NewServer(ex)
	defer srv.Close()
	rt := transport(nil, retrytest.NewClock(time.Now()))
	defer rt.CloseIdleConnections()
	for _, key := range []string{"k1", ""} {
		req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, srv.URL, bytes.NewReader([]byte("x")))
		if err != nil {
			t.Fatal(err)
		}
		if key != "" {
			req.Header.Set("Idempotency-Key", key)
		}
		resp, err := rt.RoundTrip(req)
		if err == nil {
			resp.Body.Close()
		}
		if key == "" && err == nil {
			t.Errorf("POST without a key: %v; want the reset returned", resp.Status)
		}
	}
	if n := ex.Count("k1"); n != 2 {
		t.Errorf("k1 executed %d times; want 2 (replayed under its key)", n)
	}
	if n := ex.Count(""); n != 1 {
		t.Errorf("the POST without a key executed %d times; want 1", n)
	}
	if tw := ex.Twice(); len(tw) != 1 || tw[0] != "k1" || ex.Total() != 3 {
		t.Errorf("Twice %q, Total %d; want [k1], 3", tw, ex.Total())
	}
}

func TestClock(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	c := retrytest.NewClock(start)
	if err := c.Sleep(context.Background(), time.Second); err != nil {
		t.Fatal(err)
	}
	c.Advance(time.Minute)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := c.Sleep(ctx, time.Hour); !errors.Is(err, context.Canceled) {
		t.Errorf("Sleep on a done context = %v", err)
	}
	if got := c.Now(); !got.Equal(start.Add(time.Second + time.Minute)) {
		t.Errorf("Now = %v", got)
	}
	if w := c.Waits(); len(w) != 1 || w[0] != time.Second {
		t.Errorf("Waits = %v", w)
	}
}

// The Clock's timers run in the order of their times once Sleep or
// Advance moves it past them, never before; a stopped one never runs, and
// AwaitTimers sees them set.
func TestClockTimers(t *testing.T) {
	c := retrytest.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	var _ retry.TimerClock = c
	var ran []string
	c.AfterFunc(3*time.Second, func() { ran = append(ran, "3s") })
	c.AfterFunc(time.Second, func() { ran = append(ran, "1s") })
	stop := c.AfterFunc(2*time.Second, func() { ran = append(ran, "2s") })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.AwaitTimers(ctx, 3); err != nil {
		t.Fatal(err)
	}
	c.Advance(999 * time.Millisecond)
	if len(ran) != 0 {
		t.Fatalf("ran %v before their time", ran)
	}
	if !stop() || stop() {
		t.Error("stop of a pending timer: want true once, then false")
	}
	if err := c.Sleep(context.Background(), 5*time.Second); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(ran) != "[1s 3s]" {
		t.Errorf("ran %v; want [1s 3s]", ran)
	}
	short, cancelShort := context.WithCancel(context.Background())
	cancelShort()
	if err := c.AwaitTimers(short, 1); !errors.Is(err, context.Canceled) {
		t.Errorf("AwaitTimers with none pending = %v", err)
	}
}
