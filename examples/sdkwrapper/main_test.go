package main

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/backoff-jitter/retry"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// TestRun runs the program and checks the story it tells.
func TestRun(t *testing.T) {
	var out bytes.Buffer
	if err := run(context.Background(), &out); err != nil {
		t.Fatalf("run: %v", err)
	}
	for _, want := range []string{
		"class=transient status=500",
		"=> sprocket (w1)",
		"server: 502, then 201 replayed=true, same key: true; widgets created: 1",
		"invalid: name is required (1 attempt, not retryable)",
		"ErrNotFound: true",
		`error="retry: attempt timed out"`,
		"15 of 15 succeeded",
		"rate_limited: slow down (1 attempt, deadline too near)",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	if strings.Contains(out.String(), apiKey) {
		t.Errorf("the API key appears in the output:\n%s", out.String())
	}
}

// setup starts the API and a Client for it that logs to the returned buffer.
func setup(t *testing.T, opts Options) (*widgetsAPI, *Client, *syncBuffer) {
	t.Helper()
	api := newWidgetsAPI(apiKey, burst, burst)
	srv := httptest.NewServer(api)
	t.Cleanup(srv.Close)
	logs := new(syncBuffer)
	opts.Endpoint, opts.APIKey = srv.URL, apiKey
	opts.Logger = slog.New(slog.NewTextHandler(logs, nil))
	c, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return api, c, logs
}

// syncBuffer is a bytes.Buffer for concurrent writers.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestReadRetried(t *testing.T) {
	api, c, logs := setup(t, Options{})
	api.inject("GET /v1/widgets/w1", serverError, serverError)
	w, err := c.GetWidget(context.Background(), "w1")
	if err != nil || w.Name != "sprocket" {
		t.Fatalf("GetWidget = %+v, %v; want sprocket", w, err)
	}
	if n := len(api.Hits()); n != 3 {
		t.Errorf("the API got %d requests; want 3", n)
	}
	if r, tr := c.Stats().Retries.Load(), c.Stats().Transient.Load(); r != 2 || tr != 2 {
		t.Errorf("Stats: %d retries, %d transient; want 2, 2", r, tr)
	}
	if got := strings.Count(logs.String(), "level=WARN msg=retry api=widgets endpoint=read method=GET"); got != 2 {
		t.Errorf("%d retry records logged; want 2:\n%s", got, logs)
	}
}

// TestCreateIdempotent: a write whose answer is lost is retried with the
// same Idempotency-Key, and the API acts on it once; two calls have two
// keys and make two widgets.
func TestCreateIdempotent(t *testing.T) {
	api, c, _ := setup(t, Options{})
	api.inject("POST /v1/widgets", lostResponse, lostResponse)
	ctx := context.Background()
	w, err := c.CreateWidget(ctx, "gear", "")
	if err != nil || w.Name != "gear" {
		t.Fatalf("CreateWidget = %+v, %v; want gear", w, err)
	}
	if _, err := c.CreateWidget(ctx, "gear", ""); err != nil {
		t.Fatal(err)
	}
	hits := api.Hits()
	if len(hits) != 4 {
		t.Fatalf("the API got %d requests; want 4: %+v", len(hits), hits)
	}
	first, second := hits[:3], hits[3]
	for i, h := range first {
		if h.Key == "" || h.Key != first[0].Key {
			t.Errorf("attempt %d of the first call had Idempotency-Key %q; want %q on every attempt", i+1, h.Key, first[0].Key)
		}
	}
	if !first[2].Replayed || first[2].Status != http.StatusCreated {
		t.Errorf("third attempt: %+v; want the first response replayed", first[2])
	}
	if second.Key == first[0].Key {
		t.Errorf("two calls shared the Idempotency-Key %q", second.Key)
	}
	if n := api.Count(); n != 3 {
		t.Errorf("%d widgets; want 3: w1 and one per call", n)
	}
}

func TestCreateWithKey(t *testing.T) {
	api, c, _ := setup(t, Options{})
	ctx := context.Background()
	a, err1 := c.CreateWidget(ctx, "gear", "order-7")
	b, err2 := c.CreateWidget(ctx, "gear", "order-7")
	if err1 != nil || err2 != nil || a.ID != b.ID {
		t.Fatalf("CreateWidget twice with one key = %+v, %v and %+v, %v; want the same widget", a, err1, b, err2)
	}
	if n := api.Count(); n != 2 {
		t.Errorf("%d widgets; want 2", n)
	}
}

