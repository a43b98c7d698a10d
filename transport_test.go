package retry

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fakeClock is the clock and sleep of a Transport under test: sleeping
// advances the clock at once and records the wait.
type fakeClock struct {
	mu    sync.Mutex
	t     time.Time
	slept []time.Duration
}

func (c *fakeClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) sleep(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.slept = append(c.slept, d)
	c.t = c.t.Add(d)
	return nil
}

func (c *fakeClock) waits() []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]time.Duration(nil), c.slept...)
}

// testTransport returns a Transport over base with a fake clock starting
// at the real time (so context deadlines line up) and u fixed at 0.5.
func testTransport(base http.RoundTripper, opts ...Option) (*Transport, *fakeClock) {
	clock := &fakeClock{t: time.Now()}
	t := New(base, opts...)
	t.now, t.sleep = clock.now, clock.sleep
	t.rand = func() float64 { return 0.5 }
	return t, clock
}

// script is a loopback server that answers attempt i with steps[i] (the
// last step repeats), recording every request it saw.
type script struct {
	srv     *httptest.Server
	mu      sync.Mutex
	steps   []func(w http.ResponseWriter, r *http.Request)
	seen    []seenRequest
	newConn atomic.Int32
}

type seenRequest struct {
	method  string
	header  http.Header
	bodySum [32]byte
	bodyLen int
}

func newScript(t *testing.T, steps ...func(w http.ResponseWriter, r *http.Request)) *script {
	t.Helper()
	s := &script{steps: steps}
	s.srv = httptest.NewUnstartedServer(http.HandlerFunc(s.serve))
	s.srv.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			s.newConn.Add(1)
		}
	}
	s.srv.Start()
	t.Cleanup(s.srv.Close)
	return s
}

func (s *script) serve(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	i := len(s.seen)
	s.seen = append(s.seen, seenRequest{method: r.Method, header: r.Header.Clone()})
	step := s.steps[min(i, len(s.steps)-1)]
	s.mu.Unlock()
	step(w, r)
}

// record hashes the request body into the entry of the current request.
func (s *script) record(r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seen[len(s.seen)-1].bodySum = sha256.Sum256(b)
	s.seen[len(s.seen)-1].bodyLen = len(b)
}

func (s *script) requests() []seenRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]seenRequest(nil), s.seen...)
}

func status(code int, header ...string) func(w http.ResponseWriter, r *http.Request) {
	return func(w http.ResponseWriter, r *http.Request) {
		for i := 0; i+1 < len(header); i += 2 {
			w.Header().Set(header[i], header[i+1])
		}
		w.WriteHeader(code)
		fmt.Fprintf(w, "status %d", code)
	}
}

