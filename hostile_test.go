package retry

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"log"
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

// Hostile servers: each test states the limit that bounds it and the
// outcome (error or response, StopReason, number of attempts). The fake
// clock decides every backoff and server wait; real time is spent only where
// the bound itself is real time (an attempt timeout, a context deadline, the
// one-second drain limit), and each such test says how long.

// hostileLog is the ErrorLog of servers whose connections are cut on
// purpose: net/http's server logs those, and the tests print nothing.
var hostileLog = log.New(io.Discard, "", 0)

// hostileTransport is testTransport without the retry budget, so that a
// test's attempt count is decided by MaxAttempts alone.
func hostileTransport(base http.RoundTripper, opts ...Option) (*Transport, *fakeClock) {
	return testTransport(base, append([]Option{WithBudget(NoBudget)}, opts...)...)
}

// recorder records what a hook is called with, for concurrent calls.
type recorder[T any] struct {
	mu  sync.Mutex
	all []T
}

func (r *recorder[T]) hook(v T) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.all = append(r.all, v)
}

func (r *recorder[T]) last(t *testing.T) T {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	require.NotEmpty(t, r.all, "the hook was not called")
	return r.all[len(r.all)-1]
}

// giveUps records the OnGiveUp events of a Transport.
type giveUps = recorder[Event]

// Endless 503s with Connection: close, for a POST whose body has no
// GetBody: bound MaxAttempts (5). Every attempt opens a new connection and
// sends the whole body again; the last 503 is returned unread with a nil
// error, StopAttempts; the caller's body is closed once.
func TestHostileEndless503ClosingConnections(t *testing.T) {
	var s *script
	s = newScript(t, func(w http.ResponseWriter, r *http.Request) {
		s.record(r)
		w.Header().Set("Connection", "close")
		status(503)(w, r)
	})
	var g giveUps
	rt, clock := hostileTransport(nil, WithMaxAttempts(5), WithOnGiveUp(g.hook))
	defer rt.CloseIdleConnections()
	payload := bytes.Repeat([]byte("order #1 "), 1000)
	cc := &countingCloser{Reader: &opaqueReader{bytes.NewReader(payload)}}
	resp, body, err := do(t, rt, mustRequest(t, "POST", s.srv.URL, cc))
	require.NoError(t, err)
	assert.Equal(t, 503, resp.StatusCode)
	assert.Equal(t, "status 503", body)
	seen := s.requests()
	require.Len(t, seen, 5)
	for i, r := range seen {
		assert.Equal(t, sha256.Sum256(payload), r.bodySum, "attempt %d body", i+1)
	}
	assert.EqualValues(t, 5, s.newConn.Load(), "one connection per attempt")
	assert.Len(t, clock.Waits(), 4)
	assert.Equal(t, StopAttempts, g.last(t).Reason)
	assert.EqualValues(t, 1, cc.closes.Load())
}

// Endless 503s under a context deadline: bound the deadline (10s of fake
// time). With a constant 3s backoff the Transport sleeps 3s three times and
// then, as a fourth wait would end past the deadline, returns the fourth
// 503 at once: StopDeadline after 4 attempts, well under MaxAttempts.
func TestHostileEndless503UntilDeadline(t *testing.T) {
	forEachProto(t, func(t *testing.T, p proto) {
		s := newScriptOver(t, p, status(503))
		var g giveUps
		rt, clock := hostileTransport(s.base, WithMaxAttempts(100), WithBackoff(Constant{Base: 3 * time.Second}), WithOnGiveUp(g.hook))
		defer rt.CloseIdleConnections()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		resp, _, err := do(t, rt, mustRequest(t, "GET", s.srv.URL, nil).WithContext(ctx))
		require.NoError(t, err)
		assert.Equal(t, 503, resp.StatusCode)
		assert.Len(t, s.requests(), 4)
		assert.Equal(t, []time.Duration{3 * time.Second, 3 * time.Second, 3 * time.Second}, clock.Waits())
		assert.Equal(t, StopDeadline, g.last(t).Reason)
		assert.Equal(t, 4, g.last(t).Attempt)
	})
}

