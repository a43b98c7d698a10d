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
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/iotest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// within runs f and fails the test if it has not returned after a
// generous bound: the calls it guards must not wait for a blocked reader
// at all, so the bound is never reached unless they do.
func within(t *testing.T, what string, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatalf("%s blocked", what)
	}
}

// A caller's body that blocks (a paused io.Pipe) holds no lock while it is
// read: closing the reader, making another, deciding a retry and ending
// RoundTrip all return at once, and a reader waiting for the blocked read
// wakes when it is closed. Ending RoundTrip with no reader of the last
// attempt open closes the caller's body, which ends the blocked read.
func TestReplayBodyNoLockAcrossRead(t *testing.T) {
	pr, pw := io.Pipe()
	src := &countingPipe{PipeReader: pr}
	b := newReplayBody(src, -1, 1<<20)

	first, err := b.reader(true)
	require.NoError(t, err)
	go pw.Write([]byte("abc"))
	p := make([]byte, 3)
	n, err := io.ReadFull(first, p)
	require.NoError(t, err)
	require.Equal(t, 3, n)

	blocked := make(chan error, 1)
	go func() {
		_, err := first.Read(make([]byte, 10)) // the pipe has nothing more: blocks
		blocked <- err
	}()
	waitReading(b)

	var second *replayReader
	within(t, "replayable", func() { assert.True(t, b.replayable()) })
	within(t, "retire", func() { assert.True(t, b.retire()) })
	within(t, "reader", func() { second, err = b.reader(true) })
	require.NoError(t, err)
	got := make([]byte, 3)
	_, err = io.ReadFull(second, got)
	require.NoError(t, err)
	assert.Equal(t, "abc", string(got), "the copy is served while the source read is in flight")

	waiting := make(chan error, 1)
	go func() {
		_, err := second.Read(make([]byte, 10)) // waits for the read in flight
		waiting <- err
	}()
	within(t, "Close of the first reader", func() { first.Close() })
	within(t, "Close of a waiting reader", func() { second.Close() })
	within(t, "the waiting reader", func() { assert.ErrorIs(t, <-waiting, errBodyClosed) })
	assert.Zero(t, src.closes.Load(), "the caller's body is closed only when RoundTrip ends")
	within(t, "finish", b.finish)
	assert.EqualValues(t, 1, src.closes.Load())
	within(t, "the blocked read", func() { assert.ErrorIs(t, <-blocked, io.ErrClosedPipe) })
}

// countingPipe is a caller's body that blocks until written to, and counts
// its Close calls.
type countingPipe struct {
	*io.PipeReader
	closes atomic.Int32
}

func (p *countingPipe) Close() error {
	p.closes.Add(1)
	return p.PipeReader.Close()
}

// waitReading returns once a reader of b is in a read of the caller's
// body, without sleeping.
func waitReading(b *replayBody) {
	for {
		b.mu.Lock()
		reading := b.reading
		b.mu.Unlock()
		if reading {
			return
		}
		runtime.Gosched()
	}
}

// Once a retry is decided, the readers of earlier attempts read no more of
// the caller's body, and do not hold it open; the new attempt's reader
// yields every byte.
func TestReplayBodyRetireCutsOffEarlierReaders(t *testing.T) {
	payload := bytes.Repeat([]byte("0123456789"), 100)
	src := &countingCloser{Reader: &opaqueReader{bytes.NewReader(payload)}}
	b := newReplayBody(src, -1, 1<<20)
	first, err := b.reader(true)
	require.NoError(t, err)
	n, err := first.Read(make([]byte, 100))
	require.NoError(t, err)
	require.Equal(t, 100, n)

	require.True(t, b.retire())
	_, err = first.Read(make([]byte, 100))
	assert.ErrorIs(t, err, errBodySuperseded)

	second, err := b.reader(true)
	require.NoError(t, err)
	b.finish()
	assert.Zero(t, src.closes.Load(), "the current attempt's reader holds the body open")
	got, err := io.ReadAll(second)
	require.NoError(t, err)
	assert.Equal(t, payload, got)
	second.Close()
	assert.EqualValues(t, 1, src.closes.Load(), "the superseded reader, never closed, does not hold the body open")
	first.Close()
	assert.EqualValues(t, 1, src.closes.Load())
}

