package breaker

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/backoff-jitter/retry"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

// Sleep is never called: a Breaker only reads the clock.
func (c *fakeClock) Sleep(context.Context, time.Duration) error { panic("breaker slept") }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func newBreaker(b *Breaker) (*Breaker, *fakeClock) {
	clk := &fakeClock{t: epoch}
	b.Clock = clk
	return b, clk
}

var req, _ = http.NewRequest(http.MethodGet, "http://api.example/", nil)

// outcome sends one attempt through b and reports class; it returns
// Allow's error.
func outcome(b *Breaker, class retry.Class, wait time.Duration) error {
	turn, err := b.Allow(req)
	if err != nil {
		return err
	}
	turn.Done(retry.Feedback{Class: class, Wait: wait, Hinted: wait > 0})
	return nil
}

func TestConsecutiveFailuresOpen(t *testing.T) {
	var changes []string
	b, clk := newBreaker(&Breaker{OnStateChange: func(key string, from, to State) {
		changes = append(changes, key+": "+from.String()+" -> "+to.String())
	}})
	// Throttles, permanent answers and successes do not open it; a
	// success ends a row of failures.
	for _, c := range []retry.Class{retry.Transient, retry.Unsent, retry.Throttled, retry.Permanent, retry.Transient, retry.Success} {
		if err := outcome(b, c, 0); err != nil {
			t.Fatalf("%v: %v", c, err)
		}
	}
	for i := range defaultFailures {
		if err := outcome(b, retry.Transient, 0); err != nil {
			t.Fatalf("failure %d: %v", i+1, err)
		}
	}
	if s := b.State("api.example"); s != Open {
		t.Fatalf("after %d failures in a row: %v", defaultFailures, s)
	}
	err := outcome(b, retry.Success, 0)
	var open *retry.CircuitOpen
	if !errors.As(err, &open) || !errors.Is(err, retry.ErrCircuitOpen) || open.Key != "api.example" || !open.Until.Equal(epoch.Add(defaultOpenFor)) {
		t.Fatalf("Allow on an open circuit: %v; want CircuitOpen until %v", err, epoch.Add(defaultOpenFor))
	}

	// Half open after OpenFor: one probe at a time; its failure opens
	// the circuit again, a later probe's success closes it.
	clk.advance(defaultOpenFor)
	turn, err := b.Allow(req)
	if err != nil {
		t.Fatalf("probe: %v", err)
	}
	if _, err := b.Allow(req); !errors.Is(err, retry.ErrCircuitOpen) {
		t.Fatalf("second probe at once: %v; want refused", err)
	}
	turn.Done(retry.Feedback{Class: retry.Unsent})
	if s := b.State("api.example"); s != Open {
		t.Fatalf("after a failed probe: %v", s)
	}
	clk.advance(defaultOpenFor)
	if err := outcome(b, retry.Success, 0); err != nil {
		t.Fatal(err)
	}
	if s := b.State("api.example"); s != Closed {
		t.Fatalf("after a successful probe: %v", s)
	}
	want := []string{
		"api.example: closed -> open", "api.example: open -> half-open", "api.example: half-open -> open",
		"api.example: open -> half-open", "api.example: half-open -> closed",
	}
	if len(changes) != len(want) {
		t.Fatalf("state changes %q; want %q", changes, want)
	}
	for i := range want {
		if changes[i] != want[i] {
			t.Errorf("change %d: %q; want %q", i, changes[i], want[i])
		}
	}
}

func TestFailureRateOpens(t *testing.T) {
	b, clk := newBreaker(&Breaker{Failures: -1, MinRequests: 10, FailureRate: 0.5})
	for i := range 9 {
		c := retry.Success
		if i%2 == 0 {
			c = retry.Transient
		}
		if err := outcome(b, c, 0); err != nil {
			t.Fatalf("attempt %d: %v", i+1, err)
		}
		clk.advance(100 * time.Millisecond)
	}
	if s := b.State("api.example"); s != Closed {
		t.Fatalf("5 of 9 failed, fewer than MinRequests: %v", s)
	}
	_ = outcome(b, retry.Success, 0) // 10 attempts, 5 failed: not yet a failure that trips
	_ = outcome(b, retry.Transient, 0)
	if s := b.State("api.example"); s != Open {
		t.Fatalf("6 of 11 failed over the window: %v", s)
	}

	// Outcomes older than the window no longer count.
	b2, clk2 := newBreaker(&Breaker{Failures: -1, MinRequests: 4, FailureRate: 0.5})
	for range 3 {
		_ = outcome(b2, retry.Transient, 0)
	}
	clk2.advance(2 * defaultWindow)
	for range 3 {
		_ = outcome(b2, retry.Success, 0)
	}
	_ = outcome(b2, retry.Transient, 0)
	if s := b2.State("api.example"); s != Closed {
		t.Fatalf("1 of 4 failed in the window: %v", s)
	}
}