// Retry-After values a hostile or broken server sends, beyond those
// TestRetryAfter covers. Bound: MaxAttempts 2 and the default MaxRetryAfter
// (5 minutes); the first attempt gets the value on a 503, the second a 200.
// A valid value is a floor on the backoff (50ms here); an invalid one is
// ignored; one past MaxRetryAfter returns the 503 at once (StopServerWait).
func TestHostileRetryAfter(t *testing.T) {
	const backoff = 50 * time.Millisecond // DefaultBackoff's first retry with u = 0.5
	rfc850 := "Monday, 02-Jan-06 15:04:05 GMT"
	asctime := "Mon Jan _2 15:04:05 2006"
	tests := []struct {
		name   string
		value  func(now time.Time) []string // the field lines
		header string                       // the field name; Retry-After if empty
		wait   time.Duration                // the wait slept, within a second for dates
		stop   bool                         // returned at once, StopServerWait
	}{
		{name: "date far in the future", value: lit("Fri, 31 Dec 9999 23:59:59 GMT"), stop: true},
		{name: "date far in the past", value: lit("Thu, 01 Jan 1970 00:00:00 GMT"), wait: backoff},
		{name: "RFC 850 date 90s ahead", value: date(90*time.Second, rfc850), wait: 90 * time.Second},
		{name: "asctime date 20s ahead", value: date(20*time.Second, asctime), wait: 20 * time.Second},
		{name: "date exactly MaxRetryAfter ahead", value: date(DefaultMaxRetryAfter, http.TimeFormat), wait: DefaultMaxRetryAfter},
		{name: "date just past MaxRetryAfter", value: date(DefaultMaxRetryAfter+2*time.Second, http.TimeFormat), stop: true},
		{name: "date in a zone other than GMT", value: lit("Fri, 31 Dec 9999 23:59:59 PST"), wait: backoff},
		{name: "zero", value: lit("0"), wait: backoff},
		{name: "spaces around", value: lit(" \t7 "), wait: 7 * time.Second},
		{name: "a list", value: lit("3, 4"), wait: backoff},
		{name: "exponent", value: lit("1e3"), wait: backoff},
		{name: "minus zero", value: lit("-0"), wait: backoff},
		{name: "plus sign", value: lit("+5"), wait: backoff},
		{name: "unit", value: lit("5s"), wait: backoff},
		{name: "Arabic-Indic digit", value: lit("٣"), wait: backoff},
		{name: "NUL byte", value: lit("5\x00"), wait: backoff},
		{name: "2^64 seconds", value: lit("18446744073709551616"), stop: true},
		{name: "MaxRetryAfter in seconds", value: lit("300"), wait: 300 * time.Second},
		{name: "two lines: the first counts", value: lit("1", "100000"), wait: time.Second},
		{name: "two lines: an invalid first hides the second", value: lit("soon", "2"), wait: backoff},
		{name: "Retry-After-Ms huge", header: "Retry-After-Ms", value: lit("99999999999999999999"), stop: true},
		{name: "Retry-After-Ms negative", header: "Retry-After-Ms", value: lit("-5000"), wait: backoff},
		{name: "X-Amz-Retry-After fractional", header: "X-Amz-Retry-After", value: lit("1500.5"), wait: backoff},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var g giveUps
			rt, clock := hostileTransport(nil, WithMaxAttempts(2), WithOnGiveUp(g.hook))
			defer rt.CloseIdleConnections()
			name := tt.header
			if name == "" {
				name = "Retry-After"
			}
			lines := tt.value(clock.Now())
			s := newScript(t, func(w http.ResponseWriter, r *http.Request) {
				w.Header()[name] = lines
				w.WriteHeader(503)
			}, status(200))
			resp, _, err := do(t, rt, mustRequest(t, "GET", s.srv.URL, nil))
			require.NoError(t, err)
			if tt.stop {
				assert.Equal(t, 503, resp.StatusCode, "%s: %q", name, lines)
				assert.Len(t, s.requests(), 1)
				assert.Empty(t, clock.Waits())
				assert.Equal(t, StopServerWait, g.last(t).Reason)
				return
			}
			assert.Equal(t, 200, resp.StatusCode, "%s: %q", name, lines)
			assert.Len(t, s.requests(), 2)
			w := clock.Waits()
			require.Len(t, w, 1)
			// Dates have whole seconds: the wait is within a second below.
			assert.InDelta(t, float64(tt.wait), float64(w[0]), float64(time.Second), "%s: %q slept %v; want %v", name, lines, w[0], tt.wait)
			assert.LessOrEqual(t, w[0], tt.wait)
		})
	}
}