func do(t *testing.T, rt http.RoundTripper, req *http.Request) (*http.Response, string, error) {
	t.Helper()
	resp, err := rt.RoundTrip(req)
	if err != nil {
		return nil, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp, string(b), nil
}

func mustRequest(t *testing.T, method, url string, body io.Reader) *http.Request {
	t.Helper()
	req, err := http.NewRequest(method, url, body)
	require.NoError(t, err)
	return req
}

func TestRetriesThrottledThenSucceeds(t *testing.T) {
	s := newScript(t, status(503), status(429), status(200))
	rt, clock := testTransport(nil)
	defer rt.CloseIdleConnections()

	resp, body, err := do(t, rt, mustRequest(t, "GET", s.srv.URL, nil))
	require.NoError(t, err)
	assert.Equal(t, 200, resp.StatusCode)
	assert.Equal(t, "status 200", body)
	assert.Len(t, s.requests(), 3)
	// Exponential{100ms, 20s, FullJitter} with u = 0.5: 50ms, then 100ms.
	assert.Equal(t, []time.Duration{50 * time.Millisecond, 100 * time.Millisecond}, clock.waits())
	assert.EqualValues(t, 1, s.newConn.Load(), "discarded responses must be drained so the connection is reused")
}

func TestMethodSafety(t *testing.T) {
	tests := []struct {
		method   string
		status   int
		key      bool
		attempts int
	}{
		{"GET", 500, false, 4},
		{"HEAD", 502, false, 4},
		{"PUT", 504, false, 4},
		{"DELETE", 408, false, 4},
		{"OPTIONS", 500, false, 4},
		{"POST", 500, false, 1},
		{"PATCH", 502, false, 1},
		{"POST", 500, true, 4},
		{"POST", 503, false, 4},
		{"POST", 429, false, 4},
		{"PATCH", 429, false, 4},
		{"GET", 404, false, 1},
		{"GET", 400, false, 1},
		{"GET", 401, false, 1},
		{"GET", 403, false, 1},
		{"GET", 501, false, 1},
		{"GET", 505, false, 1},
		{"GET", 200, false, 1},
		{"GET", 304, false, 1},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s %d key=%v", tt.method, tt.status, tt.key), func(t *testing.T) {
			s := newScript(t, func(w http.ResponseWriter, r *http.Request) {
				s := status(tt.status)
				s(w, r)
			})
			rt, _ := testTransport(nil)
			defer rt.CloseIdleConnections()
			req := mustRequest(t, tt.method, s.srv.URL, strings.NewReader("payload"))
			if tt.key {
				req.Header.Set("Idempotency-Key", "k-123")
			}
			resp, err := rt.RoundTrip(req)
			require.NoError(t, err)
			resp.Body.Close()
			assert.Equal(t, tt.status, resp.StatusCode)
			seen := s.requests()
			assert.Len(t, seen, tt.attempts)
			for _, r := range seen {
				if tt.key {
					assert.Equal(t, "k-123", r.header.Get("Idempotency-Key"))
				}
			}
		})
	}
}

// opaqueReader hides every method of its reader but Read, so net/http
// cannot set GetBody for it.
type opaqueReader struct{ r io.Reader }

func (o *opaqueReader) Read(p []byte) (int, error) { return o.r.Read(p) }

// countingCloser counts Close calls on a request body.
type countingCloser struct {
	io.Reader
	closes atomic.Int32
}

func (c *countingCloser) Close() error { c.closes.Add(1); return nil }

func TestBodiesReplayedExactly(t *testing.T) {
	payload := bytes.Repeat([]byte("0123456789abcdef"), 4096) // 64 KiB
	want := sha256.Sum256(payload)
	empty := sha256.Sum256(nil)
	tests := []struct {
		name   string
		body   func() io.Reader
		sum    [32]byte
		closer *countingCloser
	}{
		{name: "bytes.Reader", body: func() io.Reader { return bytes.NewReader(payload) }, sum: want},
		{name: "strings.Reader", body: func() io.Reader { return strings.NewReader(string(payload)) }, sum: want},
		{name: "bytes.Buffer", body: func() io.Reader { return bytes.NewBuffer(payload) }, sum: want},
		{name: "opaque reader", body: func() io.Reader { return &opaqueReader{bytes.NewReader(payload)} }, sum: want},
		{name: "ReadCloser", closer: &countingCloser{Reader: &opaqueReader{bytes.NewReader(payload)}}, sum: want},
		{name: "http.NoBody", body: func() io.Reader { return http.NoBody }, sum: empty},
		{name: "nil", body: func() io.Reader { return nil }, sum: empty},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var s *script
			consume := func(code int) func(w http.ResponseWriter, r *http.Request) {
				return func(w http.ResponseWriter, r *http.Request) {
					s.record(r)
					w.WriteHeader(code)
				}
			}
			s = newScript(t, consume(503), consume(503), consume(200))
			rt, _ := testTransport(nil)
			defer rt.CloseIdleConnections()
			var body io.Reader
			if tt.closer != nil {
				body = tt.closer
			} else {
				body = tt.body()
			}
			req := mustRequest(t, "POST", s.srv.URL, body)
			resp, _, err := do(t, rt, req)
			require.NoError(t, err)
			assert.Equal(t, 200, resp.StatusCode)
			seen := s.requests()
			require.Len(t, seen, 3)
			for i, r := range seen {
				assert.Equal(t, tt.sum, r.bodySum, "attempt %d body", i+1)
			}
			if tt.closer != nil {
				assert.EqualValues(t, 1, tt.closer.closes.Load(), "caller's body must be closed exactly once")
			}
		})
	}
}