// The Retry-After of the failure that opened the circuit holds it open
// longer than OpenFor, up to MaxOpenFor.
func TestRetryAfterHoldsItOpen(t *testing.T) {
	for _, tc := range []struct{ wait, want time.Duration }{
		{time.Second, defaultOpenFor},
		{30 * time.Second, 30 * time.Second},
		{time.Hour, defaultMaxOpenFor},
	} {
		b, _ := newBreaker(&Breaker{Failures: 1})
		_ = outcome(b, retry.Transient, tc.wait)
		var open *retry.CircuitOpen
		if err := outcome(b, retry.Success, 0); !errors.As(err, &open) || !open.Until.Equal(epoch.Add(tc.want)) {
			t.Errorf("Retry-After %v: %v; want open until +%v", tc.wait, err, tc.want)
		}
	}
}

func TestClosedPathAllocatesNothing(t *testing.T) {
	b := &Breaker{}
	ok := retry.Feedback{Class: retry.Success}
	if n := testing.AllocsPerRun(1000, func() {
		turn, _ := b.Allow(req)
		turn.Done(ok)
	}); n != 0 {
		t.Errorf("%v allocations per attempt on a closed circuit; want 0", n)
	}
}

// While a half-open circuit's probe is out, other attempts are refused
// with the time by which it has answered or another may go: OpenFor after
// it went. A probe unanswered that long no longer holds its place, and
// its late answer is not counted.
func TestBusyHalfOpen(t *testing.T) {
	b, clk := newBreaker(&Breaker{Failures: 1})
	if err := outcome(b, retry.Transient, 0); err != nil {
		t.Fatal(err)
	}
	clk.advance(defaultOpenFor)
	hung, err := b.Allow(req)
	if err != nil {
		t.Fatalf("the first probe: %v", err)
	}
	clk.advance(time.Second)
	_, err = b.Allow(req)
	var open *retry.CircuitOpen
	want := epoch.Add(2 * defaultOpenFor)
	if !errors.As(err, &open) || !open.Until.Equal(want) {
		t.Fatalf("Allow while the probe is out: %v; want CircuitOpen until %v", err, want)
	}
	clk.advance(defaultOpenFor - time.Second)
	probe, err := b.Allow(req)
	if err != nil {
		t.Fatalf("Allow once the probe went unanswered for OpenFor: %v", err)
	}
	hung.Done(retry.Feedback{Class: retry.Transient}) // too late: not counted
	if s := b.State("api.example"); s != HalfOpen {
		t.Fatalf("after the hung probe's late failure: %v; want half-open", s)
	}
	probe.Done(retry.Feedback{Class: retry.Success})
	if s := b.State("api.example"); s != Closed {
		t.Fatalf("after the second probe's success: %v; want closed", s)
	}
}

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		b    *Breaker
		want string
	}{
		{&Breaker{FailureRate: 1.5}, "breaker: FailureRate 1.5 is not at most 1"},
		{&Breaker{Window: -1}, "breaker: Window -1ns is negative"},
		{&Breaker{OpenFor: -time.Second}, "breaker: OpenFor -1s is negative"},
		{&Breaker{MaxOpenFor: -time.Second}, "breaker: MaxOpenFor -1s is negative"},
		{&Breaker{MinRequests: -2}, "breaker: MinRequests -2 is negative"},
		{&Breaker{Probes: -1}, "breaker: Probes -1 is negative"},
		{&Breaker{MaxKeys: -1}, "breaker: MaxKeys -1 is negative"},
	} {
		if err := tc.b.Validate(); err == nil || err.Error() != tc.want {
			t.Errorf("Validate() = %v; want %q", err, tc.want)
		}
	}
	if err := (&Breaker{}).Validate(); err != nil {
		t.Error(err)
	}
	if State(9).String() != "State(9)" {
		t.Error(State(9).String())
	}
}

// Under the race detector: attempts from many goroutines, some failing,
// open and close circuits without a race, and probes never exceed Probes.
func TestConcurrent(t *testing.T) {
	b, clk := newBreaker(&Breaker{Failures: 3, Probes: 2})
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := range 500 {
				turn, err := b.Allow(req)
				if err != nil {
					clk.advance(time.Second)
					continue
				}
				class := retry.Success
				if (w+i)%3 == 0 {
					class = retry.Transient
				}
				turn.Done(retry.Feedback{Class: class})
			}
		})
	}
	wg.Wait()
	c := b.circuits.Peek("api.example").Value
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.probing != 0 {
		t.Errorf("%d probes out after every attempt ended", c.probing)
	}
}

// BenchmarkClosed is the cost of a breaker on a healthy host.
func BenchmarkClosed(b *testing.B) {
	br := &Breaker{}
	ok := retry.Feedback{Class: retry.Success}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			turn, _ := br.Allow(req)
			turn.Done(ok)
		}
	})
}