func lit(lines ...string) func(time.Time) []string {
	return func(time.Time) []string { return lines }
}

func date(ahead time.Duration, layout string) func(time.Time) []string {
	return func(now time.Time) []string { return []string{now.Add(ahead).UTC().Format(layout)} }
}

// A Retry-After does not make an unsafe request retryable: a POST that got
// a 500 asking to retry in 1s is returned at once, StopUnsafe, 1 attempt.
// The same on a GET is a floor on the backoff.
func TestHostileRetryAfterOnServerError(t *testing.T) {
	forEachProto(t, func(t *testing.T, p proto) {
		for _, method := range []string{"POST", "GET"} {
			t.Run(method, func(t *testing.T) {
				s := newScriptOver(t, p, status(500, "Retry-After", "1"), status(200))
				var g giveUps
				rt, clock := hostileTransport(s.base, WithOnGiveUp(g.hook))
				defer rt.CloseIdleConnections()
				resp, _, err := do(t, rt, mustRequest(t, method, s.srv.URL, strings.NewReader("x")))
				require.NoError(t, err)
				if method == "POST" {
					assert.Equal(t, 500, resp.StatusCode)
					assert.Len(t, s.requests(), 1)
					assert.Equal(t, StopUnsafe, g.last(t).Reason)
					return
				}
				assert.Equal(t, 200, resp.StatusCode)
				assert.Equal(t, []time.Duration{time.Second}, clock.Waits())
			})
		}
	})
}

// endless writes p every interval until the client goes away, done is
// closed, or a bound of n writes; it is the body of a hostile response.
func endless(w http.ResponseWriter, r *http.Request, done <-chan struct{}, p []byte, interval time.Duration, n int) {
	f := w.(http.Flusher)
	for range n {
		if _, err := w.Write(p); err != nil {
			return
		}
		f.Flush()
		if interval == 0 {
			continue
		}
		select {
		case <-done:
			return
		case <-r.Context().Done():
			return
		case <-time.After(interval):
		}
	}
}

// An error body that trickles for ever (a byte every 50ms): bound the drain
// limit of a discarded response, one second (drainTimeout), real time. The
// first 503 is drained for at most that long and closed, the second attempt
// succeeds: about 1s in all.
func TestHostileTricklingErrorBody(t *testing.T) {
	forEachProto(t, func(t *testing.T, p proto) {
		done := make(chan struct{})
		defer close(done)
		var attempts atomic.Int32
		srv := p.server(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if attempts.Add(1) > 1 {
				w.WriteHeader(200)
				return
			}
			w.WriteHeader(503)
			endless(w, r, done, []byte("e"), 50*time.Millisecond, 1000)
		}))
		rt, _ := hostileTransport(p.base(t, srv))
		defer rt.CloseIdleConnections()
		start := time.Now()
		resp, _, err := do(t, rt, mustRequest(t, "GET", srv.URL, nil))
		elapsed := time.Since(start)
		require.NoError(t, err)
		assert.Equal(t, 200, resp.StatusCode)
		assert.EqualValues(t, 2, attempts.Load())
		assert.GreaterOrEqual(t, elapsed, drainTimeout, "the discarded body was drained until the limit")
		assert.Less(t, elapsed, drainTimeout+2*time.Second, "the drain is bounded by drainTimeout")
	})
}