// TestBodyReplayAfterEarlyResponse sends a large opaque body to a server
// that refuses the first attempt before reading it: the retry must still
// send every byte, though the first attempt read only part of the body.
func TestBodyReplayAfterEarlyResponse(t *testing.T) {
	payload := make([]byte, 1<<20)
	for i := range payload {
		payload[i] = byte(i * 7)
	}
	var s *script
	s = newScript(t,
		func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Connection", "close")
			w.WriteHeader(503)
		},
		func(w http.ResponseWriter, r *http.Request) { s.record(r); w.WriteHeader(201) },
	)
	rt, _ := testTransport(nil)
	defer rt.CloseIdleConnections()
	cc := &countingCloser{Reader: &opaqueReader{bytes.NewReader(payload)}}
	resp, _, err := do(t, rt, mustRequest(t, "PUT", s.srv.URL, cc))
	require.NoError(t, err)
	assert.Equal(t, 201, resp.StatusCode)
	seen := s.requests()
	require.Len(t, seen, 2)
	assert.Equal(t, len(payload), seen[1].bodyLen)
	assert.Equal(t, sha256.Sum256(payload), seen[1].bodySum)
	assert.EqualValues(t, 1, cc.closes.Load())
}

func TestBodyTooLargeIsSentOnce(t *testing.T) {
	var s *script
	s = newScript(t, func(w http.ResponseWriter, r *http.Request) { s.record(r); w.WriteHeader(503) })
	var gaveUp Event
	rt, _ := testTransport(nil, WithMaxBufferedBody(1024), WithOnGiveUp(func(e Event) { gaveUp = e }))
	defer rt.CloseIdleConnections()
	payload := bytes.Repeat([]byte("x"), 4096)
	resp, _, err := do(t, rt, mustRequest(t, "PUT", s.srv.URL, &opaqueReader{bytes.NewReader(payload)}))
	require.NoError(t, err)
	assert.Equal(t, 503, resp.StatusCode)
	require.Len(t, s.requests(), 1)
	assert.Equal(t, 4096, s.requests()[0].bodyLen)
	assert.Equal(t, StopBody, gaveUp.Reason)
}

// roundTripFunc adapts a function to http.RoundTripper.
type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// A body too large to buffer is still retried while none of it was read,
// as when the dial failed.
func TestBodyTooLargeRetriedWhenUnread(t *testing.T) {
	var s *script
	s = newScript(t, func(w http.ResponseWriter, r *http.Request) { s.record(r); w.WriteHeader(200) })
	real := http.DefaultTransport.(*http.Transport).Clone()
	defer real.CloseIdleConnections()
	calls := 0
	base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		calls++
		if calls == 1 {
			r.Body.Close()
			return nil, &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")}
		}
		return real.RoundTrip(r)
	})
	rt, _ := testTransport(base, WithMaxBufferedBody(16))
	payload := bytes.Repeat([]byte("y"), 1000)
	resp, _, err := do(t, rt, mustRequest(t, "POST", s.srv.URL, &opaqueReader{bytes.NewReader(payload)}))
	require.NoError(t, err)
	assert.Equal(t, 200, resp.StatusCode)
	assert.Equal(t, 2, calls)
	assert.Equal(t, sha256.Sum256(payload), s.requests()[0].bodySum)
}