func TestErrors(t *testing.T) {
	_, c, _ := setup(t, Options{})
	ctx := context.Background()

	_, err := c.GetWidget(ctx, "nope")
	var e *Error
	if !errors.As(err, &e) || !errors.Is(err, ErrNotFound) {
		t.Fatalf("GetWidget(nope) = %v; want an *Error matching ErrNotFound", err)
	}
	if e.StatusCode != http.StatusNotFound || e.Code != "not_found" || e.Attempts != 1 || e.Reason != retry.StopPermanent {
		t.Errorf("GetWidget(nope): %+v; want 404 not_found after 1 attempt, %v", e, retry.StopPermanent)
	}

	_, err = c.CreateWidget(ctx, "", "")
	if !errors.As(err, &e) || e.StatusCode != http.StatusBadRequest || e.Code != "invalid" || e.Attempts != 1 {
		t.Errorf("CreateWidget(\"\") = %v; want 400 invalid after 1 attempt", err)
	}
	if errors.Is(err, ErrNotFound) {
		t.Errorf("a 400 matches ErrNotFound")
	}
	if g := c.Stats().GiveUps.Load(); g != 2 {
		t.Errorf("Stats: %d give-ups; want 2", g)
	}
}

// TestDeadlines: an attempt that hangs is cut by AttemptTimeout and
// retried; a call is cut by ReadTimeout; and a server wait that would end
// past the deadline returns the response at once.
func TestDeadlines(t *testing.T) {
	t.Run("attempt timeout", func(t *testing.T) {
		api, c, _ := setup(t, Options{AttemptTimeout: 50 * time.Millisecond})
		api.inject("GET /v1/widgets/w1", stuck)
		if _, err := c.GetWidget(context.Background(), "w1"); err != nil {
			t.Fatalf("GetWidget: %v", err)
		}
		if n := len(api.Hits()); n != 2 {
			t.Errorf("the API got %d requests; want 2", n)
		}
	})
	t.Run("call timeout", func(t *testing.T) {
		api, c, _ := setup(t, Options{AttemptTimeout: time.Second, ReadTimeout: 100 * time.Millisecond})
		// Every attempt hangs. (Were only the first to, it would be cut at
		// half the time left, 50ms, and its retry would answer.)
		api.inject("GET /v1/widgets/w1", stuck, stuck, stuck, stuck, stuck)
		start := time.Now()
		_, err := c.GetWidget(context.Background(), "w1")
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("GetWidget = %v; want the deadline exceeded", err)
		}
		if d := time.Since(start); d > time.Second {
			t.Errorf("GetWidget took %v; want about the 100ms ReadTimeout", d)
		}
	})
	t.Run("server wait past the deadline", func(t *testing.T) {
		api, c, _ := setup(t, Options{})
		api.exhaust()
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		defer cancel()
		start := time.Now()
		_, err := c.GetWidget(ctx, "w1")
		var e *Error
		if !errors.As(err, &e) || e.StatusCode != http.StatusTooManyRequests || e.Reason != retry.StopDeadline {
			t.Errorf("GetWidget = %v; want the 429, returned because the deadline is too near", err)
		}
		if d := time.Since(start); d > 250*time.Millisecond {
			t.Errorf("GetWidget took %v; want it back at once", d)
		}
	})
}

// TestRateLimited: throttled reads wait as long as the API asks, and all
// succeed.
func TestRateLimited(t *testing.T) {
	api, c, _ := setup(t, Options{})
	start := time.Now()
	var wg sync.WaitGroup
	errs := make([]error, burst+3)
	for i := range errs {
		wg.Go(func() { _, errs[i] = c.ListWidgets(context.Background()) })
	}
	wg.Wait()
	if n := count(errs, nil); n != len(errs) {
		t.Fatalf("%d of %d calls succeeded: %v", n, len(errs), errs)
	}
	throttled := 0
	for _, h := range api.Hits() {
		if h.Status == http.StatusTooManyRequests {
			throttled++
		}
	}
	s := c.Stats()
	if throttled == 0 || s.Throttled.Load() != int64(throttled) || s.ServerWaits.Load() != int64(throttled) {
		t.Errorf("%d 429s; Stats: %d throttled retries, %d server waits; want them equal and not 0",
			throttled, s.Throttled.Load(), s.ServerWaits.Load())
	}
	if d := time.Since(start); d < time.Second {
		t.Errorf("the calls took %v; the throttled ones should have waited the 1s the API asked", d)
	}
}

func TestNewChecksEndpoint(t *testing.T) {
	for _, endpoint := range []string{"", "ftp://x", "127.0.0.1:80", "http://"} {
		if _, err := New(Options{Endpoint: endpoint}); err == nil {
			t.Errorf("New(Endpoint: %q) succeeded; want an error", endpoint)
		}
	}
}