// A retry is refused while a read in flight could take the body past
// MaxBufferedBody: the writer net/http lets run on would otherwise drop
// the copy the retry needs.
func TestReplayBodyRetireRefusedWhenReadMayOverflow(t *testing.T) {
	pr, pw := io.Pipe()
	defer pw.Close()
	b := newReplayBody(pr, -1, 100)
	r, err := b.reader(true)
	require.NoError(t, err)
	go pw.Write(make([]byte, 60))
	_, err = io.ReadFull(r, make([]byte, 60))
	require.NoError(t, err)
	done := make(chan struct{})
	go func() {
		defer close(done)
		r.Read(make([]byte, 50)) // 60 + 50 > 100
	}()
	waitReading(b)
	assert.False(t, b.retire())
	pw.Write(make([]byte, 10)) // ends the read: 70 bytes, within the limit
	<-done
	assert.True(t, b.retire())
}

// A reader GetBody made and nobody read does not hold the caller's body
// open: net/http makes one for a replay and drops it, unclosed, when it
// finds no connection for it.
func TestReplayBodyUnreadGetBodyReader(t *testing.T) {
	src := &countingCloser{Reader: &opaqueReader{bytes.NewReader([]byte("body"))}}
	b := newReplayBody(src, 4, 1<<20)
	attempt, err := b.reader(true)
	require.NoError(t, err)
	io.ReadAll(attempt)
	dropped, err := b.getBody()
	require.NoError(t, err)
	attempt.Close()
	b.finish()
	assert.EqualValues(t, 1, src.closes.Load())
	_, err = dropped.Read(make([]byte, 4))
	assert.ErrorIs(t, err, errBodyFinished, "a reader first read after the body was closed fails")

	// One that is read holds it open until it is closed.
	src = &countingCloser{Reader: &opaqueReader{bytes.NewReader([]byte("body"))}}
	b = newReplayBody(src, 4, 1<<20)
	attempt, _ = b.reader(true)
	replay, _ := b.getBody()
	got, err := io.ReadAll(replay)
	require.NoError(t, err)
	assert.Equal(t, "body", string(got))
	attempt.Close()
	b.finish()
	assert.Zero(t, src.closes.Load())
	replay.Close()
	assert.EqualValues(t, 1, src.closes.Load())
}

// The copy grows with the bytes that arrive, not with the ContentLength
// the request declares.
func TestReplayBodyGrowsAsBytesArrive(t *testing.T) {
	b := newReplayBody(io.NopCloser(&opaqueReader{bytes.NewReader([]byte("x"))}), 8<<20, 8<<20)
	r, _ := b.reader(true)
	io.ReadAll(r)
	held := 0
	for _, c := range b.chunks {
		held += cap(c.buf)
	}
	assert.LessOrEqual(t, held, minChunk, "a 1-byte body announced as 8 MiB holds %d bytes", held)

	// A body that matches its length is copied with little slack.
	payload := bytes.Repeat([]byte("y"), 3<<20+17)
	b = newReplayBody(io.NopCloser(&opaqueReader{bytes.NewReader(payload)}), int64(len(payload)), 8<<20)
	r, _ = b.reader(true)
	io.ReadAll(r)
	held = 0
	for _, c := range b.chunks {
		held += cap(c.buf)
	}
	assert.Less(t, held, len(payload)+maxChunk)
	assert.NoError(t, b.mismatch())
}