func TestRetryAfter(t *testing.T) {
	t.Run("floor over backoff", func(t *testing.T) {
		s := newScript(t, status(503, "Retry-After", "3"), status(200))
		var events []Event
		rt, clock := testTransport(nil, WithOnRetry(func(e Event) { events = append(events, e) }))
		defer rt.CloseIdleConnections()
		resp, _, err := do(t, rt, mustRequest(t, "GET", s.srv.URL, nil))
		require.NoError(t, err)
		assert.Equal(t, 200, resp.StatusCode)
		assert.Equal(t, []time.Duration{3 * time.Second}, clock.waits())
		require.Len(t, events, 1)
		assert.True(t, events[0].ServerDelay)
		assert.Equal(t, 503, events[0].StatusCode)
		assert.Equal(t, Throttled, events[0].Class)
	})
	t.Run("backoff longer than server", func(t *testing.T) {
		s := newScript(t, status(429, "Retry-After", "1"), status(200))
		rt, clock := testTransport(nil, WithBackoff(Constant{Base: 2 * time.Second}))
		defer rt.CloseIdleConnections()
		_, _, err := do(t, rt, mustRequest(t, "GET", s.srv.URL, nil))
		require.NoError(t, err)
		assert.Equal(t, []time.Duration{2 * time.Second}, clock.waits())
	})
	t.Run("http date", func(t *testing.T) {
		rt, clock := testTransport(nil)
		defer rt.CloseIdleConnections()
		date := clock.now().Add(90 * time.Second).UTC().Format(http.TimeFormat)
		s := newScript(t, status(503, "Retry-After", date), status(200))
		_, _, err := do(t, rt, mustRequest(t, "GET", s.srv.URL, nil))
		require.NoError(t, err)
		w := clock.waits()
		require.Len(t, w, 1)
		// The date has whole seconds: the wait is within a second of 90s.
		assert.InDelta(t, 90*time.Second, w[0], float64(time.Second))
	})
	t.Run("longer than MaxRetryAfter is returned at once", func(t *testing.T) {
		for _, v := range []string{"301", "86400", "99999999999999999999999"} {
			s := newScript(t, status(503, "Retry-After", v), status(200))
			var gaveUp Event
			rt, clock := testTransport(nil, WithOnGiveUp(func(e Event) { gaveUp = e }))
			resp, _, err := do(t, rt, mustRequest(t, "GET", s.srv.URL, nil))
			rt.CloseIdleConnections()
			require.NoError(t, err)
			assert.Equal(t, 503, resp.StatusCode, "Retry-After %s", v)
			assert.Empty(t, clock.waits())
			assert.Len(t, s.requests(), 1)
			assert.Equal(t, StopServerWait, gaveUp.Reason)
		}
	})
	t.Run("malformed values are ignored", func(t *testing.T) {
		for _, v := range []string{"-5", "1.5", "soon", "0x10", ""} {
			s := newScript(t, status(503, "Retry-After", v), status(200))
			rt, clock := testTransport(nil)
			_, _, err := do(t, rt, mustRequest(t, "GET", s.srv.URL, nil))
			rt.CloseIdleConnections()
			require.NoError(t, err)
			assert.Equal(t, []time.Duration{50 * time.Millisecond}, clock.waits(), "Retry-After %q", v)
		}
	})
}

func TestDeadline(t *testing.T) {
	t.Run("backoff past deadline", func(t *testing.T) {
		s := newScript(t, status(503), status(200))
		var gaveUp Event
		rt, clock := testTransport(nil, WithBackoff(Constant{Base: time.Hour}), WithOnGiveUp(func(e Event) { gaveUp = e }))
		defer rt.CloseIdleConnections()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
		defer cancel()
		resp, _, err := do(t, rt, mustRequest(t, "GET", s.srv.URL, nil).WithContext(ctx))
		require.NoError(t, err)
		assert.Equal(t, 503, resp.StatusCode)
		assert.Empty(t, clock.waits())
		assert.Equal(t, StopDeadline, gaveUp.Reason)
	})
	t.Run("server wait past deadline", func(t *testing.T) {
		s := newScript(t, status(429, "Retry-After", "120"), status(200))
		rt, clock := testTransport(nil)
		defer rt.CloseIdleConnections()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		resp, _, err := do(t, rt, mustRequest(t, "GET", s.srv.URL, nil).WithContext(ctx))
		require.NoError(t, err)
		assert.Equal(t, 429, resp.StatusCode)
		assert.Empty(t, clock.waits())
	})
	t.Run("error past deadline", func(t *testing.T) {
		addr := closedAddr(t)
		rt, _ := testTransport(nil, WithBackoff(Constant{Base: time.Hour}))
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_, err := rt.RoundTrip(mustRequest(t, "GET", "http://"+addr, nil).WithContext(ctx))
		var re *Error
		require.ErrorAs(t, err, &re)
		assert.Equal(t, StopDeadline, re.Reason)
		assert.Equal(t, 1, re.Attempts)
	})
}

