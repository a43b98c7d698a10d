package retry

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/backoff-jitter/retry/internal/fakeclock"
	"github.com/hashicorp/go-cleanhttp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fakeClock is the clock and sleep of a Transport under test.
type fakeClock = fakeclock.Clock

// testTransport returns a Transport over base with a fake clock starting
// at the real time (so context deadlines line up) and u fixed at 0.5.
func testTransport(base http.RoundTripper, opts ...Option) (*Transport, *fakeClock) {
	clock := fakeclock.New(time.Now())
	t := New(base, opts...)
	t.now, t.sleep = clock.Now, clock.Sleep
	t.rand = func() float64 { return 0.5 }
	return t, clock
}

// proto is one of the protocols every transport test runs over: the
// default base (cleanhttp's pooled transport) speaks HTTP/1.1 to plain
// servers and negotiates HTTP/2 with TLS servers that offer it, and a
// base configured for it speaks HTTP/2 over cleartext (h2c).
type proto struct {
	name string
	h2   bool
	tls  bool
}

var (
	http1  = proto{name: "HTTP1"}
	protos = []proto{http1, {name: "h2c", h2: true}, {name: "h2TLS", h2: true, tls: true}}
)

// forEachProto runs f as a subtest over each protocol.
func forEachProto(t *testing.T, f func(t *testing.T, p proto)) {
	t.Helper()
	for _, p := range protos {
		t.Run(p.name, func(t *testing.T) { f(t, p) })
	}
}

// server starts h on a loopback server that speaks p, closed when the test
// ends. A request that arrives over another protocol fails the test, so a
// test cannot pass over HTTP/1.1 while it claims HTTP/2.
// Each of configure is called before the server starts.
func (p proto) server(t *testing.T, h http.Handler, configure ...func(*httptest.Server)) *httptest.Server {
	t.Helper()
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if (r.ProtoMajor == 2) != p.h2 {
			t.Errorf("request over %s; want %s", r.Proto, p.name)
		}
		h.ServeHTTP(w, r)
	}))
	srv.Config.ErrorLog = hostileLog
	// Headers up to 64 MiB, for the tests that stall a write with them.
	srv.Config.MaxHeaderBytes = 64 << 20
	for _, c := range configure {
		c(srv)
	}
	switch {
	case p.tls:
		srv.EnableHTTP2 = true
		srv.StartTLS()
	case p.h2:
		var ps http.Protocols
		ps.SetUnencryptedHTTP2(true)
		srv.Config.Protocols = &ps
		srv.Start()
	default:
		srv.Start()
	}
	t.Cleanup(srv.Close)
	return srv
}

// base returns a new base transport for srv, made as New(nil) makes its
// own, configured to speak p; its idle connections are closed when the
// test ends.
func (p proto) base(t *testing.T, srv *httptest.Server) *http.Transport {
	tr := cleanhttp.DefaultPooledTransport()
	switch {
	case p.tls:
		pool := x509.NewCertPool()
		pool.AddCert(srv.Certificate())
		tr.TLSClientConfig = &tls.Config{RootCAs: pool}
	case p.h2:
		var ps http.Protocols
		ps.SetUnencryptedHTTP2(true)
		tr.Protocols = &ps
	}
	t.Cleanup(tr.CloseIdleConnections)
	return tr
}

// script is a loopback server that answers attempt i with steps[i] (the
// last step repeats), recording every request it saw, and a base
// transport that speaks its protocol.
type script struct {
	srv     *httptest.Server
	base    *http.Transport
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

// newScript is newScriptOver HTTP/1.1.
func newScript(t *testing.T, steps ...func(w http.ResponseWriter, r *http.Request)) *script {
	t.Helper()
	return newScriptOver(t, http1, steps...)
}

func newScriptOver(t *testing.T, p proto, steps ...func(w http.ResponseWriter, r *http.Request)) *script {
	t.Helper()
	s := &script{steps: steps}
	s.srv = p.server(t, http.HandlerFunc(s.serve), func(srv *httptest.Server) {
		srv.Config.ConnState = func(_ net.Conn, st http.ConnState) {
			if st == http.StateNew {
				s.newConn.Add(1)
			}
		}
	})
	s.base = p.base(t, s.srv)
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
	forEachProto(t, func(t *testing.T, p proto) {
		s := newScriptOver(t, p, status(503), status(429), status(200))
		rt, clock := testTransport(s.base)
		defer rt.CloseIdleConnections()

		resp, body, err := do(t, rt, mustRequest(t, "GET", s.srv.URL, nil))
		require.NoError(t, err)
		assert.Equal(t, 200, resp.StatusCode)
		assert.Equal(t, "status 200", body)
		assert.Len(t, s.requests(), 3)
		// Exponential{100ms, 20s, FullJitter} with u = 0.5: 50ms, then 100ms.
		assert.Equal(t, []time.Duration{50 * time.Millisecond, 100 * time.Millisecond}, clock.Waits())
		assert.EqualValues(t, 1, s.newConn.Load(), "discarded responses must be drained so the connection is reused")
	})
}

func TestMethodSafety(t *testing.T) {
	forEachProto(t, func(t *testing.T, p proto) {
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
				s := newScriptOver(t, p, func(w http.ResponseWriter, r *http.Request) {
					s := status(tt.status)
					s(w, r)
				})
				rt, _ := testTransport(s.base)
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
	})
}

// opaqueReader hides every method of its reader but Read, so net/http
// cannot set GetBody for it.
type opaqueReader struct{ r io.Reader }

func (o *opaqueReader) Read(p []byte) (int, error) { return o.r.Read(p) }

// countingCloser counts Close calls on a request body.
type countingCloser struct {
	io.Reader
	closes atomic.Int32
	mu     sync.Mutex
	closed chan struct{} // made by waitClosed; closed by the first Close
}

func (c *countingCloser) Close() error {
	if c.closes.Add(1) == 1 {
		c.mu.Lock()
		if c.closed == nil {
			c.closed = make(chan struct{})
		}
		close(c.closed)
		c.mu.Unlock()
	}
	return nil
}

// assertClosedOnce checks that the body was closed exactly once. The
// RoundTripper contract lets the close come after RoundTrip returned, from
// another goroutine, as net/http's HTTP/2 client does: it is waited for,
// within a bound that only a missing close reaches.
func assertClosedOnce(t *testing.T, c *countingCloser) {
	t.Helper()
	c.mu.Lock()
	if c.closed == nil {
		c.closed = make(chan struct{})
	}
	closed := c.closed
	c.mu.Unlock()
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
	}
	assert.EqualValues(t, 1, c.closes.Load(), "the caller's body must be closed exactly once")
}