// An endless error body on a response that is returned (a POST's 500, or
// the last attempt's 503) is not read by the Transport: RoundTrip returns
// as soon as the headers arrive, and the caller decides how much to read.
// Bound: the caller reads 4 KiB and closes; the server writes at most
// 1 GiB and stops when the connection closes.
func TestHostileEndlessBodyReturned(t *testing.T) {
	forEachProto(t, func(t *testing.T, p proto) {
		for _, tt := range []struct {
			method string
			code   int
			stop   StopReason
		}{{"POST", 500, StopUnsafe}, {"GET", 503, StopAttempts}} {
			t.Run(tt.method, func(t *testing.T) {
				done := make(chan struct{})
				defer close(done)
				var attempts atomic.Int32
				srv := p.server(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					attempts.Add(1)
					w.WriteHeader(tt.code)
					endless(w, r, done, bytes.Repeat([]byte("e"), 32<<10), 0, 1<<15)
				}))
				var g giveUps
				rt, _ := hostileTransport(p.base(t, srv), WithMaxAttempts(2), WithOnGiveUp(g.hook))
				defer rt.CloseIdleConnections()
				resp, err := rt.RoundTrip(mustRequest(t, tt.method, srv.URL, strings.NewReader("x")))
				require.NoError(t, err)
				assert.Equal(t, tt.code, resp.StatusCode)
				n, err := io.CopyN(io.Discard, resp.Body, 4<<10)
				assert.NoError(t, err)
				assert.EqualValues(t, 4<<10, n)
				require.NoError(t, resp.Body.Close())
				assert.Equal(t, tt.stop, g.last(t).Reason)
			})
		}
	})
}

// trickle writes s to the hijacked connection of w one byte per interval,
// until the client goes away or done is closed.
func trickle(w http.ResponseWriter, done <-chan struct{}, s string, interval time.Duration) {
	conn, _, err := w.(http.Hijacker).Hijack()
	if err != nil {
		return
	}
	defer conn.Close()
	for i := 0; i < len(s); i++ {
		if _, err := conn.Write([]byte{s[i]}); err != nil {
			return
		}
		select {
		case <-done:
			return
		case <-time.After(interval):
		}
	}
}

// A server that sends its response headers one byte a second. Bounds: an
// AttemptTimeout of 200ms, real time, or the caller's deadline of 300ms.
// With the attempt timeout a GET times out on each of its 3 attempts
// (transient) and gives up with a *Error, StopAttempts, that is an
// ErrAttemptTimeout; a POST gives up after 1 attempt, StopUnsafe. With the
// caller's deadline alone the first attempt ends with the context's error,
// StopCanceled. About 1.1s in all.
func TestHostileTrickledHeaders(t *testing.T) {
	const head = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
	newServer := func(t *testing.T) (*httptest.Server, *atomic.Int32) {
		done := make(chan struct{})
		var n atomic.Int32
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			n.Add(1)
			io.Copy(io.Discard, r.Body)
			trickle(w, done, head, time.Second)
		}))
		t.Cleanup(func() { close(done); srv.Close() })
		return srv, &n
	}
	tests := []struct {
		method   string
		timeout  time.Duration // AttemptTimeout
		deadline time.Duration // the caller's
		attempts int
		stop     StopReason
		is       error
	}{
		{"GET", 200 * time.Millisecond, 0, 3, StopAttempts, ErrAttemptTimeout},
		{"POST", 200 * time.Millisecond, 0, 1, StopUnsafe, ErrAttemptTimeout},
		{"GET", 0, 300 * time.Millisecond, 1, StopCanceled, context.DeadlineExceeded},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s timeout=%v deadline=%v", tt.method, tt.timeout, tt.deadline), func(t *testing.T) {
			srv, n := newServer(t)
			rt, _ := hostileTransport(nil, WithMaxAttempts(3), WithAttemptTimeout(tt.timeout))
			defer rt.CloseIdleConnections()
			ctx := context.Background()
			if tt.deadline > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, tt.deadline)
				defer cancel()
			}
			start := time.Now()
			resp, err := rt.RoundTrip(mustRequest(t, tt.method, srv.URL, strings.NewReader("x")).WithContext(ctx))
			elapsed := time.Since(start)
			require.Error(t, err)
			assert.Nil(t, resp)
			var re *Error
			require.ErrorAs(t, err, &re)
			assert.Equal(t, tt.attempts, re.Attempts)
			assert.Equal(t, tt.stop, re.Reason)
			assert.ErrorIs(t, err, tt.is)
			assert.EqualValues(t, tt.attempts, n.Load())
			bound := time.Duration(tt.attempts)*tt.timeout + tt.deadline
			assert.Less(t, elapsed, bound+time.Second, "bounded by %v", bound)
		})
	}
}