// A body that contradicts its declared ContentLength is found out as it is
// read, and makes the body unfit for a retry.
func TestReplayBodyLengthMismatch(t *testing.T) {
	tests := []struct {
		name     string
		body     string
		declared int64
		want     string
	}{
		{"longer", "0123456789", 5, "longer than its ContentLength 5"},
		{"shorter", "01234", 10, "ended after 5 bytes, short of its ContentLength 10"},
		{"exact", "01234", 5, ""},
		{"unknown", "01234", -1, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := newReplayBody(io.NopCloser(&opaqueReader{bytes.NewReader([]byte(tt.body))}), tt.declared, 1<<20)
			r, _ := b.reader(true)
			got, err := io.ReadAll(r)
			require.NoError(t, err)
			assert.Equal(t, tt.body, string(got), "the bytes pass through: net/http decides what to send")
			err = b.mismatch()
			if tt.want == "" {
				assert.NoError(t, err)
				assert.True(t, b.retire())
				return
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
			assert.False(t, b.retire())
		})
	}
}

// A closed reader reads no more.
func TestReplayBodyReadAfterClose(t *testing.T) {
	b := newReplayBody(io.NopCloser(&opaqueReader{bytes.NewReader([]byte("body"))}), -1, 1<<20)
	r, _ := b.reader(true)
	r.Close()
	_, err := r.Read(make([]byte, 4))
	assert.True(t, errors.Is(err, errBodyClosed), "Read after Close = %v", err)
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

// A body of a request with GetBody, of a kind the Transport cannot measure
// up front, that contradicts its ContentLength fails once, as the
// caller's error: the server sees at most the first attempt, never a
// retry. So does a body GetBody yields that contradicts it.
func TestContentLengthMismatchWithGetBody(t *testing.T) {
	forEachProto(t, func(t *testing.T, p proto) {
		for _, tt := range []struct {
			name       string
			first      string // the caller's body
			later      string // what GetBody yields
			declared   int64
			maxSeen    int32
			firstFails bool
		}{
			{"shorter", "12345", "12345", 10, 1, true},
			{"longer", "1234567890", "1234567890", 5, 1, true},
			{"GetBody's shorter", "1234567890", "12345", 10, 2, false},
		} {
			t.Run(tt.name, func(t *testing.T) {
				var seen atomic.Int32
				srv := p.server(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					seen.Add(1)
					io.Copy(io.Discard, r.Body)
					w.WriteHeader(503)
				}))
				var gaveUp giveUps
				rt, _ := hostileTransport(p.base(t, srv), WithOnGiveUp(gaveUp.hook))
				req := mustRequest(t, "PUT", srv.URL, &opaqueReader{strings.NewReader(tt.first)})
				req.ContentLength = tt.declared
				req.GetBody = func() (io.ReadCloser, error) {
					return io.NopCloser(&opaqueReader{strings.NewReader(tt.later)}), nil
				}
				resp, err := rt.RoundTrip(req)
				if err == nil {
					// The server answered before the body went wrong
					// (HTTP/2 sends a short body as it is): that answer,
					// not a retry.
					resp.Body.Close()
				} else {
					assert.ErrorContains(t, err, "ContentLength")
				}
				e := gaveUp.last(t)
				assert.Equal(t, Permanent, e.Class)
				if tt.firstFails {
					assert.Equal(t, 1, e.Attempt)
				} else {
					assert.Equal(t, 2, e.Attempt)
				}
				rt.CloseIdleConnections()
				srv.Close() // waits for the handlers
				assert.LessOrEqual(t, seen.Load(), tt.maxSeen)
			})
		}
	})
}

// A ContentLength with no Body, or below -1, is refused before anything
// is sent: net/http refuses the first over HTTP/1.1 on every attempt.
func TestContentLengthWithoutBody(t *testing.T) {
	forEachProto(t, func(t *testing.T, p proto) {
		s := newScriptOver(t, p, status(200))
		for _, tt := range []struct {
			length int64
			body   io.Reader
		}{{5, nil}, {-1, nil}, {-2, strings.NewReader("x")}} {
			var done Summary
			rt, _ := testTransport(s.base, WithOnDone(func(s Summary) { done = s }))
			req := mustRequest(t, "PUT", s.srv.URL, tt.body)
			req.ContentLength = tt.length
			_, err := rt.RoundTrip(req)
			assert.ErrorContains(t, err, "ContentLength", "ContentLength %d", tt.length)
			assert.Zero(t, done.Attempts)
			assert.Equal(t, StopPermanent, done.Reason)
		}
		assert.Empty(t, s.requests())
	})
}