func TestBodiesReplayedExactly(t *testing.T) {
	forEachProto(t, func(t *testing.T, p proto) {
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
				s = newScriptOver(t, p, consume(503), consume(503), consume(200))
				rt, _ := testTransport(s.base)
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
					assertClosedOnce(t, tt.closer)
				}
			})
		}
	})
}

// TestBodyReplayAfterEarlyResponse sends a large opaque body to a server
// that refuses the first attempt before reading it: the retry must still
// send every byte, though the first attempt read only part of the body.
func TestBodyReplayAfterEarlyResponse(t *testing.T) {
	forEachProto(t, func(t *testing.T, p proto) {
		payload := make([]byte, 1<<20)
		for i := range payload {
			payload[i] = byte(i * 7)
		}
		var s *script
		s = newScriptOver(t, p,
			func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Connection", "close")
				w.WriteHeader(503)
			},
			func(w http.ResponseWriter, r *http.Request) { s.record(r); w.WriteHeader(201) },
		)
		rt, _ := testTransport(s.base)
		defer rt.CloseIdleConnections()
		cc := &countingCloser{Reader: &opaqueReader{bytes.NewReader(payload)}}
		resp, _, err := do(t, rt, mustRequest(t, "PUT", s.srv.URL, cc))
		require.NoError(t, err)
		assert.Equal(t, 201, resp.StatusCode)
		seen := s.requests()
		require.Len(t, seen, 2)
		assert.Equal(t, len(payload), seen[1].bodyLen)
		assert.Equal(t, sha256.Sum256(payload), seen[1].bodySum)
		assertClosedOnce(t, cc)
	})
}

func TestBodyTooLargeIsSentOnce(t *testing.T) {
	forEachProto(t, func(t *testing.T, p proto) {
		var s *script
		s = newScriptOver(t, p, func(w http.ResponseWriter, r *http.Request) { s.record(r); w.WriteHeader(503) })
		var gaveUp Event
		rt, _ := testTransport(s.base, WithMaxBufferedBody(1024), WithOnGiveUp(func(e Event) { gaveUp = e }))
		defer rt.CloseIdleConnections()
		payload := bytes.Repeat([]byte("x"), 4096)
		resp, _, err := do(t, rt, mustRequest(t, "PUT", s.srv.URL, &opaqueReader{bytes.NewReader(payload)}))
		require.NoError(t, err)
		assert.Equal(t, 503, resp.StatusCode)
		require.Len(t, s.requests(), 1)
		assert.Equal(t, 4096, s.requests()[0].bodyLen)
		assert.Equal(t, StopBody, gaveUp.Reason)
	})
}

// roundTripFunc adapts a function to http.RoundTripper.
type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// A body too large to buffer is still retried while none of it was read,
// as when the dial failed.
func TestBodyTooLargeRetriedWhenUnread(t *testing.T) {
	forEachProto(t, func(t *testing.T, p proto) {
		var s *script
		s = newScriptOver(t, p, func(w http.ResponseWriter, r *http.Request) { s.record(r); w.WriteHeader(200) })
		calls := 0
		base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
			calls++
			if calls == 1 {
				r.Body.Close()
				return nil, &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")}
			}
			return s.base.RoundTrip(r)
		})
		rt, _ := testTransport(base, WithMaxBufferedBody(16))
		payload := bytes.Repeat([]byte("y"), 1000)
		resp, _, err := do(t, rt, mustRequest(t, "POST", s.srv.URL, &opaqueReader{bytes.NewReader(payload)}))
		require.NoError(t, err)
		assert.Equal(t, 200, resp.StatusCode)
		assert.Equal(t, 2, calls)
		assert.Equal(t, sha256.Sum256(payload), s.requests()[0].bodySum)
	})
}