// A response that stalls after its headers. A 200 is a success, returned
// as soon as its headers arrive; reading its body then fails when the
// caller's deadline ends (400ms, or 300ms), real time: AttemptTimeout
// (50ms) does not bound the body of the response it returns. A
// 503 that stalls is discarded: its drain ends at the attempt's timeout
// (200ms) or, with none, at drainTimeout (1s), and the next attempt
// succeeds.
func TestHostileStallAfterHeaders(t *testing.T) {
	forEachProto(t, func(t *testing.T, p proto) { testStallAfterHeaders(t, p) })
}

func testStallAfterHeaders(t *testing.T, p proto) {
	newServer := func(t *testing.T, code int) (*httptest.Server, *atomic.Int32) {
		done := make(chan struct{})
		var n atomic.Int32
		srv := p.server(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if n.Add(1) > 1 && code != 200 {
				io.WriteString(w, "ok")
				return
			}
			w.Header().Set("Content-Length", "100")
			w.WriteHeader(code)
			io.WriteString(w, "partial")
			w.(http.Flusher).Flush()
			select { // stall
			case <-done:
			case <-r.Context().Done():
			}
		}))
		t.Cleanup(func() { close(done); srv.Close() }) // before p.server's Close
		return srv, &n
	}
	t.Run("200 with AttemptTimeout", func(t *testing.T) {
		// The attempt's timeout bounds the wait for the response, not the
		// reading of the body returned: that ends at the caller's deadline.
		srv, _ := newServer(t, 200)
		rt, _ := hostileTransport(p.base(t, srv), WithAttemptTimeout(50*time.Millisecond))
		defer rt.CloseIdleConnections()
		ctx, cancel := context.WithTimeout(context.Background(), 400*time.Millisecond)
		defer cancel()
		start := time.Now()
		resp, err := rt.RoundTrip(mustRequest(t, "GET", srv.URL, nil).WithContext(ctx))
		require.NoError(t, err)
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		assert.Equal(t, "partial", string(b))
		assert.ErrorIs(t, err, context.DeadlineExceeded)
		assert.NotErrorIs(t, err, ErrAttemptTimeout)
		assert.GreaterOrEqual(t, time.Since(start), 400*time.Millisecond)
		assert.Less(t, time.Since(start), 5*time.Second)
	})
	t.Run("200 with a deadline", func(t *testing.T) {
		srv, _ := newServer(t, 200)
		rt, _ := hostileTransport(p.base(t, srv))
		defer rt.CloseIdleConnections()
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		defer cancel()
		resp, err := rt.RoundTrip(mustRequest(t, "GET", srv.URL, nil).WithContext(ctx))
		require.NoError(t, err)
		defer resp.Body.Close()
		_, err = io.ReadAll(resp.Body)
		assert.ErrorIs(t, err, context.DeadlineExceeded)
	})
	for _, timeout := range []time.Duration{200 * time.Millisecond, 0} {
		t.Run(fmt.Sprintf("503 with AttemptTimeout=%v", timeout), func(t *testing.T) {
			srv, n := newServer(t, 503)
			rt, _ := hostileTransport(p.base(t, srv), WithAttemptTimeout(timeout))
			defer rt.CloseIdleConnections()
			start := time.Now()
			resp, body, err := do(t, rt, mustRequest(t, "GET", srv.URL, nil))
			elapsed := time.Since(start)
			require.NoError(t, err)
			assert.Equal(t, 200, resp.StatusCode)
			assert.Equal(t, "ok", body)
			assert.EqualValues(t, 2, n.Load())
			bound := drainTimeout
			if timeout > 0 {
				bound = timeout
			}
			assert.GreaterOrEqual(t, elapsed, bound)
			assert.Less(t, elapsed, bound+time.Second)
		})
	}
}