func TestCancelDuringWait(t *testing.T) {
	s := newScript(t, status(503))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// The real sleep: the hook cancels before the hour-long wait starts,
	// so the wait ends at once with the context's error.
	rt := New(nil, WithBackoff(Constant{Base: time.Hour}), WithOnRetry(func(Event) { cancel() }))
	defer rt.CloseIdleConnections()
	start := time.Now()
	_, err := rt.RoundTrip(mustRequest(t, "GET", s.srv.URL, nil).WithContext(ctx))
	require.Error(t, err)
	assert.ErrorIs(t, err, context.Canceled)
	var re *Error
	require.ErrorAs(t, err, &re)
	assert.Equal(t, StopCanceled, re.Reason)
	assert.Less(t, time.Since(start), time.Minute)
	assert.Len(t, s.requests(), 1)
}

func TestSleepHonoursContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	assert.ErrorIs(t, sleep(ctx, time.Hour), context.Canceled)
	assert.NoError(t, sleep(context.Background(), 0))
	assert.NoError(t, sleep(context.Background(), time.Nanosecond))
}

// closedAddr returns a loopback address nothing listens on.
func closedAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	l.Close()
	return addr
}

func TestErrorsWrapTheLastError(t *testing.T) {
	addr := closedAddr(t)
	var retries []Event
	rt, clock := testTransport(nil, WithMaxAttempts(3), WithOnRetry(func(e Event) { retries = append(retries, e) }))
	client := &http.Client{Transport: rt}
	// A POST is retried too: a refused dial sent nothing.
	_, err := client.Post("http://"+addr+"/x", "text/plain", strings.NewReader("body"))
	require.Error(t, err)
	var re *Error
	require.ErrorAs(t, err, &re)
	assert.Equal(t, 3, re.Attempts)
	assert.Equal(t, StopAttempts, re.Reason)
	var op *net.OpError
	assert.ErrorAs(t, err, &op, "errors.As must reach the dial error through *url.Error and *Error")
	assert.Contains(t, err.Error(), "3 attempts")
	assert.Len(t, clock.waits(), 2)
	require.Len(t, retries, 2)
	assert.Equal(t, Unsent, retries[0].Class)
}

// An unsafe request reset after it was written is not replayed: the server
// may have processed it.
func TestUnsafeRequestResetIsNotReplayed(t *testing.T) {
	var executions atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		executions.Add(1)
		conn, _, err := w.(http.Hijacker).Hijack()
		if err != nil {
			return
		}
		conn.(*net.TCPConn).SetLinger(0)
		conn.Close()
	}))
	defer srv.Close()
	var gaveUp Event
	rt, _ := testTransport(nil, WithOnGiveUp(func(e Event) { gaveUp = e }))
	defer rt.CloseIdleConnections()
	_, err := rt.RoundTrip(mustRequest(t, "POST", srv.URL, strings.NewReader("charge $10")))
	require.Error(t, err)
	assert.EqualValues(t, 1, executions.Load())
	assert.Equal(t, StopUnsafe, gaveUp.Reason)
	assert.Equal(t, Transient, gaveUp.Class)

	// The same failure for a GET is retried.
	executions.Store(0)
	_, err = rt.RoundTrip(mustRequest(t, "GET", srv.URL, nil))
	require.Error(t, err)
	assert.EqualValues(t, 4, executions.Load())
}

func TestAttemptVisibleToBase(t *testing.T) {
	s := newScript(t, status(503), status(503), status(200))
	var fromCtx []int
	real := http.DefaultTransport.(*http.Transport).Clone()
	defer real.CloseIdleConnections()
	base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		fromCtx = append(fromCtx, Attempt(r.Context()))
		return real.RoundTrip(r)
	})
	rt, _ := testTransport(base, WithAttemptHeader("X-Attempt"))
	req := mustRequest(t, "GET", s.srv.URL, nil)
	req.Header.Set("Accept", "text/plain")
	_, _, err := do(t, rt, req)
	require.NoError(t, err)
	assert.Equal(t, []int{1, 2, 3}, fromCtx)
	for i, r := range s.requests() {
		assert.Equal(t, fmt.Sprint(i+1), r.header.Get("X-Attempt"))
	}
	assert.Empty(t, req.Header.Get("X-Attempt"), "the caller's request must not be modified")
	assert.Equal(t, 0, Attempt(context.Background()))
}