func TestRetryAfter(t *testing.T) {
	forEachProto(t, func(t *testing.T, p proto) {
		t.Run("floor over backoff", func(t *testing.T) {
			s := newScriptOver(t, p, status(503, "Retry-After", "3"), status(200))
			var events []Event
			rt, clock := testTransport(s.base, WithOnRetry(func(e Event) { events = append(events, e) }))
			defer rt.CloseIdleConnections()
			resp, _, err := do(t, rt, mustRequest(t, "GET", s.srv.URL, nil))
			require.NoError(t, err)
			assert.Equal(t, 200, resp.StatusCode)
			assert.Equal(t, []time.Duration{3 * time.Second}, clock.Waits())
			require.Len(t, events, 1)
			assert.True(t, events[0].FromServer)
			assert.Equal(t, 503, events[0].StatusCode)
			assert.Equal(t, Throttled, events[0].Class)
		})
		t.Run("backoff longer than server", func(t *testing.T) {
			s := newScriptOver(t, p, status(429, "Retry-After", "1"), status(200))
			rt, clock := testTransport(s.base, WithBackoff(Constant{Base: 2 * time.Second}))
			defer rt.CloseIdleConnections()
			_, _, err := do(t, rt, mustRequest(t, "GET", s.srv.URL, nil))
			require.NoError(t, err)
			assert.Equal(t, []time.Duration{2 * time.Second}, clock.Waits())
		})
		t.Run("http date", func(t *testing.T) {
			date := time.Now().Add(90 * time.Second).UTC().Format(http.TimeFormat)
			s := newScriptOver(t, p, status(503, "Retry-After", date), status(200))
			rt, clock := testTransport(s.base)
			_, _, err := do(t, rt, mustRequest(t, "GET", s.srv.URL, nil))
			require.NoError(t, err)
			w := clock.Waits()
			require.Len(t, w, 1)
			// The date has whole seconds: the wait is within a second of 90s.
			assert.InDelta(t, 90*time.Second, w[0], float64(time.Second))
		})
		t.Run("longer than MaxRetryAfter is returned at once", func(t *testing.T) {
			for _, v := range []string{"301", "86400", "99999999999999999999999"} {
				s := newScriptOver(t, p, status(503, "Retry-After", v), status(200))
				var gaveUp Event
				rt, clock := testTransport(s.base, WithOnGiveUp(func(e Event) { gaveUp = e }))
				resp, _, err := do(t, rt, mustRequest(t, "GET", s.srv.URL, nil))
				rt.CloseIdleConnections()
				require.NoError(t, err)
				assert.Equal(t, 503, resp.StatusCode, "Retry-After %s", v)
				assert.Empty(t, clock.Waits())
				assert.Len(t, s.requests(), 1)
				assert.Equal(t, StopServerWait, gaveUp.Reason)
			}
		})
		t.Run("malformed values are ignored", func(t *testing.T) {
			for _, v := range []string{"-5", "1.5", "soon", "0x10", ""} {
				s := newScriptOver(t, p, status(503, "Retry-After", v), status(200))
				rt, clock := testTransport(s.base)
				_, _, err := do(t, rt, mustRequest(t, "GET", s.srv.URL, nil))
				rt.CloseIdleConnections()
				require.NoError(t, err)
				assert.Equal(t, []time.Duration{50 * time.Millisecond}, clock.Waits(), "Retry-After %q", v)
			}
		})
	})
}

func TestDeadline(t *testing.T) {
	forEachProto(t, func(t *testing.T, p proto) {
		t.Run("backoff past deadline", func(t *testing.T) {
			s := newScriptOver(t, p, status(503), status(200))
			var gaveUp Event
			rt, clock := testTransport(s.base, WithBackoff(Constant{Base: time.Hour}), WithOnGiveUp(func(e Event) { gaveUp = e }))
			defer rt.CloseIdleConnections()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
			defer cancel()
			resp, _, err := do(t, rt, mustRequest(t, "GET", s.srv.URL, nil).WithContext(ctx))
			require.NoError(t, err)
			assert.Equal(t, 503, resp.StatusCode)
			assert.Empty(t, clock.Waits())
			assert.Equal(t, StopDeadline, gaveUp.Reason)
		})
		t.Run("server wait past deadline", func(t *testing.T) {
			s := newScriptOver(t, p, status(429, "Retry-After", "120"), status(200))
			rt, clock := testTransport(s.base)
			defer rt.CloseIdleConnections()
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			resp, _, err := do(t, rt, mustRequest(t, "GET", s.srv.URL, nil).WithContext(ctx))
			require.NoError(t, err)
			assert.Equal(t, 429, resp.StatusCode)
			assert.Empty(t, clock.Waits())
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
	})
}

func TestCancelDuringWait(t *testing.T) {
	forEachProto(t, func(t *testing.T, p proto) {
		s := newScriptOver(t, p, status(503))
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		// The real sleep: the hook cancels before the hour-long wait starts,
		// so the wait ends at once with the context's error.
		rt := New(s.base, WithBackoff(Constant{Base: time.Hour}), WithOnRetry(func(Event) { cancel() }))
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
	})
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
	assert.Len(t, clock.Waits(), 2)
	require.Len(t, retries, 2)
	assert.Equal(t, Unsent, retries[0].Class)
}

// An unsafe request reset after it was written is not replayed: the server
// may have processed it.
func TestUnsafeRequestResetIsNotReplayed(t *testing.T) {
	forEachProto(t, func(t *testing.T, p proto) {
		var executions atomic.Int32
		srv := p.server(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			io.Copy(io.Discard, r.Body)
			executions.Add(1)
			// HTTP/1.1: the connection is closed; HTTP/2: the stream is reset
			// (INTERNAL_ERROR).
			panic(http.ErrAbortHandler)
		}))
		var gaveUp Event
		rt, _ := testTransport(p.base(t, srv), WithOnGiveUp(func(e Event) { gaveUp = e }))
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
	})
}

