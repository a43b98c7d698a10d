package githubretry

import (
	"context"
	"fmt"
	"hash/fnv"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/backoff-jitter/retry"
)

func response(code int, body string, header ...string) *http.Response {
	h := http.Header{}
	for i := 0; i+1 < len(header); i += 2 {
		h.Set(header[i], header[i+1])
	}
	return &http.Response{StatusCode: code, Header: h, Body: io.NopCloser(strings.NewReader(body))}
}

func TestClassify(t *testing.T) {
	const secondary = `{"message":"You have exceeded a secondary rate limit. Please wait a few minutes before you try again.","documentation_url":"https://docs.github.com/rest"}`
	tests := []struct {
		name string
		resp *http.Response
		want retry.Class
	}{
		{"primary limit, 403", response(403, `{"message":"API rate limit exceeded"}`, "X-RateLimit-Remaining", "0", "X-RateLimit-Reset", "1700000000"), retry.Throttled},
		{"primary limit, 429", response(429, "", "X-RateLimit-Remaining", "0"), retry.Throttled},
		{"secondary limit with Retry-After", response(403, secondary, "Retry-After", "60"), retry.Throttled},
		{"secondary limit, message only", response(403, secondary), retry.Throttled},
		{"secondary limit, 429, message only", response(429, secondary), retry.Throttled},
		{"bad credentials", response(403, `{"message":"Bad credentials"}`, "X-RateLimit-Remaining", "59"), retry.Undecided},
		{"forbidden", response(403, `{"message":"Resource not accessible by integration"}`), retry.Undecided},
		{"not found", response(404, `{"message":"Not Found"}`, "X-RateLimit-Remaining", "0"), retry.Undecided},
		{"ok with the quota spent", response(200, "[]", "X-RateLimit-Remaining", "0"), retry.Undecided},
		{"no response", nil, retry.Undecided},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var body string
			if tt.resp != nil {
				defer func() {
					b, _ := io.ReadAll(tt.resp.Body)
					if string(b) != body {
						t.Errorf("the body left for the caller is %q; want %q", b, body)
					}
				}()
				b, _ := io.ReadAll(tt.resp.Body)
				body = string(b)
				tt.resp.Body = io.NopCloser(strings.NewReader(body))
			}
			if got := Classify(retry.Outcome{Response: tt.resp, Attempt: 1}); got != tt.want {
				t.Errorf("Classify = %v; want %v", got, tt.want)
			}
		})
	}
}

// Through a Transport with Options against a loopback server: a spent
// primary limit is waited out until X-RateLimit-Reset, a secondary limit
// for its Retry-After, and a 403 that is not a limit is returned at once.
//
// Bound: the reset is at most 2s away, real time (X-RateLimit-Reset has
// whole seconds).
func TestOptionsEndToEnd(t *testing.T) {
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/primary":
			if n.Add(1) == 1 {
				w.Header().Set("X-RateLimit-Remaining", "0")
				w.Header().Set("X-RateLimit-Reset", strconv.FormatInt(time.Now().Add(time.Second).Unix(), 10))
				w.WriteHeader(http.StatusForbidden)
				fmt.Fprint(w, `{"message":"API rate limit exceeded"}`)
				return
			}
		case "/secondary":
			if n.Add(1) == 1 {
				w.Header().Set("Retry-After", "0")
				w.WriteHeader(http.StatusForbidden)
				fmt.Fprint(w, `{"message":"You have exceeded a secondary rate limit."}`)
				return
			}
		case "/denied":
			n.Add(1)
			w.WriteHeader(http.StatusForbidden)
			fmt.Fprint(w, `{"message":"Bad credentials"}`)
			return
		}
		fmt.Fprint(w, "[]")
	}))
	defer srv.Close()
	rt := retry.New(nil, append(Options(), retry.WithBackoff(retry.Constant{Base: time.Millisecond}))...)
	defer rt.CloseIdleConnections()
	for _, tt := range []struct {
		path     string
		status   int
		attempts int32
	}{
		{"/primary", 200, 2},
		{"/secondary", 200, 2},
		{"/denied", 403, 1},
	} {
		n.Store(0)
		start := time.Now()
		resp, err := rt.RoundTrip(mustGet(t, srv.URL+tt.path))
		if err != nil {
			t.Fatalf("%s: %v", tt.path, err)
		}
		resp.Body.Close()
		if resp.StatusCode != tt.status || n.Load() != tt.attempts {
			t.Errorf("%s: %d after %d attempts; want %d after %d", tt.path, resp.StatusCode, n.Load(), tt.status, tt.attempts)
		}
		if d := time.Since(start); d > 3*time.Second {
			t.Errorf("%s took %v", tt.path, d)
		}
	}
}