// A server that closes every connection after reading the request,
// without answering: it executed the request, and the client sees EOF.
// Bound: MaxAttempts (4). A GET is replayed on a new connection each time
// and gives up with a *Error, StopAttempts, that is io.EOF; a POST is
// executed once and gives up after 1 attempt, StopUnsafe; a POST with an
// Idempotency-Key is replayed like the GET.
//
// A server that closes before reading the body (1 MiB, so the client is
// still writing) executed nothing, but the POST had written its headers:
// it is not replayed either (StopUnsafe), as the Transport cannot know.
func TestHostileCloseEveryConnection(t *testing.T) {
	newServer := func(t *testing.T, readBody bool) (*httptest.Server, *atomic.Int32, *atomic.Int32) {
		var executed, conns atomic.Int32
		srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if readBody {
				if _, err := io.Copy(io.Discard, r.Body); err == nil {
					executed.Add(1)
				}
			}
			conn, _, err := w.(http.Hijacker).Hijack()
			if err == nil {
				conn.Close()
			}
		}))
		srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
			if s == http.StateNew {
				conns.Add(1)
			}
		}
		srv.Start()
		t.Cleanup(srv.Close)
		return srv, &executed, &conns
	}
	tests := []struct {
		name     string
		method   string
		key      bool
		readBody bool
		body     int
		attempts int
		stop     StopReason
	}{
		{"GET", "GET", false, true, 0, 4, StopAttempts},
		{"POST", "POST", false, true, 100, 1, StopUnsafe},
		{"POST with key", "POST", true, true, 100, 4, StopAttempts},
		{"POST closed before its body", "POST", false, false, 1 << 20, 1, StopUnsafe},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv, executed, conns := newServer(t, tt.readBody)
			rt, _ := hostileTransport(nil)
			defer rt.CloseIdleConnections()
			req := mustRequest(t, tt.method, srv.URL, &opaqueReader{bytes.NewReader(make([]byte, tt.body))})
			if tt.key {
				req.Header.Set("Idempotency-Key", "k")
			}
			resp, err := rt.RoundTrip(req)
			assert.Nil(t, resp)
			var re *Error
			require.ErrorAs(t, err, &re)
			assert.Equal(t, tt.attempts, re.Attempts)
			assert.Equal(t, tt.stop, re.Reason)
			assert.EqualValues(t, tt.attempts, conns.Load(), "one connection per attempt")
			if tt.readBody {
				assert.EqualValues(t, tt.attempts, executed.Load())
				assert.True(t, errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF), "error %v; want an EOF", err)
			} else {
				assert.Zero(t, executed.Load())
			}
		})
	}
}