func TestAttemptVisibleToBase(t *testing.T) {
	forEachProto(t, func(t *testing.T, p proto) {
		s := newScriptOver(t, p, status(503), status(503), status(200))
		var fromCtx []int
		base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
			fromCtx = append(fromCtx, Attempt(r.Context()))
			return s.base.RoundTrip(r)
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
	})
}

func TestZeroValueTransport(t *testing.T) {
	s := newScript(t, status(503), status(200))
	rt := &Transport{}
	rt.sleep = fakeclock.New(time.Time{}).Sleep
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
	forEachProto(t, func(t *testing.T, p proto) {
		done := make(chan struct{})
		defer close(done)
		var attempts atomic.Int32
		srv := p.server(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
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
		rt, _ := testTransport(p.base(t, srv))
		defer rt.CloseIdleConnections()
		resp, _, err := do(t, rt, mustRequest(t, "GET", srv.URL, nil))
		require.NoError(t, err)
		assert.Equal(t, 200, resp.StatusCode)
		assert.EqualValues(t, 3, attempts.Load())
	})
}

func TestEndlessThrottlingStopsAtMaxAttempts(t *testing.T) {
	forEachProto(t, func(t *testing.T, p proto) {
		s := newScriptOver(t, p, status(503, "Retry-After", "1"))
		var gaveUp Event
		rt, clock := testTransport(s.base, WithMaxAttempts(6), WithOnGiveUp(func(e Event) { gaveUp = e }))
		defer rt.CloseIdleConnections()
		resp, body, err := do(t, rt, mustRequest(t, "GET", s.srv.URL, nil))
		require.NoError(t, err)
		assert.Equal(t, 503, resp.StatusCode)
		assert.Equal(t, "status 503", body, "the last response is returned unread")
		assert.Len(t, s.requests(), 6)
		assert.Len(t, clock.Waits(), 5)
		assert.Equal(t, StopAttempts, gaveUp.Reason)
		assert.Equal(t, 6, gaveUp.Attempt)
	})
}

func TestPrevIsTheWaitSlept(t *testing.T) {
	forEachProto(t, func(t *testing.T, p proto) {
		s := newScriptOver(t, p, status(503, "Retry-After", "2"), status(503), status(200))
		var prevs []time.Duration
		b := BackoffFunc(func(n int, prev time.Duration, u float64) time.Duration {
			prevs = append(prevs, prev)
			return time.Second
		})
		rt, clock := testTransport(s.base, WithBackoff(b))
		defer rt.CloseIdleConnections()
		_, _, err := do(t, rt, mustRequest(t, "GET", s.srv.URL, nil))
		require.NoError(t, err)
		assert.Equal(t, []time.Duration{0, 2 * time.Second}, prevs)
		assert.Equal(t, []time.Duration{2 * time.Second, time.Second}, clock.Waits())
	})
}

func TestAttemptTimeout(t *testing.T) {
	forEachProto(t, func(t *testing.T, p proto) {
		release := make(chan struct{})
		defer close(release)
		var n atomic.Int32
		srv := p.server(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
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
		var retries []Event
		rt, _ := testTransport(p.base(t, srv), WithAttemptTimeout(50*time.Millisecond), WithOnRetry(func(e Event) { retries = append(retries, e) }))
		defer rt.CloseIdleConnections()
		resp, body, err := do(t, rt, mustRequest(t, "GET", srv.URL, nil))
		require.NoError(t, err)
		assert.Equal(t, 200, resp.StatusCode)
		assert.Equal(t, "slow body", body)
		require.Len(t, retries, 1)
		assert.Equal(t, Transient, retries[0].Class)
		assert.ErrorIs(t, retries[0].Err, context.DeadlineExceeded)
	})
}

type fakeBudget struct{ allow bool }

func (b *fakeBudget) AllowRetry(Class) bool { return b.allow }
func (b *fakeBudget) Success(Class)         {}

func TestBudgetRefusal(t *testing.T) {
	forEachProto(t, func(t *testing.T, p proto) {
		s := newScriptOver(t, p, status(503))
		var gaveUp Event
		rt, _ := testTransport(s.base, WithBudget(&fakeBudget{}), WithOnGiveUp(func(e Event) { gaveUp = e }))
		defer rt.CloseIdleConnections()
		resp, _, err := do(t, rt, mustRequest(t, "GET", s.srv.URL, nil))
		require.NoError(t, err)
		assert.Equal(t, 503, resp.StatusCode)
		assert.Len(t, s.requests(), 1)
		assert.Equal(t, StopBudget, gaveUp.Reason)
	})
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
	// clone cost 2. More means the fast path regressed. (An idle Pacer
	// adds none: package pace's TestIdlePacerAllocations.)
	tests := []struct {
		name string
		opts []Option
		max  float64
	}{
		{"defaults", nil, 2},
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

// stallProxy forwards loopback TCP connections to a server; while it is
// paused, it stops reading what clients send, so a client's writes fill
// the socket buffers and block, as on a slow or congested path.
type stallProxy struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	resume chan struct{} // nil when not paused
	conns  []net.Conn
	wg     sync.WaitGroup
}

func newStallProxy(t *testing.T, target string) *stallProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &stallProxy{ln: ln, target: target}
	p.wg.Go(p.accept)
	t.Cleanup(p.close)
	return p
}

func (p *stallProxy) addr() string { return p.ln.Addr().String() }

func (p *stallProxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		// A small fixed buffer: what a paused proxy holds is bounded by
		// it and the client's send buffer (at most 4 MiB here).
		c.(*net.TCPConn).SetReadBuffer(64 << 10)
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, c, s)
		p.mu.Unlock()
		p.wg.Go(func() { p.forward(s, c); s.Close() })
		p.wg.Go(func() { io.Copy(c, s); c.Close() })
	}
}