func TestZeroValueTransport(t *testing.T) {
	s := newScript(t, status(503), status(200))
	rt := &Transport{}
	rt.sleep = (&fakeClock{}).sleep
	defer rt.CloseIdleConnections()
	resp, _, err := do(t, rt, mustRequest(t, "GET", s.srv.URL, nil))
	require.NoError(t, err)
	assert.Equal(t, 200, resp.StatusCode)
	require.NoError(t, rt.Validate())
}

func TestInvalidSettings(t *testing.T) {
	tests := []struct {
		name string
		t    *Transport
		want string
	}{
		{"negative attempts", &Transport{MaxAttempts: -1}, "MaxAttempts"},
		{"negative retry-after", &Transport{MaxRetryAfter: -time.Second}, "MaxRetryAfter"},
		{"negative buffer", &Transport{MaxBufferedBody: -1}, "MaxBufferedBody"},
		{"negative attempt timeout", &Transport{AttemptTimeout: -1}, "AttemptTimeout"},
		{"bad header", &Transport{AttemptHeader: "X Attempt"}, "AttemptHeader"},
		{"bad reset format", &Transport{RateLimitReset: 99}, "RateLimitReset"},
		{"bad backoff", &Transport{Backoff: Exponential{Base: time.Second, Cap: time.Millisecond}}, "Cap"},
		{"bad multiplier", &Transport{Backoff: Exponential{Base: time.Second, Multiplier: 0.5}}, "Multiplier"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.t.Validate()
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
			assert.True(t, strings.HasPrefix(err.Error(), "retry: "), err.Error())
			cc := &countingCloser{Reader: strings.NewReader("x")}
			req := mustRequest(t, "POST", "http://127.0.0.1:1/", cc)
			resp, err2 := tt.t.RoundTrip(req)
			assert.Nil(t, resp)
			assert.Equal(t, err, err2)
			assert.EqualValues(t, 1, cc.closes.Load(), "the body is closed on errors too")
		})
	}
}

// Endless error bodies are drained only up to the limit, then closed.
func TestEndlessErrorBody(t *testing.T) {
	done := make(chan struct{})
	defer close(done)
	var attempts atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if attempts.Add(1) == 3 {
			w.WriteHeader(200)
			return
		}
		w.WriteHeader(503)
		chunk := bytes.Repeat([]byte("e"), 32<<10)
		for i := 0; i < 1<<15; i++ { // bounded: at most 1 GiB
			select {
			case <-done:
				return
			case <-r.Context().Done():
				return
			default:
			}
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	}))
	defer srv.Close()
	rt, _ := testTransport(nil)
	defer rt.CloseIdleConnections()
	resp, _, err := do(t, rt, mustRequest(t, "GET", srv.URL, nil))
	require.NoError(t, err)
	assert.Equal(t, 200, resp.StatusCode)
	assert.EqualValues(t, 3, attempts.Load())
}

func TestEndlessThrottlingStopsAtMaxAttempts(t *testing.T) {
	s := newScript(t, status(503, "Retry-After", "1"))
	var gaveUp Event
	rt, clock := testTransport(nil, WithMaxAttempts(6), WithOnGiveUp(func(e Event) { gaveUp = e }))
	defer rt.CloseIdleConnections()
	resp, body, err := do(t, rt, mustRequest(t, "GET", s.srv.URL, nil))
	require.NoError(t, err)
	assert.Equal(t, 503, resp.StatusCode)
	assert.Equal(t, "status 503", body, "the last response is returned unread")
	assert.Len(t, s.requests(), 6)
	assert.Len(t, clock.waits(), 5)
	assert.Equal(t, StopAttempts, gaveUp.Reason)
	assert.Equal(t, 6, gaveUp.Attempt)
}

