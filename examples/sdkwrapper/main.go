// Sdkwrapper shows how the author of a client library for a rate-limited
// API wraps retry for their users: client.go is the library, a Client for
// a made-up JSON API with per-endpoint retry settings (reads retry freely,
// writes carry an Idempotency-Key made once per call), hooks wired to
// log/slog and to counters, and a deadline on every call. api.go is a local
// stand-in for the API, which rate-limits and fails on cue; this program
// makes calls that meet each failure and prints what the user of the
// library sees, the library's log records included.
//
//	go run ./examples/sdkwrapper
//
// It needs no network beyond 127.0.0.1 and takes about three seconds.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"net/url"
	"os"
	"sync"
	"time"
)

func main() {
	if err := run(context.Background(), os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "sdkwrapper:", err)
		os.Exit(1)
	}
}

const apiKey = "key-123"

// burst is the number of requests the API serves at once, and then per second.
const burst = 10

func run(ctx context.Context, out io.Writer) error {
	api := newWidgetsAPI(apiKey, burst, burst)
	srv := httptest.NewServer(api)
	defer srv.Close()

	client, err := New(Options{
		Endpoint:       srv.URL,
		APIKey:         apiKey,
		Logger:         slog.New(slog.NewTextHandler(out, &slog.HandlerOptions{ReplaceAttr: shortLog})),
		ReadTimeout:    3 * time.Second,
		AttemptTimeout: 200 * time.Millisecond,
	})
	if err != nil {
		return err
	}
	defer client.Close()

	step := func(n int, what string) { fmt.Fprintf(out, "\n%d. %s\n", n, what) }
	show := func(w *Widget, err error) {
		if err != nil {
			fmt.Fprintf(out, "   => error: %v\n", err)
			return
		}
		fmt.Fprintf(out, "   => %s (%s)\n", w.Name, w.ID)
	}

	step(1, "GetWidget w1: the API answers 500 first; a read is safe to repeat, so it is retried")
	api.inject("GET /v1/widgets/w1", serverError)
	show(client.GetWidget(ctx, "w1"))

	step(2, "CreateWidget gear: the API creates it but a proxy answers 502; the retry carries the same Idempotency-Key")
	api.inject("POST /v1/widgets", lostResponse)
	before := api.Count()
	show(client.CreateWidget(ctx, "gear", ""))
	hits := api.Hits()
	first, second := hits[len(hits)-2], hits[len(hits)-1]
	fmt.Fprintf(out, "   server: %d, then %d replayed=%v, same key: %v; widgets created: %d\n",
		first.Status, second.Status, second.Replayed, first.Key == second.Key, api.Count()-before)

	step(3, "CreateWidget with no name: 400 is not retried")
	_, err = client.CreateWidget(ctx, "", "")
	fmt.Fprintf(out, "   => error: %v\n", err)

	step(4, "GetWidget nope: 404 is not retried, and errors.Is(err, ErrNotFound)")
	_, err = client.GetWidget(ctx, "nope")
	fmt.Fprintf(out, "   => error: %v; ErrNotFound: %v\n", err, errors.Is(err, ErrNotFound))

	step(5, "GetWidget w1: two attempts hang; each is cut after the 200ms AttemptTimeout")
	api.inject("GET /v1/widgets/w1", stuck, stuck)
	start := time.Now()
	show(client.GetWidget(ctx, "w1"))
	fmt.Fprintf(out, "   in %.1fs\n", time.Since(start).Seconds())

	step(6, fmt.Sprintf("%d concurrent reads; the API serves %d at once and %d a second, and answers 429 with Retry-After: 1",
		burst+5, burst, burst))
	start = time.Now()
	var wg sync.WaitGroup
	errs := make([]error, burst+5)
	for i := range errs {
		wg.Go(func() { _, errs[i] = client.GetWidget(ctx, "w1") })
	}
	wg.Wait()
	fmt.Fprintf(out, "   => %d of %d succeeded in %.1fs; %d retries waited as long as the server asked\n",
		count(errs, nil), len(errs), time.Since(start).Seconds(), client.Stats().ServerWaits.Load())

	step(7, "GetWidget w1 with 500ms left, while the API asks for a 1s wait: returned at once")
	api.exhaust()
	dctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	start = time.Now()
	_, err = client.GetWidget(dctx, "w1")
	cancel()
	fmt.Fprintf(out, "   => error: %v\n   in %.1fs\n", err, time.Since(start).Seconds())

	s := client.Stats()
	fmt.Fprintf(out, "\nCounters: %d calls, %d retries (%d throttled, %d transient, %d unsent), %d waited for the server, %d gave up\n",
		s.Calls.Load(), s.Retries.Load(), s.Throttled.Load(), s.Transient.Load(), s.Unsent.Load(), s.ServerWaits.Load(), s.GiveUps.Load())
	return nil
}

// shortLog drops the time from the library's log records, shortens URLs
// to their path and rounds durations to the millisecond, for reading.
func shortLog(_ []string, a slog.Attr) slog.Attr {
	switch {
	case a.Key == slog.TimeKey:
		return slog.Attr{}
	case a.Key == "url":
		if u, err := url.Parse(a.Value.String()); err == nil {
			return slog.String("path", u.Path)
		}
	case a.Value.Kind() == slog.KindDuration:
		return slog.Duration(a.Key, a.Value.Duration().Round(time.Millisecond))
	}
	return a
}

func count(errs []error, want error) int {
	n := 0
	for _, err := range errs {
		if err == want {
			n++
		}
	}
	return n
}