// forward copies the client's bytes to the server, waiting while paused.
func (p *stallProxy) forward(dst io.Writer, src io.Reader) {
	buf := make([]byte, 32<<10)
	for {
		p.mu.Lock()
		resume := p.resume
		p.mu.Unlock()
		if resume != nil {
			<-resume
		}
		n, err := src.Read(buf)
		if n > 0 {
			if _, err := dst.Write(buf[:n]); err != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func (p *stallProxy) pause() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.resume == nil {
		p.resume = make(chan struct{})
	}
}

func (p *stallProxy) unpause() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.resume != nil {
		close(p.resume)
		p.resume = nil
	}
}

func (p *stallProxy) close() {
	p.unpause()
	p.ln.Close()
	p.mu.Lock()
	for _, c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

// An attempt timeout that fires while a POST's headers are still being
// written (an 8 MiB header, behind a path that stopped taking bytes) must
// not be taken for "nothing written": over HTTP/2 the HEADERS frame is
// finished after RoundTrip returns, and the server runs the POST. The
// path resumes when the Transport decides (OnRetry or OnGiveUp): a retry
// would then reach the server too, so the server would run the POST twice.
// The POST gives up after one attempt, unsafe to replay, and runs at most
// once (over HTTP/1.1 the connection is closed mid-headers: never).
//
// Bound: one attempt timeout (1s real time: long enough for a retry to get
// through once the path resumes), then the server's handling.
func TestAttemptTimeoutDuringHeaderWrite(t *testing.T) {
	forEachProto(t, func(t *testing.T, p proto) {
		var executed atomic.Int32
		srv := p.server(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			executed.Add(1)
		}))
		proxy := newStallProxy(t, srv.Listener.Addr().String())
		url := strings.Replace(srv.URL, srv.Listener.Addr().String(), proxy.addr(), 1)
		resume := func(Event) { proxy.unpause() }
		var gaveUp giveUps
		rt, _ := hostileTransport(p.base(t, srv), WithAttemptTimeout(time.Second),
			WithOnRetry(resume), WithOnGiveUp(func(e Event) { resume(e); gaveUp.hook(e) }))

		req := mustRequest(t, "POST", url, nil)
		req.Header.Set("X-Pad", strings.Repeat("p", 8<<20))
		// Pause once the first attempt's connection is up (TLS and the
		// HTTP/2 preface went through), before the request is written.
		var once sync.Once
		req = req.WithContext(httptrace.WithClientTrace(req.Context(), &httptrace.ClientTrace{
			GotConn: func(httptrace.GotConnInfo) { once.Do(proxy.pause) },
		}))
		resp, err := rt.RoundTrip(req)
		if resp != nil {
			resp.Body.Close()
		}
		var re *Error
		if assert.ErrorAs(t, err, &re, "a response came back: the POST was retried") {
			assert.Equal(t, StopUnsafe, re.Reason)
			assert.Equal(t, 1, re.Attempts)
			assert.ErrorIs(t, err, ErrAttemptTimeout)
			assert.Equal(t, Transient, gaveUp.last(t).Class)
		}

		proxy.unpause()
		rt.CloseIdleConnections()
		srv.Close() // waits for the handlers
		assert.LessOrEqual(t, executed.Load(), int32(1), "the POST ran more than once")
	})
}

