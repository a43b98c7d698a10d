// Quickstart sends a handful of requests through retry.NewClient to a flaky
// server it starts on loopback, and prints what happened to each: every
// attempt, how it was classified, the wait chosen and where that wait came
// from.
//
//	go run ./examples/quickstart
//
// It needs no network beyond 127.0.0.1 and finishes in a few seconds.
package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/backoff-jitter/retry"
)

func main() {
	if err := run(os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "quickstart:", err)
		os.Exit(1)
	}
}

// scenario is one request and the server's scripted answers to it.
type scenario struct {
	name    string
	method  string
	path    string
	body    string
	key     string   // Idempotency-Key, if any
	answers []string // one per attempt, the last repeats: a status code, or "reset"
	retryAt string   // Retry-After sent with 503 and 429 answers
}

var scenarios = []scenario{
	{name: "GET, throttled with Retry-After", method: "GET", path: "/quota", answers: []string{"503", "200"}, retryAt: "1"},
	{name: "GET, rate limited twice", method: "GET", path: "/search", answers: []string{"429", "429", "200"}},
	{name: "GET, connection reset", method: "GET", path: "/profile", answers: []string{"reset", "200"}},
	{name: "POST, server error (not replayed)", method: "POST", path: "/orders", body: `{"item":42}`, answers: []string{"500", "201"}},
	{name: "POST with Idempotency-Key, reset", method: "POST", path: "/payments", body: `{"amount":10}`, key: "pay-7f3a", answers: []string{"reset", "201"}},
	{name: "POST, throttled (never processed)", method: "POST", path: "/upload", body: strings.Repeat("data ", 1000), answers: []string{"429", "201"}},
	{name: "GET, not found (fails fast)", method: "GET", path: "/missing", answers: []string{"404"}},
}

// flakyServer answers each path with its scenario's script.
type flakyServer struct {
	mu       sync.Mutex
	attempts map[string]int
	byPath   map[string]scenario
}

func (s *flakyServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	s.mu.Lock()
	sc := s.byPath[r.URL.Path]
	n := s.attempts[r.URL.Path]
	s.attempts[r.URL.Path]++
	s.mu.Unlock()
	if len(sc.answers) == 0 {
		http.NotFound(w, r)
		return
	}
	answer := sc.answers[min(n, len(sc.answers)-1)]
	if answer == "reset" {
		reset(w)
		return
	}
	var code int
	fmt.Sscan(answer, &code)
	if (code == 503 || code == 429) && sc.retryAt != "" {
		w.Header().Set("Retry-After", sc.retryAt)
	}
	// A fresh connection per request: on a reused one, net/http itself
	// replays an idempotent request after a reset, and the demo would not
	// show this package's retry.
	w.Header().Set("Connection", "close")
	w.WriteHeader(code)
	if len(body) > 0 {
		fmt.Fprintf(w, "server read %d body bytes\n", len(body))
	}
}

// reset aborts the connection with a TCP RST, as a crashing proxy would.
func reset(w http.ResponseWriter) {
	conn, _, err := w.(http.Hijacker).Hijack()
	if err != nil {
		return
	}
	if tc, ok := conn.(*net.TCPConn); ok {
		tc.SetLinger(0)
	}
	conn.Close()
}

// trace collects the hook events of one request.
type trace struct {
	lines []string
}

type traceKey struct{}

func traceOf(r *http.Request) *trace {
	t, _ := r.Context().Value(traceKey{}).(*trace)
	return t
}

func outcome(e retry.Event) string {
	if e.Err != nil {
		return "error: " + shortError(e.Err)
	}
	return fmt.Sprintf("%d %s", e.StatusCode, http.StatusText(e.StatusCode))
}

func shortError(err error) string {
	s := err.Error()
	if i := strings.LastIndex(s, ": "); i >= 0 {
		s = s[i+2:]
	}
	return s
}

func run(out io.Writer) error {
	fs := &flakyServer{attempts: map[string]int{}, byPath: map[string]scenario{}}
	for _, sc := range scenarios {
		fs.byPath[sc.path] = sc
	}
	srv := httptest.NewServer(fs)
	defer srv.Close()

	client := retry.NewClient(
		retry.WithOnRetry(func(e retry.Event) {
			source := "backoff"
			if e.FromServer {
				source = "server's Retry-After"
			}
			t := traceOf(e.Request)
			t.lines = append(t.lines, fmt.Sprintf("attempt %d: %-32s %-9s -> retry in %v (%s)",
				e.Attempt, outcome(e), e.Class, e.Delay.Round(time.Millisecond), source))
		}),
		retry.WithOnGiveUp(func(e retry.Event) {
			t := traceOf(e.Request)
			t.lines = append(t.lines, fmt.Sprintf("attempt %d: %-32s %-9s -> stop: %v",
				e.Attempt, outcome(e), e.Class, e.Reason))
		}),
	)
	defer client.CloseIdleConnections()

	fmt.Fprintf(out, "A flaky server is listening on %s.\n", srv.URL)
	fmt.Fprintf(out, "Each request goes through retry.NewClient with the defaults:\n")
	fmt.Fprintf(out, "4 attempts, exponential backoff from 100ms with full jitter, Retry-After honoured up to 5m.\n")

	start := time.Now()
	var ok, failed int
	for i, sc := range scenarios {
		t := &trace{}
		ctx, cancel := context.WithTimeout(context.WithValue(context.Background(), traceKey{}, t), 10*time.Second)
		var body io.Reader
		if sc.body != "" {
			body = strings.NewReader(sc.body)
		}
		req, err := http.NewRequestWithContext(ctx, sc.method, srv.URL+sc.path, body)
		if err != nil {
			cancel()
			return err
		}
		if sc.key != "" {
			req.Header.Set("Idempotency-Key", sc.key)
		}
		began := time.Now()
		resp, err := client.Do(req)
		elapsed := time.Since(began)
		fmt.Fprintf(out, "\n%d. %s: %s %s\n", i+1, sc.name, sc.method, sc.path)
		for _, l := range t.lines {
			fmt.Fprintf(out, "     %s\n", l)
		}
		switch {
		case err != nil:
			failed++
			fmt.Fprintf(out, "   => error after %v: %v\n", elapsed.Round(time.Millisecond), err)
		default:
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode < 400 {
				ok++
				fmt.Fprintf(out, "     attempt %d: %-32s success\n", len(t.lines)+1, resp.Status)
			} else {
				failed++
			}
			fmt.Fprintf(out, "   => %s after %v", resp.Status, elapsed.Round(time.Millisecond))
			if len(b) > 0 {
				fmt.Fprintf(out, " (%s)", strings.TrimSpace(string(b)))
			}
			fmt.Fprintln(out)
		}
		cancel()
	}

	fs.mu.Lock()
	total := 0
	for _, n := range fs.attempts {
		total += n
	}
	fs.mu.Unlock()
	fmt.Fprintf(out, "\nSummary: %d requests, %d succeeded, %d failed as they should (a POST that may have run, a 404),\n",
		len(scenarios), ok, failed)
	fmt.Fprintf(out, "%d attempts reached the server, in %v.\n", total, time.Since(start).Round(time.Millisecond))
	return nil
}