// FuzzReplayBody plays a fuzzed sequence of operations on a replay body (a
// new reader, as an attempt makes, or as net/http's GetBody makes; a read of
// n bytes by one reader; a close; a retry decided; the end of RoundTrip)
// over a caller's body that yields its bytes in odd pieces and may fail at
// the end, and checks that:
//
//   - every reader yields a prefix of the caller's bytes, then io.EOF only
//     at the end, the caller's error only where the caller failed,
//     errBodyNotReplayable only once the copy was dropped for
//     MaxBufferedBody, errBodySuperseded only for a reader of an attempt
//     before the last retry, errBodyFinished only for a GetBody reader
//     first read after the caller's body was closed;
//   - a retry is allowed only while the whole body can still be sent;
//   - the caller's body is closed exactly once, and only when RoundTrip
//     ended and every reader of the last attempt that counts was closed:
//     an attempt's own reader from the start, a GetBody reader once read.
func FuzzReplayBody(f *testing.F) {
	f.Add([]byte{0, 1, 0, 50, 0, 1, 0, 9, 2, 0, 1, 1, 255, 3}, uint16(300), uint16(1000), int64(-1), uint8(0), false)
	f.Add([]byte{0, 1, 0, 255, 0, 1, 1, 255, 3, 2, 0, 2, 1}, uint16(300), uint16(100), int64(300), uint8(1), false)
	f.Add([]byte{0, 0, 1, 0, 7, 1, 1, 255, 1, 0, 255, 2, 0, 2, 1, 3}, uint16(5000), uint16(0), int64(5000), uint8(2), true)
	f.Add([]byte{0, 3, 1, 0, 1}, uint16(10), uint16(5), int64(10), uint8(0), false)
	f.Add([]byte{0, 1, 0, 20, 4, 5, 1, 1, 255, 2, 0, 5, 3, 1, 2, 255, 2, 1}, uint16(200), uint16(1000), int64(150), uint8(1), false)
	f.Fuzz(func(t *testing.T, ops []byte, size, maxBuf uint16, contentLength int64, mode uint8, fail bool) {
		payload := make([]byte, int(size)%70000)
		for i := range payload {
			payload[i] = byte(i*13 + 1)
		}
		var r io.Reader = bytes.NewReader(payload)
		switch mode % 3 {
		case 1:
			r = iotest.OneByteReader(r)
		case 2:
			r = iotest.HalfReader(r)
		}
		errCaller := errors.New("the caller's body failed")
		if fail {
			r = &errAfterReader{r, errCaller}
		}
		src := &countingCloser{Reader: r}
		limit := int64(maxBuf)
		b := newReplayBody(src, contentLength, limit)

		type reader struct {
			rc      *replayReader
			gen     int
			counted bool
			got     []byte
			closed  bool
			done    bool // returned an error
		}
		var readers []*reader
		gen := 0
		finished := false
		sourceRead := 0 // bytes any reader has taken from the caller's body
		failed := false // a reader saw the caller's error
		ended := false  // a reader saw the end of the caller's body
		pick := func(i byte) *reader {
			if len(readers) == 0 {
				return nil
			}
			return readers[int(i)%len(readers)]
		}
		open := func() int {
			n := 0
			for _, rd := range readers {
				if rd.gen == gen && rd.counted && !rd.closed {
					n++
				}
			}
			return n
		}
		checkClosed := func() {
			want := int32(0)
			if finished && open() == 0 {
				want = 1
			}
			if n := src.closes.Load(); n != want {
				t.Fatalf("caller's body closed %d times (finished %v, %d readers open); want %d", n, finished, open(), want)
			}
		}
		for i := 0; i < len(ops) && i < 200; i++ {
			switch ops[i] % 6 {
			case 0, 5: // a new reader: the attempt's own, or GetBody's
				counted := ops[i]%6 == 0
				rc, err := b.reader(counted)
				if finished {
					if err == nil {
						t.Fatal("reader() after finish succeeded")
					}
					continue
				}
				if err != nil {
					t.Fatalf("reader() = %v", err)
				}
				readers = append(readers, &reader{rc: rc, gen: gen, counted: counted})
			case 1: // a read
				if i+2 >= len(ops) {
					break
				}
				rd := pick(ops[i+1])
				n := int(ops[i+2])
				i += 2
				if rd == nil || rd.closed || rd.done {
					continue
				}
				if n == 255 {
					n = 1 << 20
				}
				wasOpen := open()
				p := make([]byte, n)
				k, err := rd.rc.Read(p)
				rd.got = append(rd.got, p[:k]...)
				sourceRead = max(sourceRead, len(rd.got))
				if !bytes.HasPrefix(payload, rd.got) {
					t.Fatalf("a reader yielded %d bytes that are not a prefix of the body", len(rd.got))
				}
				if n > 0 && !errors.Is(err, errBodyFinished) && !errors.Is(err, errBodySuperseded) {
					rd.counted = true // a read, not an empty one, counts a reader
				}
				switch {
				case err == nil:
				case err == io.EOF:
					rd.done, ended = true, true
					if fail || len(rd.got) != len(payload) {
						t.Fatalf("io.EOF after %d of %d bytes (caller fails: %v)", len(rd.got), len(payload), fail)
					}
				case errors.Is(err, errCaller):
					rd.done, failed, ended = true, true, true
					if !fail || len(rd.got) != len(payload) {
						t.Fatalf("the caller's error after %d of %d bytes", len(rd.got), len(payload))
					}
				case errors.Is(err, errBodyNotReplayable):
					rd.done = true
					if contentLength <= limit && int64(len(payload)) <= limit {
						t.Fatalf("errBodyNotReplayable for a %d-byte body (announced %d) within MaxBufferedBody %d", len(payload), contentLength, limit)
					}
				case errors.Is(err, errBodySuperseded):
					rd.done = true
					if rd.gen == gen {
						t.Fatal("errBodySuperseded for a reader of the current attempt")
					}
				case errors.Is(err, errBodyFinished):
					rd.done = true
					if rd.counted || !finished || wasOpen != 0 {
						t.Fatalf("errBodyFinished for a reader (counted %v) with RoundTrip finished %v and %d readers open", rd.counted, finished, wasOpen)
					}
				default:
					t.Fatalf("Read error %v", err)
				}
			case 2: // a close
				if i+1 >= len(ops) {
					break
				}
				rd := pick(ops[i+1])
				i++
				if rd == nil {
					continue
				}
				if err := rd.rc.Close(); err != nil {
					t.Fatalf("Close = %v", err)
				}
				rd.closed = true
			case 3: // RoundTrip returns
				if !finished {
					b.finish()
					finished = true
				}
			case 4: // a retry is decided
				if finished {
					continue
				}
				ok := b.retire()
				whole := !failed && (int64(sourceRead) <= limit && contentLength <= limit || sourceRead == 0)
				lied := contentLength > 0 && (int64(sourceRead) > contentLength || ended && int64(sourceRead) < contentLength)
				if ok && (!whole || lied) {
					t.Fatalf("retire allowed a retry after %d bytes were read (MaxBufferedBody %d, announced %d, caller failed %v)", sourceRead, limit, contentLength, failed)
				}
				if !ok && whole && !lied {
					t.Fatalf("retire refused a retry after %d bytes were read (MaxBufferedBody %d, announced %d)", sourceRead, limit, contentLength)
				}
				if ok {
					gen++
				}
			}
			checkClosed()
		}
		if !finished {
			b.finish()
			finished = true
		}
		for _, rd := range readers {
			rd.rc.Close()
			rd.closed = true
		}
		checkClosed()
	})
}