// A caller's body that stops yielding (a paused io.Pipe) must not hold the
// call: a 503 the server sends before reading it is returned at once when
// no retry follows, as plain net/http returns it, and a retry that waits
// for the body ends with the caller's deadline.
//
// Bound: the caller's deadline (300ms real time) in the second case; none
// in the first, which the within guard would report.
func TestPausedStreamingBody(t *testing.T) {
	forEachProto(t, func(t *testing.T, p proto) {
		var n atomic.Int32
		srv := p.server(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if n.Add(1) > 1 {
				io.Copy(io.Discard, r.Body) // waits for the paused body
				return
			}
			if r.ProtoMajor == 1 {
				// Else net/http's server reads the body before answering.
				w.Header().Set("Connection", "close")
			}
			w.WriteHeader(503) // before reading the body
		}))
		send := func(t *testing.T, ctx context.Context, opts ...Option) (*http.Response, error) {
			pr, pw := io.Pipe()
			t.Cleanup(func() { pw.CloseWithError(errors.New("test over")) })
			go pw.Write([]byte("first bytes, then nothing"))
			rt, _ := hostileTransport(p.base(t, srv), opts...)
			req, err := http.NewRequestWithContext(ctx, "PUT", srv.URL, pr)
			require.NoError(t, err)
			var resp *http.Response
			within(t, "RoundTrip", func() { resp, err = rt.RoundTrip(req) })
			return resp, err
		}
		t.Run("no retry", func(t *testing.T) {
			n.Store(0)
			var gaveUp giveUps
			resp, err := send(t, context.Background(), WithBudget(&fakeBudget{}), WithOnGiveUp(gaveUp.hook))
			require.NoError(t, err)
			resp.Body.Close()
			assert.Equal(t, 503, resp.StatusCode)
			assert.Equal(t, StopBudget, gaveUp.last(t).Reason)
		})
		t.Run("retry until the deadline", func(t *testing.T) {
			n.Store(0)
			ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
			defer cancel()
			start := time.Now()
			resp, err := send(t, ctx)
			if err == nil {
				resp.Body.Close()
				t.Fatalf("RoundTrip = %d; want the deadline's error", resp.StatusCode)
			}
			assert.ErrorIs(t, err, context.DeadlineExceeded)
			assert.Less(t, time.Since(start), 5*time.Second)
		})
	})
}

// lingeringWriter is a base transport that answers every attempt with 503
// at once and, as net/http does, goes on writing the request body after
// RoundTrip returned: it reads the rest of the body when told to. As
// net/http does, it fails an attempt whose body cannot be read.
type lingeringWriter struct {
	attempts atomic.Int32
	mu       sync.Mutex
	more     chan struct{} // closed: the lingering writers read on
	wg       sync.WaitGroup
}

func (l *lingeringWriter) RoundTrip(r *http.Request) (*http.Response, error) {
	l.attempts.Add(1)
	body := r.Body
	if _, err := body.Read(make([]byte, 1000)); err != nil { // the part sent before the answer
		body.Close()
		return nil, fmt.Errorf("writing the body: %w", err)
	}
	l.mu.Lock()
	more := l.more
	l.mu.Unlock()
	l.wg.Go(func() {
		<-more
		io.Copy(io.Discard, body)
		body.Close()
	})
	return &http.Response{StatusCode: 503, Body: http.NoBody, Request: r}, nil
}

// readOn lets the writers so far read on, and waits until they have read
// what they can.
func (l *lingeringWriter) readOn() {
	l.mu.Lock()
	close(l.more)
	l.more = make(chan struct{})
	l.mu.Unlock()
	l.wg.Wait()
}

// A body larger than MaxBufferedBody after an early 503: the retry is
// decided while the copy is within the limit, and the earlier attempts'
// writers, which run on, are cut off from the body, so every retry still
// sends the body whole and the call ends with the server's answer, not
// with "body outgrew MaxBufferedBody".
func TestOversizedBodyEarlyResponseEndsWithTheAnswer(t *testing.T) {
	base := &lingeringWriter{more: make(chan struct{})}
	var gaveUp giveUps
	rt, _ := hostileTransport(base, WithMaxBufferedBody(64<<10), WithMaxAttempts(3),
		WithOnRetry(func(Event) { base.readOn() }), WithOnGiveUp(gaveUp.hook))
	body := &countingCloser{Reader: &opaqueReader{bytes.NewReader(make([]byte, 1<<20))}}
	resp, err := rt.RoundTrip(mustRequest(t, "PUT", "http://127.0.0.1/", body))
	base.readOn()
	require.NoError(t, err)
	assert.Equal(t, 503, resp.StatusCode)
	assert.EqualValues(t, 3, base.attempts.Load())
	assert.Equal(t, StopAttempts, gaveUp.last(t).Reason)
	assertClosedOnce(t, body)
}