func TestPrevIsTheWaitSlept(t *testing.T) {
	s := newScript(t, status(503, "Retry-After", "2"), status(503), status(200))
	var prevs []time.Duration
	b := BackoffFunc(func(n int, prev time.Duration, u float64) time.Duration {
		prevs = append(prevs, prev)
		return time.Second
	})
	rt, clock := testTransport(nil, WithBackoff(b))
	defer rt.CloseIdleConnections()
	_, _, err := do(t, rt, mustRequest(t, "GET", s.srv.URL, nil))
	require.NoError(t, err)
	assert.Equal(t, []time.Duration{0, 2 * time.Second}, prevs)
	assert.Equal(t, []time.Duration{2 * time.Second, time.Second}, clock.waits())
}

func TestAttemptTimeout(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1) == 1 {
			select { // stall until the attempt is cancelled
			case <-r.Context().Done():
			case <-release:
			}
			return
		}
		w.WriteHeader(200)
		w.(http.Flusher).Flush()
		io.WriteString(w, "slow body")
	}))
	defer srv.Close()
	var retries []Event
	rt, _ := testTransport(nil, WithAttemptTimeout(50*time.Millisecond), WithOnRetry(func(e Event) { retries = append(retries, e) }))
	defer rt.CloseIdleConnections()
	resp, body, err := do(t, rt, mustRequest(t, "GET", srv.URL, nil))
	require.NoError(t, err)
	assert.Equal(t, 200, resp.StatusCode)
	assert.Equal(t, "slow body", body)
	require.Len(t, retries, 1)
	assert.Equal(t, Transient, retries[0].Class)
	assert.ErrorIs(t, retries[0].Err, context.DeadlineExceeded)
}

type fakeBudget struct{ allow bool }

func (b *fakeBudget) AllowRetry(Class) bool { return b.allow }
func (b *fakeBudget) Success(Class)         {}

func TestBudgetRefusal(t *testing.T) {
	s := newScript(t, status(503))
	var gaveUp Event
	rt, _ := testTransport(nil, WithBudget(&fakeBudget{}), WithOnGiveUp(func(e Event) { gaveUp = e }))
	defer rt.CloseIdleConnections()
	resp, _, err := do(t, rt, mustRequest(t, "GET", s.srv.URL, nil))
	require.NoError(t, err)
	assert.Equal(t, 503, resp.StatusCode)
	assert.Len(t, s.requests(), 1)
	assert.Equal(t, StopBudget, gaveUp.Reason)
}

type closeCounter struct {
	http.RoundTripper
	n int
}

func (c *closeCounter) CloseIdleConnections() { c.n++ }

func TestCloseIdleConnectionsForwarded(t *testing.T) {
	base := &closeCounter{RoundTripper: http.DefaultTransport}
	New(base).CloseIdleConnections()
	assert.Equal(t, 1, base.n)
	(&Transport{}).CloseIdleConnections() // its own pooled transport: no panic
}

// staticTransport answers every request at once, from memory.
type staticTransport struct{}

func (staticTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	return &http.Response{StatusCode: 200, Body: http.NoBody, Request: r}, nil
}

// allocSink keeps responses alive so their allocation is not optimised away.
var allocSink *http.Response

func TestFastPathAllocations(t *testing.T) {
	// The attempt's context (carrying its number) and its shallow request
	// clone cost 2; an idle Pacer may add one and adds none now. More means
	// the fast path regressed.
	tests := []struct {
		name string
		opts []Option
		max  float64
	}{
		{"defaults", nil, 2},
		{"idle pacer", []Option{WithPacer(&Pacer{})}, 3},
	}
	req := mustRequest(t, "GET", "http://127.0.0.1/", nil)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Both are called through the interface, as http.Client does,
			// so the compiler cannot elide the base's own allocations in
			// one of them.
			var base, rt http.RoundTripper = staticTransport{}, New(staticTransport{}, tt.opts...)
			bare := testing.AllocsPerRun(200, func() { allocSink, _ = base.RoundTrip(req) })
			ours := testing.AllocsPerRun(200, func() { allocSink, _ = rt.RoundTrip(req) })
			t.Logf("allocs/op: base %.0f, retry %.0f", bare, ours)
			if ours-bare > tt.max {
				t.Errorf("a first-try success costs %.0f allocations more than the base transport; want at most %.0f", ours-bare, tt.max)
			}
		})
	}
}