// HTTP/2 (TLS, net/http's server) whose connections are closed under an
// executed request, with no response: a GET is replayed on a new
// connection and succeeds; a POST is executed once and gives up after 1
// attempt, StopUnsafe. Then a graceful Shutdown mid-stream, which sends
// GOAWAY: the stream in flight completes (no retry, executed once), and a
// request after it finds no server: unsent, retried until MaxAttempts (4),
// StopAttempts. Bound: MaxAttempts; the handler waits for the test, never
// on a timer.
func TestHostileHTTP2(t *testing.T) {
	t.Run("connections closed under a request", func(t *testing.T) {
		for _, method := range []string{"GET", "POST"} {
			t.Run(method, func(t *testing.T) {
				var executed atomic.Int32
				inHandler := make(chan struct{}, 1)
				release := make(chan struct{})
				srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					io.Copy(io.Discard, r.Body)
					if executed.Add(1) == 1 {
						inHandler <- struct{}{}
						select {
						case <-release:
						case <-r.Context().Done():
						}
						return
					}
					io.WriteString(w, "ok")
				}))
				srv.EnableHTTP2 = true
				srv.Config.ErrorLog = hostileLog
				srv.StartTLS()
				defer srv.Close()
				defer close(release)
				go func() {
					<-inHandler
					srv.CloseClientConnections()
				}()
				var g giveUps
				base := srv.Client().Transport
				rt, _ := hostileTransport(base, WithOnGiveUp(g.hook))
				defer rt.CloseIdleConnections()
				resp, err := rt.RoundTrip(mustRequest(t, method, srv.URL, strings.NewReader("body")))
				if method == "GET" {
					require.NoError(t, err)
					defer resp.Body.Close()
					assert.Equal(t, "HTTP/2.0", resp.Proto)
					assert.EqualValues(t, 2, executed.Load())
					return
				}
				var re *Error
				require.ErrorAs(t, err, &re)
				assert.Equal(t, StopUnsafe, re.Reason)
				assert.Equal(t, 1, re.Attempts)
				assert.EqualValues(t, 1, executed.Load())
			})
		}
	})
	t.Run("GOAWAY by Shutdown mid-stream", func(t *testing.T) {
		var executed atomic.Int32
		midStream := make(chan struct{})
		goAwaySent := make(chan struct{})
		srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			io.Copy(io.Discard, r.Body)
			executed.Add(1)
			io.WriteString(w, "first half, ")
			w.(http.Flusher).Flush()
			close(midStream)
			<-goAwaySent
			io.WriteString(w, "second half")
		}))
		srv.EnableHTTP2 = true
		srv.Config.ErrorLog = hostileLog
		srv.StartTLS()
		defer srv.Close()
		shutdown := make(chan error, 1)
		go func() {
			<-midStream
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			srv.Config.RegisterOnShutdown(func() { close(goAwaySent) })
			shutdown <- srv.Config.Shutdown(ctx)
		}()
		var retries atomic.Int32
		rt, _ := hostileTransport(srv.Client().Transport, WithOnRetry(func(Event) { retries.Add(1) }))
		defer rt.CloseIdleConnections()
		resp, body, err := do(t, rt, mustRequest(t, "POST", srv.URL, strings.NewReader("body")))
		require.NoError(t, err)
		assert.Equal(t, "HTTP/2.0", resp.Proto)
		assert.Equal(t, "first half, second half", body)
		assert.NoError(t, <-shutdown)
		assert.EqualValues(t, 1, executed.Load())
		assert.Zero(t, retries.Load())

		_, err = rt.RoundTrip(mustRequest(t, "POST", srv.URL, strings.NewReader("body")))
		var re *Error
		require.ErrorAs(t, err, &re)
		assert.Equal(t, StopAttempts, re.Reason)
		assert.Equal(t, DefaultMaxAttempts, re.Attempts)
		assert.EqualValues(t, 1, executed.Load())
	})
}

// resetBase is a base transport whose every attempt is reset after the
// request was written, and that counts its attempts.
func resetBase(calls *int) http.RoundTripper {
	return roundTripFunc(func(r *http.Request) (*http.Response, error) {
		*calls++
		if r.Body != nil {
			r.Body.Close()
		}
		return nil, &net.OpError{Op: "read", Net: "tcp", Err: errors.New("connection reset by peer")}
	})
}

// TestClassifierSuccessOnErrorIsPermanent: a hostile (or careless)
// Classifier that answers Success for an error outcome must not make
// RoundTrip return a nil response and a nil error, which would break the
// http.RoundTripper contract: the answer is taken as Permanent.
func TestClassifierSuccessOnErrorIsPermanent(t *testing.T) {
	calls := 0
	rt, _ := hostileTransport(resetBase(&calls), WithClassifier(func(Outcome) Class { return Success }))
	resp, err := rt.RoundTrip(mustRequest(t, "GET", "http://127.0.0.1:1/", nil))
	if resp == nil && err == nil {
		t.Errorf("RoundTrip = nil, nil after %d attempt(s); want a response or an error", calls)
	}
	if resp != nil {
		resp.Body.Close()
	}
}

// TestUnknownClassIsPermanent: a Classifier that answers a Class outside
// the constants (Class(9)) for a POST reset after it was written must not
// get the POST replayed: an unknown answer is taken as Permanent.
func TestUnknownClassIsPermanent(t *testing.T) {
	calls := 0
	rt, _ := hostileTransport(resetBase(&calls), WithClassifier(func(Outcome) Class { return Class(9) }))
	_, err := rt.RoundTrip(mustRequest(t, "POST", "http://127.0.0.1:1/", strings.NewReader("charge")))
	if calls != 1 {
		t.Errorf("an unsafe POST was sent %d times on an unknown class (%v); want 1", calls, err)
	}
}
