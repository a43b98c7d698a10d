package retry_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
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
	// level=WARN msg=retry method=GET attempt=1 class=throttled status=503 delay=1ms from_server=false
}

// Error is what the call returns when its last attempt failed with an
// error: errors.As finds it through the *url.Error of http.Client, and it
// says how many attempts were made and why no other followed.
func ExampleError() {
	// A port nothing listens on: every dial is refused.
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	addr := ln.Addr().String()
	ln.Close()

	client := &http.Client{Transport: retry.New(nil,
		retry.WithMaxAttempts(3),
		retry.WithBackoff(retry.Constant{Base: time.Millisecond}),
	)}
	_, err := client.Get("http://" + addr + "/")
	var re *retry.Error
	if errors.As(err, &re) {
		fmt.Println("attempts:", re.Attempts, "reason:", re.Reason)
	}
	var op *net.OpError
	fmt.Println("the dial error is there too:", errors.As(err, &op) && op.Op == "dial")
	// Output:
	// attempts: 3 reason: attempts exhausted
	// the dial error is there too: true
}

// WithAttemptTimeout cuts a stuck attempt short and retries it while the
// call still has time. It bounds each attempt until its response arrives,
// not the reading of the body returned: bound the call with a context.
func ExampleWithAttemptTimeout() {
	var n atomic.Int32
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1) == 1 {
			select { // the first attempt hangs
			case <-r.Context().Done():
			case <-release:
			}
			return
		}
		fmt.Fprintln(w, "hello")
	}))
	defer srv.Close()
	defer close(release)

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
	client := &http.Client{Transport: retry.New(nil,
		retry.WithAttemptTimeout(250*time.Millisecond),
		retry.WithOnRetry(func(e retry.Event) {
			if e.Attempt == 1 { // on a busy machine a second attempt may time out too
				fmt.Println("attempt", e.Attempt, "timed out:", errors.Is(e.Err, retry.ErrAttemptTimeout))
			}
		}),
	)}
	resp, err := client.Do(req)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	fmt.Print(resp.Status, ": ", string(body))
	// Output:
	// attempt 1 timed out: true
	// 200 OK: hello
}

// A download whose connection is cut midway is resumed where it broke,
// with Range and If-Range: the caller reads the whole body, once.
func ExampleWithResume() {
	data := strings.Repeat("all the bytes of a large file. ", 4096)
	var n atomic.Int32
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("ETag", `"v1"`) // a strong validator: the body can be resumed
		if n.Add(1) == 1 {
			w.Header().Set("Content-Length", fmt.Sprint(len(data)))
			io.WriteString(w, data[:50_000])
			w.(http.Flusher).Flush()
			panic(http.ErrAbortHandler) // the connection is cut
		}
		http.ServeContent(w, r, "", time.Time{}, strings.NewReader(data))
	}))
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.Start()
	defer srv.Close()

	client := &http.Client{Transport: retry.New(nil, retry.WithOnResume(func(e retry.ResumeEvent) {
		fmt.Println("resumed at byte", e.Offset, "error:", e.Err)
	}))}
	resp, err := client.Get(srv.URL)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	fmt.Println(len(body) == len(data) && string(body) == data, err)
	// Output:
	// resumed at byte 50000 error: <nil>
	// true <nil>
}

// WithStallTimeout ends the reading of a body whose server stops sending:
// the Read fails with ErrBodyStalled, rather than waiting for the
// context's deadline.
func ExampleWithStallTimeout() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "100")
		fmt.Fprint(w, "the first bytes")
		w.(http.Flusher).Flush()
		<-r.Context().Done() // then nothing more
	}))
	defer srv.Close()

	client := &http.Client{Transport: retry.New(nil, retry.WithStallTimeout(100*time.Millisecond))}
	resp, err := client.Get(srv.URL)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	fmt.Printf("%q, stalled: %v\n", body, errors.Is(err, retry.ErrBodyStalled))
	// Output: "the first bytes", stalled: true
}

// WithRateLimitReset declares how an API's X-RateLimit-Reset header is
// read, since APIs disagree (GitHub: a Unix time in seconds). The header
// then sets a floor under the wait, as Retry-After does.
func ExampleWithRateLimitReset() {
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1) == 1 {
			w.Header().Set("X-RateLimit-Remaining", "0")
			w.Header().Set("X-RateLimit-Reset", "0.05") // 50ms from now
			w.WriteHeader(http.StatusTooManyRequests)
			return
		}
		fmt.Fprintln(w, "hello")
	}))
	defer srv.Close()

	client := &http.Client{Transport: retry.New(nil,
		retry.WithRateLimitReset(retry.ResetDeltaSeconds),
		retry.WithBackoff(retry.Constant{Base: time.Millisecond}),
		retry.WithOnRetry(func(e retry.Event) {
			fmt.Println("waiting", e.Delay, "as the server asked:", e.FromServer)
		}),
	)}
	resp, err := client.Get(srv.URL)
	if err != nil {
		fmt.Println(err)
		return
	}
	resp.Body.Close()
	fmt.Println(resp.Status)
	// Output:
	// waiting 50ms as the server asked: true
	// 200 OK
}

// OnDone sees every call once, as it returns: attempts, waits and how it
// ended, for metrics. StopReason.Label names the reason for a label, and
// GaveUp tells retries that ran out from outcomes never retried (a 404).
func ExampleTransport_OnDone() {
	srv := flaky(1)
	defer srv.Close()

	client := &http.Client{Transport: retry.New(nil,
		retry.WithBackoff(retry.Constant{Base: 10 * time.Millisecond}),
		retry.WithOnDone(func(s retry.Summary) {
			fmt.Printf("%d attempts, waited the backoff: %v, class %v, reason %s, gave up: %v\n",
				s.Attempts, s.Wait >= 10*time.Millisecond, s.Class, s.Reason.Label(), s.Reason.GaveUp())
		}),
	)}
	resp, err := client.Get(srv.URL)
	if err != nil {
		fmt.Println(err)
		return
	}
	resp.Body.Close()
	// Output: 2 attempts, waited the backoff: true, class success, reason none, gave up: false
}

// ContextWithOptions changes the settings of one call and no other, over
// the same Transport (its connections and its budget): here, no retries
// for a call whose caller retries by itself.
func ExampleContextWithOptions() {
	srv := flaky(100)
	defer srv.Close()

	client := &http.Client{Transport: retry.New(nil,
		retry.WithMaxAttempts(3),
		retry.WithBackoff(retry.Constant{Base: time.Millisecond}),
		retry.WithOnDone(func(s retry.Summary) { fmt.Println(s.Attempts, "attempts") }),
	)}
	get := func(ctx context.Context) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
		resp, err := client.Do(req)
		if err != nil {
			fmt.Println(err)
			return
		}
		resp.Body.Close()
	}
	get(context.Background())
	get(retry.ContextWithOptions(context.Background(), retry.WithMaxAttempts(1)))
	// Output:
	// 3 attempts
	// 1 attempts
}
