package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	sdkretry "github.com/aws/aws-sdk-go-v2/aws/retry"
	"go.uber.org/goleak"

	"github.com/backoff-jitter/retry"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// tiny is a run of about two seconds: a server of 4 workers of 5 ms (800
// requests a second) at half load, a 0.5 s trigger.
func tiny(t Trigger) Config {
	return Config{
		Workers: 4, Service: 5 * time.Millisecond, Queue: 20,
		Load: 0.5, Deadline: 300 * time.Millisecond,
		Trigger: t, Share: 0.3,
		Warmup: 500 * time.Millisecond, Length: 500 * time.Millisecond, After: 700 * time.Millisecond,
		Interval: 100 * time.Millisecond, Seed: 1,
	}
}

// A synthetic run: arrivals of 10 per interval; the trigger (intervals 2
// and 3) triples the attempts and fails every call; afterwards goodput
// comes back at interval 6.
func TestSummarize(t *testing.T) {
	cfg := Config{Warmup: 200 * time.Millisecond, Length: 200 * time.Millisecond, After: 2600 * time.Millisecond, Interval: 100 * time.Millisecond, Trigger: TriggerOutage}
	n := int(cfg.span()/cfg.Interval) + 3
	r := Run{Strategy: "x", Config: cfg}
	for k := range n {
		arrivals, attempts, good := int64(10), int64(10), int64(10)
		switch {
		case k >= int(cfg.span()/cfg.Interval):
			arrivals, attempts, good = 0, 2, 0 // the tail: the last calls' attempts
		case k == 2 || k == 3:
			attempts, good = 30, 0
		case k == 4 || k == 5:
			attempts, good = 12, 5
		}
		r.Arrivals = append(r.Arrivals, arrivals)
		r.Attempts = append(r.Attempts, attempts)
		r.Goodput = append(r.Goodput, good)
		r.Wasted = append(r.Wasted, 1)
		r.Queue = append(r.Queue, int64(k))
	}
	s := summarize(r)
	if s.AmpDuring != 3 || s.GoodDuring != 0 || s.Warm != 1 {
		t.Errorf("during: amplification %v, goodput %v, warm %v; want 3, 0, 1", s.AmpDuring, s.GoodDuring, s.Warm)
	}
	after := float64(2*12+24*10+3*2) / float64(26*10)
	if s.AmpAfter != after {
		t.Errorf("amplification after %v; want %v", s.AmpAfter, after)
	}
	if !s.Recovered || s.Recovery != 200*time.Millisecond {
		t.Errorf("recovery %v (%v); want 200ms", s.Recovery, s.Recovered)
	}
	if s.Wasted != int64(n) || s.PeakQueue != int64(n-1) {
		t.Errorf("wasted %d, peak queue %d", s.Wasted, s.PeakQueue)
	}

	// Goodput that never holds for two seconds: metastable.
	for k := 6; k < len(r.Goodput); k += 15 {
		r.Goodput[k] = 0
	}
	if s := summarize(r); s.Recovered {
		t.Errorf("recovered after %v; want never", s.Recovery)
	}
}

// The goal is judged against no retries: a slower recovery, an
// amplification over the bounds, less goodput in a drop, or none at all.
func TestGoal(t *testing.T) {
	base := Summary{Strategy: "no-retries", Trigger: TriggerDrop, Recovered: true, Recovery: time.Second, GoodDuring: 0.4, AmpDuring: 1, AmpAfter: 1}
	good := Summary{Strategy: "retry", Trigger: TriggerDrop, Recovered: true, Recovery: 1900 * time.Millisecond, GoodDuring: 0.4, AmpDuring: 1.2, AmpAfter: 1.05}
	if m, judged := goal([]Summary{base, good}); len(m) != 0 || !judged {
		t.Errorf("missed %v (judged %v)", m, judged)
	}
	if _, judged := goal([]Summary{base}); judged {
		t.Error("judged without ours")
	}
	bad := Summary{Strategy: "retry", Trigger: TriggerDrop, Recovered: true, Recovery: 2100 * time.Millisecond, GoodDuring: 0.3, AmpDuring: 1.3, AmpAfter: 1.1}
	if m, _ := goal([]Summary{base, bad}); len(m) != 4 {
		t.Errorf("missed %q; want four", m)
	}
	never := good
	never.Recovered = false
	if m, _ := goal([]Summary{base, never}); len(m) != 1 {
		t.Errorf("missed %q; want metastable", m)
	}
}