func mustGet(t *testing.T, url string) *http.Request {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	return req
}

// A secondary limit told by its message alone waits at least a minute, as
// GitHub asks: under a 2 s deadline the 403 is returned at once, with the
// time to come back a minute on, where the backoff alone would have
// retried after a millisecond. Told by Retry-After or the primary limit's
// headers, the floor is nothing.
func TestWaitFloorForSecondaryLimits(t *testing.T) {
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1) == 1 {
			w.WriteHeader(http.StatusForbidden)
			fmt.Fprint(w, `{"message":"You have exceeded a secondary rate limit. Please wait a few minutes before you try again."}`)
			return
		}
		fmt.Fprint(w, "[]")
	}))
	defer srv.Close()
	rt := retry.New(nil, append(Options(), retry.WithBackoff(retry.Constant{Base: time.Millisecond}))...)
	defer rt.CloseIdleConnections()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	resp, err := rt.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	e, ok := retry.EndingOf(resp)
	if resp.StatusCode != http.StatusForbidden || n.Load() != 1 || !ok || e.Reason != retry.StopDeadline {
		t.Fatalf("%d after %d attempts, ending %+v; want the 403 at once, stopped for the deadline", resp.StatusCode, n.Load(), e)
	}
	if d := e.RetryAt.Sub(start); d < SecondaryWait || d > SecondaryWait+time.Second {
		t.Errorf("come back in %v; want a minute", d)
	}

	for _, h := range []http.Header{
		{"Retry-After": {"30"}},
		{"X-Ratelimit-Remaining": {"0"}},
	} {
		resp := &http.Response{StatusCode: http.StatusForbidden, Header: h, Body: http.NoBody}
		if got := WaitFloor(retry.Outcome{Response: resp}); got != 0 {
			t.Errorf("WaitFloor with %v = %v; want 0", h, got)
		}
	}
	if got := WaitFloor(retry.Outcome{}); got != 0 {
		t.Errorf("WaitFloor of an error = %v; want 0", got)
	}
}

func TestKey(t *testing.T) {
	get := func(method, url, auth string) *http.Request {
		req, _ := http.NewRequest(method, url, nil)
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		return req
	}
	for _, tt := range []struct {
		req      *http.Request
		resource string
	}{
		{get("GET", "https://api.github.com/repos/o/r/issues", ""), "core"},
		{get("GET", "https://api.github.com/search/issues?q=x", ""), "search"},
		{get("GET", "https://api.github.com/search/code?q=x", ""), "code_search"},
		{get("POST", "https://api.github.com/graphql", ""), "graphql"},
		{get("POST", "https://ghe.example/api/v3/repos/o/r/dependency-graph/snapshots", ""), "dependency_snapshots"},
		{get("POST", "https://api.github.com/repos/o/r/code-scanning/sarifs", ""), "code_scanning_upload"},
		{get("GET", "https://api.github.com/repos/o/r/code-scanning/sarifs", ""), "core"},
	} {
		if got := Resource(tt.req); got != tt.resource {
			t.Errorf("Resource(%s %s) = %q; want %q", tt.req.Method, tt.req.URL, got, tt.resource)
		}
	}
	a := Key(get("GET", "https://api.github.com/user", "Bearer token-a"))
	b := Key(get("GET", "https://api.github.com/user", "Bearer token-b"))
	s := Key(get("GET", "https://api.github.com/search/issues", "Bearer token-a"))
	if a == b || a == s || strings.Contains(a, "token-a") {
		t.Errorf("keys %q, %q, %q: want one per token and resource, without the token", a, b, s)
	}
	if a != Key(get("GET", "https://api.github.com/repos/o/r", "Bearer token-a")) {
		t.Error("two core requests of one token have different keys")
	}
	// The hash is hash/fnv's FNV-1a, so keys are what they were.
	f := fnv.New64a()
	f.Write([]byte("Bearer token-a"))
	if want := "api.github.com core " + strconv.FormatUint(f.Sum64(), 36); a != want {
		t.Errorf("Key = %q; want %q", a, want)
	}
	// Keyed on every attempt, with one allocation: the key itself.
	req := get("GET", "https://api.github.com/repos/o/r/issues", "Bearer token-a")
	if n := testing.AllocsPerRun(100, func() { Key(req) }); n > 1 {
		t.Errorf("Key allocates %v times per call; want 1", n)
	}
}
