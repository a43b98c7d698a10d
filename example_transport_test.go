package retry_test

import (
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/backoff-jitter/retry"
)

// flaky starts a loopback server that answers 503 to the first `failures`
// requests and 200 after.
func flaky(failures int32) *httptest.Server {
	var n atomic.Int32
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		if n.Add(1) <= failures {
			http.Error(w, "busy", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "hello")
	}))
}

// New wraps any transport; here the default one, with three attempts and a
// short constant backoff.
func ExampleNew() {
	srv := flaky(2)
	defer srv.Close()

	client := &http.Client{Transport: retry.New(http.DefaultTransport,
		retry.WithMaxAttempts(3),
		retry.WithBackoff(retry.Constant{Base: 10 * time.Millisecond}),
	)}
	resp, err := client.Get(srv.URL)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	fmt.Print(resp.Status, ": ", string(body))
	// Output: 200 OK: hello
}

// NewClient is the one-line way: a client with its own pooled connections
// and the defaults (4 attempts, exponential backoff with full jitter). A
// POST is retried after a 503, which the server sends for requests it did
// not process; after a 500 it would be returned, since the server may have.
func ExampleNewClient() {
	srv := flaky(1)
	defer srv.Close()

	client := retry.NewClient()
	defer client.CloseIdleConnections()
	resp, err := client.Post(srv.URL, "application/json", strings.NewReader(`{"n":1}`))
	if err != nil {
		fmt.Println(err)
		return
	}
	resp.Body.Close()
	fmt.Println(resp.Status)
	// Output: 200 OK
}

// The hooks see every failed attempt: its class, its status or error, and
// the wait chosen. Nothing is logged unless you ask.
func ExampleTransport_OnRetry() {
	srv := flaky(5)
	defer srv.Close()

	rt := retry.New(nil,
		retry.WithMaxAttempts(3),
		retry.WithBackoff(retry.Constant{Base: time.Millisecond}),
		retry.WithOnRetry(func(e retry.Event) {
			fmt.Printf("attempt %d: %d %v, retry in %v\n", e.Attempt, e.StatusCode, e.Class, e.Delay)
		}),
		retry.WithOnGiveUp(func(e retry.Event) {
			fmt.Printf("attempt %d: %d %v, giving up: %v\n", e.Attempt, e.StatusCode, e.Class, e.Reason)
		}),
	)
	defer rt.CloseIdleConnections()
	resp, err := (&http.Client{Transport: rt}).Get(srv.URL)
	if err != nil {
		fmt.Println(err)
		return
	}
	resp.Body.Close()
	fmt.Println("returned:", resp.Status)
	// Output:
	// attempt 1: 503 throttled, retry in 1ms
	// attempt 2: 503 throttled, retry in 1ms
	// attempt 3: 503 throttled, giving up: attempts exhausted
	// returned: 503 Service Unavailable
}

// SlogHook sends the events to a log/slog logger.
func ExampleSlogHook() {
	srv := flaky(1)
	defer srv.Close()

	// A text handler without timestamps, so the output is stable.
	logger := slog.New(slog.NewTextHandler(os.Stdout, &slog.HandlerOptions{
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey || a.Key == "url" {
				return slog.Attr{}
			}
			return a
		},
	}))
	rt := retry.New(nil,
		retry.WithBackoff(retry.Constant{Base: time.Millisecond}),
		retry.WithOnRetry(retry.SlogHook(logger, slog.LevelWarn)),
	)
	defer rt.CloseIdleConnections()
	resp, err := (&http.Client{Transport: rt}).Get(srv.URL)
	if err != nil {
		fmt.Println(err)
		return
	}
	resp.Body.Close()
	// Output:
	// level=WARN msg=retry method=GET attempt=1 class=throttled status=503 delay=1ms server_delay=false
}