// The server answers 503 at once when its queue is full, and counts the
// work it does for a caller who has gone.
func TestServer(t *testing.T) {
	cfg := tiny(TriggerDrop)
	cfg.Workers, cfg.Service, cfg.Queue = 1, 50*time.Millisecond, 2
	tl := newTimeline(time.Now(), cfg.Interval, 5*time.Second)
	s := newServer(cfg, tl)
	defer s.Close()
	base := newBase()
	defer base.CloseIdleConnections()
	client := &http.Client{Transport: base}
	// One in service, two queued, then the fourth finds the queue full:
	// its 503 comes before the first answer.
	codes := make(chan int, 4)
	for i := range 4 {
		go func() {
			resp, err := client.Get(s.URL())
			if err != nil {
				codes <- -1
				return
			}
			resp.Body.Close()
			codes <- resp.StatusCode
		}()
		if i < 3 {
			waitFor(t, func() bool { return sum(values(tl.attempts)) == int64(i+1) })
		}
	}
	if c := <-codes; c != http.StatusServiceUnavailable {
		t.Errorf("first answer %d; want the full queue's 503", c)
	}
	for range 3 {
		if c := <-codes; c != http.StatusOK {
			t.Errorf("answer %d; want 200", c)
		}
	}
	// A caller that gives up: its request is still served, and wasted.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, s.URL(), nil)
	if _, err := client.Do(req); err == nil {
		t.Fatal("the call outlived its deadline")
	}
	waitFor(t, func() bool { return sum(values(tl.wasted)) == 1 })
}

// waitFor polls cond, bounded to 5 s.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(5 * time.Second); time.Now().Before(end); time.Sleep(time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatal("condition never held")
}

// A short run of each trigger: every arrival is counted, calls fail only
// around the trigger, and the recorded series add up.
func TestRun(t *testing.T) {
	for _, trig := range []Trigger{TriggerOutage, TriggerDrop} {
		for _, name := range []string{"no-retries", "retry"} {
			s, _ := pick(name)
			r := run(tiny(trig), s[0])
			sm := summarize(r)
			t.Logf("%s %s: %+v", trig, name, sm)
			if r.Calls != sum(r.Arrivals) || r.Calls < 500 || r.Dropped != 0 {
				t.Errorf("%s %s: %d calls, %d arrivals, %d dropped", trig, name, r.Calls, sum(r.Arrivals), r.Dropped)
			}
			if trig == TriggerOutage && sm.GoodDuring > 0.05 {
				t.Errorf("%s %s: %.2f of the outage's calls succeeded", trig, name, sm.GoodDuring)
			}
			if sum(r.Goodput)+r.Failed != r.Calls {
				t.Errorf("%s %s: %d succeeded + %d failed != %d calls", trig, name, sum(r.Goodput), r.Failed, r.Calls)
			}
		}
	}
}

// The AWS adapter retries a 503 with the SDK's backoff until it
// succeeds, and spends the SDK's quota as its middleware does: 14 tokens
// a retry, refunded when the attempt that retry sent succeeds. Of 28
// tokens, a call that succeeds on its third attempt spends 14 for good
// (the second attempt failed), so the next call may retry once.
func TestAWSStandard(t *testing.T) {
	var hits atomic.Int32
	var failing atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if hits.Add(1) <= 2 || failing.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	defer srv.Close()
	base := newBase()
	defer base.CloseIdleConnections()
	rt := &awsStandard{base: base, r: sdkretry.NewStandard(func(o *sdkretry.StandardOptions) {
		o.MaxBackoff, o.MaxAttempts = time.Millisecond, 10
		o.RateLimiter = ratelimit.NewTokenRateLimit(28)
	})}
	client := &http.Client{Transport: rt}
	resp, err := client.Get(srv.URL)
	if err != nil || resp.StatusCode != http.StatusOK || hits.Load() != 3 {
		t.Fatalf("%v, %v after %d attempts; want 200 after 3", resp, err, hits.Load())
	}
	resp.Body.Close()

	failing.Store(true)
	hits.Store(0)
	resp, err = client.Get(srv.URL)
	if err != nil || resp.StatusCode != http.StatusServiceUnavailable || hits.Load() != 2 {
		t.Fatalf("%v, %v after %d attempts; want the 503 after 2, the quota spent", resp, err, hits.Load())
	}
	resp.Body.Close()
}

// The share budget allows 20 % of the window's first attempts plus 10 a
// second, forgets what left the window, and counts retries of every class.
func TestShareBudget(t *testing.T) {
	now := time.Unix(1_000, 0)
	b := newShareBudget()
	b.now = func() time.Time { return now }
	for range 500 {
		b.request()
	}
	allowed := 0
	for range 1_000 {
		if b.AllowRetry(retry.Transient) {
			allowed++
		}
	}
	if allowed != 200 { // 0.2 * 500 + 10 * 10
		t.Fatalf("allowed %d retries of 500 requests; want 200", allowed)
	}
	now = now.Add(9 * time.Second)
	if b.AllowRetry(retry.Throttled) {
		t.Fatal("a retry allowed 9 s later, with the window's share spent")
	}
	now = now.Add(time.Second) // the first second leaves the window
	allowed = 0
	for range 1_000 {
		if b.AllowRetry(retry.Unsent) {
			allowed++
		}
	}
	if allowed != 100 {
		t.Fatalf("allowed %d retries after the window moved on; want the 100 of the floor", allowed)
	}
}