// A body that contradicts its ContentLength is the caller's error: it
// fails once, permanently, with an error that says so. An in-memory body
// is refused before anything is sent; a streamed one when it is read.
func TestContentLengthMismatch(t *testing.T) {
	forEachProto(t, func(t *testing.T, p proto) {
		tests := []struct {
			name     string
			body     func() io.Reader
			declared int64
			longer   bool // the body is longer than declared
			maxSeen  int32
		}{
			{"in memory, longer", func() io.Reader { return bytes.NewReader(make([]byte, 10)) }, 5, true, 0},
			{"in memory, shorter", func() io.Reader { return strings.NewReader("12345") }, 10, false, 0},
			{"streamed, longer", func() io.Reader { return &opaqueReader{bytes.NewReader(make([]byte, 10))} }, 5, true, 1},
			{"streamed, shorter", func() io.Reader { return &opaqueReader{strings.NewReader("12345")} }, 10, false, 1},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				var seen atomic.Int32
				srv := p.server(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					seen.Add(1)
					if _, err := io.ReadAll(r.Body); err != nil {
						w.WriteHeader(400)
						return
					}
					w.WriteHeader(503)
				}))
				var gaveUp giveUps
				rt, _ := hostileTransport(p.base(t, srv), WithOnGiveUp(gaveUp.hook))
				req := mustRequest(t, "PUT", srv.URL, tt.body())
				req.ContentLength = tt.declared
				resp, err := rt.RoundTrip(req)
				if err == nil {
					// The server answered before the body went wrong
					// (HTTP/2 sends a short body as it is), or, for a
					// longer body, read the declared length in full and
					// answered 503 before net/http found the bytes
					// beyond it (a race over HTTP/1): its answer is
					// returned, and not retried into a second send.
					defer resp.Body.Close()
					want := []int{400}
					if tt.longer {
						want = append(want, 503)
					}
					assert.Contains(t, want, resp.StatusCode)
				} else {
					assert.Contains(t, err.Error(), "ContentLength")
					if tt.maxSeen > 0 {
						e := gaveUp.last(t)
						assert.Equal(t, Permanent, e.Class)
						assert.Equal(t, 1, e.Attempt)
					}
				}
				rt.CloseIdleConnections()
				srv.Close() // waits for the handlers
				assert.LessOrEqual(t, seen.Load(), tt.maxSeen)
			})
		}
	})
}

// OnDone sees every call once, successes included, with its attempts,
// waits, time and end.
func TestOnDone(t *testing.T) {
	forEachProto(t, func(t *testing.T, p proto) {
		var s *script
		s = newScriptOver(t, p, func(w http.ResponseWriter, r *http.Request) {
			switch r.URL.Path {
			case "/ok":
				status(200)(w, r)
			case "/missing":
				status(404)(w, r)
			case "/busy":
				// 503, 429, then 200, counting this path's requests.
				n := 0
				for _, seen := range s.requests() {
					if seen.header.Get("X-Path") == "busy" {
						n++
					}
				}
				status([]int{503, 429, 200}[min(n-1, 2)])(w, r)
			}
		})
		var done []Summary
		rt, _ := testTransport(s.base, WithOnDone(func(sm Summary) { done = append(done, sm) }))
		get := func(path string) {
			req := mustRequest(t, "GET", s.srv.URL+path, nil)
			req.Header.Set("X-Path", strings.TrimPrefix(path, "/"))
			_, _, err := do(t, rt, req)
			require.NoError(t, err)
		}
		get("/ok")
		get("/busy")
		get("/missing")
		require.Len(t, done, 3)
		assert.Equal(t, Summary{Request: done[0].Request, Attempts: 1, Class: Success, StatusCode: 200}, done[0])
		// Exponential{100ms, 20s, FullJitter} with u = 0.5: 50ms, then 100ms,
		// on the fake clock, which moves only when the Transport sleeps.
		busy := done[1]
		assert.Equal(t, 3, busy.Attempts)
		assert.Equal(t, 150*time.Millisecond, busy.Wait)
		assert.Equal(t, 150*time.Millisecond, busy.Elapsed)
		assert.Equal(t, Success, busy.Class)
		assert.Equal(t, StopNone, busy.Reason)
		missing := done[2]
		assert.Equal(t, 1, missing.Attempts)
		assert.Equal(t, Permanent, missing.Class)
		assert.Equal(t, StopPermanent, missing.Reason)
		assert.False(t, missing.Reason.GaveUp())
		assert.Equal(t, 404, missing.StatusCode)
	})
	t.Run("errors", func(t *testing.T) {
		var done []Summary
		rt, _ := testTransport(nil, WithMaxAttempts(3), WithOnDone(func(sm Summary) { done = append(done, sm) }))
		_, err := rt.RoundTrip(mustRequest(t, "GET", "http://"+closedAddr(t), nil))
		require.Error(t, err)
		require.Len(t, done, 1)
		assert.Equal(t, 3, done[0].Attempts)
		assert.Equal(t, Unsent, done[0].Class)
		assert.Equal(t, StopAttempts, done[0].Reason)
		assert.Equal(t, err, done[0].Err)
		assert.Zero(t, done[0].StatusCode)

		// Nothing sent: a body that contradicts its length.
		req := mustRequest(t, "PUT", "http://"+closedAddr(t), strings.NewReader("12345"))
		req.ContentLength = 3
		_, err = rt.RoundTrip(req)
		require.Error(t, err)
		require.Len(t, done, 2)
		assert.Zero(t, done[1].Attempts)
		assert.Equal(t, StopPermanent, done[1].Reason)
		assert.Equal(t, err, done[1].Err)
	})
}

// Event.Duration is the time an attempt took, on the Transport's clock.
func TestEventDuration(t *testing.T) {
	var clock *fakeClock
	calls := 0
	base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		calls++
		clock.Advance(30 * time.Millisecond) // the attempt takes 30ms
		code := 503
		if calls == 2 {
			code = 404
		}
		return &http.Response{StatusCode: code, Body: http.NoBody, Request: r}, nil
	})
	var events []Event
	hook := func(e Event) { events = append(events, e) }
	rt, c := testTransport(base, WithOnRetry(hook), WithOnGiveUp(hook))
	clock = c
	resp, err := rt.RoundTrip(mustRequest(t, "GET", "http://127.0.0.1/", nil))
	require.NoError(t, err)
	assert.Equal(t, 404, resp.StatusCode)
	require.Len(t, events, 2)
	assert.Equal(t, 30*time.Millisecond, events[0].Duration)
	assert.Equal(t, 30*time.Millisecond, events[1].Duration)
}

// ContextWithOptions changes one request's settings and no other's, over
// the same connections and budget.
func TestContextWithOptions(t *testing.T) {
	forEachProto(t, func(t *testing.T, p proto) {
		s := newScriptOver(t, p, status(503))
		budget := &TokenBucket{}
		var perRequest []Event
		rt, _ := testTransport(s.base, WithBudget(budget))
		defer rt.CloseIdleConnections()

		// No retries for this call.
		ctx := ContextWithOptions(context.Background(), WithMaxAttempts(1))
		resp, _, err := do(t, rt, mustRequest(t, "GET", s.srv.URL, nil).WithContext(ctx))
		require.NoError(t, err)
		assert.Equal(t, 503, resp.StatusCode)
		assert.Len(t, s.requests(), 1)

		// The Transport's own settings for the next: 4 attempts.
		_, _, err = do(t, rt, mustRequest(t, "GET", s.srv.URL, nil))
		require.NoError(t, err)
		assert.Len(t, s.requests(), 5)

		// Options given twice apply in order; a hook of this call only.
		ctx = ContextWithOptions(ContextWithOptions(context.Background(), WithMaxAttempts(5)),
			WithMaxAttempts(2), WithOnRetry(func(e Event) { perRequest = append(perRequest, e) }))
		_, _, err = do(t, rt, mustRequest(t, "GET", s.srv.URL, nil).WithContext(ctx))
		require.NoError(t, err)
		assert.Len(t, s.requests(), 7)
		assert.Len(t, perRequest, 1)

		assert.EqualValues(t, 1, s.newConn.Load(), "the per-request settings share the Transport's connections")
		// Every retry was paid from the one budget: 3 + 1 of 5 tokens.
		assert.Equal(t, 500-4*5, budget.Tokens())
	})
	t.Run("invalid", func(t *testing.T) {
		rt, _ := testTransport(nil)
		cc := &countingCloser{Reader: strings.NewReader("x")}
		ctx := ContextWithOptions(context.Background(), WithMaxAttempts(-1))
		_, err := rt.RoundTrip(mustRequest(t, "PUT", "http://127.0.0.1:1/", cc).WithContext(ctx))
		require.ErrorContains(t, err, "MaxAttempts")
		assert.EqualValues(t, 1, cc.closes.Load())
		require.NoError(t, rt.Validate(), "the Transport itself is still valid")
	})
}

// clone copies every exported field: a field added to Transport and
// forgotten there would be lost for requests with per-request options.
func TestCloneCopiesEveryField(t *testing.T) {
	orig := &Transport{}
	v := reflect.ValueOf(orig).Elem()
	typ := v.Type()
	for i := 0; i < typ.NumField(); i++ {
		f := typ.Field(i)
		if !f.IsExported() {
			continue
		}
		fv := v.Field(i)
		switch fv.Kind() {
		case reflect.Int, reflect.Int64:
			fv.SetInt(7)
		case reflect.Uint8:
			fv.SetUint(1)
		case reflect.String:
			fv.SetString("X-Test")
		case reflect.Interface, reflect.Func:
			// Any non-nil value of the field's type.
			switch f.Name {
			case "Base":
				fv.Set(reflect.ValueOf(http.RoundTripper(staticTransport{})))
			case "Backoff":
				fv.Set(reflect.ValueOf(Backoff(Constant{Base: time.Second})))
			case "Classifier":
				fv.Set(reflect.ValueOf(Classifier(DefaultClassifier)))
			case "Budget":
				fv.Set(reflect.ValueOf(Budget(NoBudget)))
			case "Pacer":
				fv.Set(reflect.ValueOf(Pacer(&recordingPacer{})))
			case "OnRetry", "OnGiveUp":
				fv.Set(reflect.ValueOf(func(Event) {}))
			case "OnDone":
				fv.Set(reflect.ValueOf(func(Summary) {}))
			default:
				t.Fatalf("the test does not know how to set Transport.%s", f.Name)
			}
		default:
			t.Fatalf("the test does not know how to set Transport.%s (%v)", f.Name, fv.Kind())
		}
	}
	cv := reflect.ValueOf(orig.clone()).Elem()
	for i := 0; i < typ.NumField(); i++ {
		f := typ.Field(i)
		if f.IsExported() && cv.Field(i).IsZero() {
			t.Errorf("clone does not copy Transport.%s", f.Name)
		}
	}
}
