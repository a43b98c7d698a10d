package retry

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/backoff-jitter/retry/retrytest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// resource is a representation a rangeServer serves: its bytes and
// validator, which a test may change between requests.
type resource struct {
	mu   sync.Mutex
	data []byte
	etag string
}

func newResource(size int) *resource {
	data := make([]byte, size)
	rnd := rand.New(rand.NewPCG(1, 2))
	for i := range data {
		data[i] = byte(rnd.Uint32())
	}
	return &resource{data: data, etag: `"v1"`}
}

// rangeServer serves res with http.ServeContent (Range, If-Range), and
// cuts the first cuts answers after cutAt bytes of their body, as a
// reset connection (HTTP/1.1) or stream (HTTP/2) does. It records each
// request's Range, If-Range and X-Signed headers, and counts the body
// bytes it sent.
type rangeServer struct {
	res       *resource
	cutAt     int64
	cuts      atomic.Int32
	ignore    bool // answer every request whole, Range or not
	mu        sync.Mutex
	requests  []http.Header
	sentBytes atomic.Int64
}

func (s *rangeServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.requests = append(s.requests, r.Header.Clone())
	s.mu.Unlock()
	s.res.mu.Lock()
	data, etag := s.res.data, s.res.etag
	s.res.mu.Unlock()
	if s.ignore {
		r.Header.Del("Range")
	}
	w.Header().Set("ETag", etag)
	cw := &countingWriter{ResponseWriter: w, sent: &s.sentBytes, cutAt: -1}
	if s.cuts.Add(-1) >= 0 {
		cw.cutAt = s.cutAt
	}
	http.ServeContent(cw, r, "", time.Time{}, bytes.NewReader(data))
}

// countingWriter counts the body bytes written, and aborts the answer
// once cutAt of them are written (never, when negative).
type countingWriter struct {
	http.ResponseWriter
	sent    *atomic.Int64
	written int64
	cutAt   int64
}

func (w *countingWriter) Write(p []byte) (int, error) {
	if w.cutAt >= 0 && w.written+int64(len(p)) > w.cutAt {
		n, _ := w.ResponseWriter.Write(p[:w.cutAt-w.written])
		w.sent.Add(int64(n))
		w.ResponseWriter.(http.Flusher).Flush()
		panic(http.ErrAbortHandler)
	}
	n, err := w.ResponseWriter.Write(p)
	w.written += int64(n)
	w.sent.Add(int64(n))
	return n, err
}

func (s *rangeServer) headers() []http.Header {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]http.Header(nil), s.requests...)
}

// quietServer starts h on a loopback HTTP/1.1 server that logs nothing
// (the cuts the tests make are logged otherwise), closed when the test
// ends.
func quietServer(t *testing.T, h http.Handler) *httptest.Server {
	t.Helper()
	srv := httptest.NewUnstartedServer(h)
	srv.Config.ErrorLog = hostileLog
	srv.Start()
	t.Cleanup(srv.Close)
	return srv
}

// getAll GETs url through rt and reads the whole body.
func getAll(t *testing.T, rt http.RoundTripper, url string, header ...string) ([]byte, error) {
	t.Helper()
	req := mustRequest(t, "GET", url, nil)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := rt.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	return io.ReadAll(resp.Body)
}

// A body cut twice midway is resumed where it broke, with Range and
// If-Range, and the caller reads the whole resource once: the same bytes,
// none twice, the server sending little more than the resource. Over
// every protocol.
func TestResumeAfterCuts(t *testing.T) {
	forEachProto(t, func(t *testing.T, p proto) {
		res := newResource(1 << 20)
		s := &rangeServer{res: res, cutAt: 300_000}
		s.cuts.Store(2)
		srv := p.server(t, s)
		var events []ResumeEvent
		rt := New(p.base(t, srv), WithOnResume(func(e ResumeEvent) { events = append(events, e) }),
			WithBackoff(Constant{Base: time.Millisecond}))
		defer rt.CloseIdleConnections()
		got, err := getAll(t, rt, srv.URL, "X-Signed", "yes")
		require.NoError(t, err)
		require.Equal(t, sha256.Sum256(res.data), sha256.Sum256(got), "the body is the resource")
		require.Len(t, events, 2)
		assert.Equal(t, int64(300_000), events[0].Offset)
		assert.Equal(t, int64(600_000), events[1].Offset)
		assert.NoError(t, events[1].Err)
		hs := s.headers()
		require.Len(t, hs, 3)
		assert.Equal(t, "", hs[0].Get("Range"))
		assert.Equal(t, "bytes=300000-", hs[1].Get("Range"))
		assert.Equal(t, `"v1"`, hs[1].Get("If-Range"))
		assert.Equal(t, "bytes=600000-", hs[2].Get("Range"))
		assert.Equal(t, "yes", hs[2].Get("X-Signed"), "the caller's headers go with a resume")
		assert.LessOrEqual(t, s.sentBytes.Load(), int64(len(res.data))+2*32<<10, "no more than a buffer or two over the resource")
	})
}

// A long download through connections that are cut every 4 MiB is
// streamed whole: 64 MiB, 15 cuts (the last part is whole), the same SHA-256, the server sending
// at most 5 % more than the resource, and the heap never holding half of
// it (client and server together). The scaled-down version, in CI, of a
// gigabyte cut every 64 MiB.
func TestResumeLongDownload(t *testing.T) {
	if testing.Short() {
		t.Skip("64 MiB per protocol")
	}
	const size, every = 64 << 20, 4 << 20
	res := newResource(size)
	want := sha256.Sum256(res.data)
	forEachProto(t, func(t *testing.T, p proto) {
		s := &rangeServer{res: res, cutAt: every}
		s.cuts.Store(size / every)
		srv := p.server(t, s)
		var resumes atomic.Int32
		rt := New(p.base(t, srv), WithResume(size/every+1), WithBackoff(Constant{}),
			WithOnResume(func(e ResumeEvent) { resumes.Add(1) }))
		defer rt.CloseIdleConnections()
		resp, err := rt.RoundTrip(mustRequest(t, "GET", srv.URL, nil))
		require.NoError(t, err)
		defer resp.Body.Close()
		// The heap's peak while the body is read, sampled, with garbage
		// collected early: the resource itself is 64 MiB of live heap,
		// over which GOGC=100 would let garbage grow as much again.
		defer debug.SetGCPercent(debug.SetGCPercent(10))
		var before runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		var peak atomic.Uint64
		stop := make(chan struct{})
		var sampler sync.WaitGroup
		sampler.Go(func() {
			var ms runtime.MemStats
			for {
				runtime.ReadMemStats(&ms)
				if ms.HeapAlloc > peak.Load() {
					peak.Store(ms.HeapAlloc)
				}
				select {
				case <-stop:
					return
				case <-time.After(5 * time.Millisecond):
				}
			}
		})
		h := sha256.New()
		n, err := io.Copy(h, resp.Body)
		close(stop)
		sampler.Wait()
		require.NoError(t, err)
		assert.EqualValues(t, size, n)
		assert.Equal(t, want[:], h.Sum(nil), "the body is the resource")
		assert.EqualValues(t, size/every-1, resumes.Load(), "one resume per cut")
		assert.LessOrEqual(t, s.sentBytes.Load(), int64(size)*105/100, "the server sent at most 5 %% more than the resource")
		assert.Less(t, peak.Load(), before.HeapAlloc+size/2, "the body was streamed, not held")
	})
}

// A resumable body read whole leaves its connection to be reused.
func TestResumableBodyReusesItsConnection(t *testing.T) {
	forEachProto(t, func(t *testing.T, p proto) {
		res := newResource(100_000)
		s := &rangeServer{res: res}
		var conns atomic.Int32
		srv := p.server(t, s, func(srv *httptest.Server) {
			srv.Config.ConnState = func(_ net.Conn, state http.ConnState) {
				if state == http.StateNew {
					conns.Add(1)
				}
			}
		})
		rt := New(p.base(t, srv))
		defer rt.CloseIdleConnections()
		for range 3 {
			got, err := getAll(t, rt, srv.URL)
			require.NoError(t, err)
			require.Equal(t, res.data, got)
		}
		assert.EqualValues(t, 1, conns.Load(), "one connection for three calls")
	})
}

// A body that yields more than its length (from a base transport that
// does not hold it to Content-Length) fails the Read after the length,
// with ErrBadRange: no byte past the resource is handed on.
func TestResumableBodyLongerThanItsLength(t *testing.T) {
	base := roundTripFunc(func(req *http.Request) (*http.Response, error) {
		h := http.Header{"Etag": {`"v1"`}}
		return &http.Response{StatusCode: 200, Status: "200 OK", Header: h, Request: req, ContentLength: 10,
			Body: io.NopCloser(strings.NewReader("0123456789AB"))}, nil
	})
	resp, err := New(base).RoundTrip(mustRequest(t, "GET", "http://127.0.0.1:1/", nil))
	require.NoError(t, err)
	got, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.Equal(t, "0123456789", string(got))
	assert.ErrorIs(t, err, ErrBadRange)
}

// What cannot be spliced is not: a resource that changed between the cut
// and the resume, and a server that ignores Range, fail the Read with a
// ResumeError that says which, after the bytes already read, which are
// the resource's.
func TestResumeNeverSplicesAnotherRepresentation(t *testing.T) {
	forEachProto(t, func(t *testing.T, p proto) {
		for _, c := range []struct {
			name   string
			change bool
			ignore bool
			want   error
		}{
			{"changed", true, false, ErrResourceChanged},
			{"range ignored", false, true, ErrRangeIgnored},
		} {
			res := newResource(200_000)
			orig := bytes.Clone(res.data)
			s := &rangeServer{res: res, cutAt: 50_000, ignore: c.ignore}
			s.cuts.Store(1)
			srv := p.server(t, s)
			rt := New(p.base(t, srv))
			req := mustRequest(t, "GET", srv.URL, nil)
			resp, err := rt.RoundTrip(req)
			require.NoError(t, err)
			if c.change {
				res.mu.Lock()
				res.data, res.etag = bytes.Repeat([]byte("x"), 200_000), `"v2"`
				res.mu.Unlock()
			}
			got, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			var rerr *ResumeError
			require.ErrorAs(t, err, &rerr, c.name)
			assert.ErrorIs(t, err, c.want, c.name)
			assert.Equal(t, int64(50_000), rerr.Offset, c.name)
			assert.Equal(t, orig[:len(got)], got, "%s: what was read is the first representation's", c.name)
			rt.CloseIdleConnections()
		}
	})
}

// No resume without a strong validator, for a request with its own Range,
// or with resuming off: the break is the Read's error.
func TestResumeOnlyWhenSafe(t *testing.T) {
	forEachProto(t, func(t *testing.T, p proto) {
		for _, c := range []struct {
			name   string
			etag   string
			header []string
			opts   []Option
		}{
			{"no validator", "", nil, nil},
			{"a weak ETag", `W/"v1"`, nil, nil},
			{"the caller's range", `"v1"`, []string{"Range", "bytes=10-"}, nil},
			{"resuming off", `"v1"`, nil, []Option{WithResume(-1)}},
		} {
			res := newResource(100_000)
			res.etag = c.etag
			s := &rangeServer{res: res, cutAt: 20_000}
			s.cuts.Store(1)
			srv := p.server(t, s)
			var resumes atomic.Int32
			rt := New(p.base(t, srv), append(c.opts, WithOnResume(func(ResumeEvent) { resumes.Add(1) }))...)
			_, err := getAll(t, rt, srv.URL, c.header...)
			require.Error(t, err, c.name)
			var rerr *ResumeError
			assert.False(t, errors.As(err, &rerr), c.name)
			assert.Zero(t, resumes.Load(), c.name)
			assert.Len(t, s.headers(), 1, "%s: nothing asked again", c.name)
			rt.CloseIdleConnections()
		}
	})
}

// A body that stalls is resumed, not failed: on the Transport's clock,
// StallTimeout ends the stalled read and the rest is asked for.
func TestResumeAfterStall(t *testing.T) {
	forEachProto(t, func(t *testing.T, p proto) {
		res := newResource(100_000)
		var n atomic.Int32
		srv := p.server(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("ETag", res.etag)
			if n.Add(1) == 1 {
				w.Header().Set("Content-Length", strconv.Itoa(len(res.data)))
				w.Write(res.data[:40_000])
				w.(http.Flusher).Flush()
				<-r.Context().Done() // stalls
				return
			}
			http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(res.data))
		}))
		clk := retrytest.NewClock(time.Now())
		rt := New(p.base(t, srv), WithClock(clk), WithStallTimeout(time.Minute))
		defer rt.CloseIdleConnections()
		resp, err := rt.RoundTrip(mustRequest(t, "GET", srv.URL, nil))
		require.NoError(t, err)
		defer resp.Body.Close()
		first := make([]byte, 40_000)
		_, err = io.ReadFull(resp.Body, first)
		require.NoError(t, err)
		clk.Advance(time.Minute) // no Read under way: no stall, no timer left
		got := make(chan []byte, 1)
		go func() {
			rest, err := io.ReadAll(resp.Body)
			assert.NoError(t, err)
			got <- rest
		}()
		awaitTimers(t, clk, 1)
		clk.Advance(time.Minute)
		select {
		case rest := <-got:
			assert.Equal(t, res.data, append(first, rest...))
		case <-time.After(10 * time.Second):
			resp.Body.Close()
			t.Fatal("the stalled body was not resumed")
		}
		assert.EqualValues(t, 2, n.Load())
	})
}

// A resume answered 503 is tried again after the backoff, as a retry
// would be; one the Budget refuses is not.
func TestResumeAfterAFailedResume(t *testing.T) {
	res := newResource(100_000)
	var n atomic.Int32
	srv := quietServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("ETag", res.etag)
		switch n.Add(1) {
		case 1:
			w.Header().Set("Content-Length", strconv.Itoa(len(res.data)))
			w.Write(res.data[:30_000])
			w.(http.Flusher).Flush()
			panic(http.ErrAbortHandler)
		case 2:
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(res.data))
	}))
	clk := retrytest.NewClock(time.Now())
	var events []ResumeEvent
	rt := New(nil, WithClock(clk), WithOnResume(func(e ResumeEvent) { events = append(events, e) }))
	defer rt.CloseIdleConnections()
	got, err := getAll(t, rt, srv.URL)
	require.NoError(t, err)
	assert.Equal(t, res.data, got)
	require.Len(t, events, 2)
	assert.ErrorContains(t, events[0].Err, "503")
	assert.Zero(t, events[0].Wait, "the first resume goes at once")
	assert.NoError(t, events[1].Err)
	assert.Positive(t, events[1].Wait, "a resume after one that read nothing waits the backoff")
	assert.Contains(t, clk.Waits(), events[1].Wait, "on the Transport's clock")
}

// Close ends a resume under way: a Read waiting for a resume that hangs
// returns when the body is closed.
func TestResumeEndsOnClose(t *testing.T) {
	res := newResource(100_000)
	var n atomic.Int32
	hung := make(chan struct{})
	srv := quietServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("ETag", res.etag)
		if n.Add(1) == 1 {
			w.Header().Set("Content-Length", strconv.Itoa(len(res.data)))
			w.Write(res.data[:30_000])
			w.(http.Flusher).Flush()
			panic(http.ErrAbortHandler)
		}
		close(hung)
		<-r.Context().Done() // the resume hangs
	}))
	rt := New(nil)
	defer rt.CloseIdleConnections()
	resp, err := rt.RoundTrip(mustRequest(t, "GET", srv.URL, nil))
	require.NoError(t, err)
	read := make(chan error, 1)
	go func() {
		_, err := io.ReadAll(resp.Body)
		read <- err
	}()
	select {
	case <-hung:
	case <-time.After(10 * time.Second):
		t.Fatal("no resume was sent")
	}
	resp.Body.Close()
	select {
	case err := <-read:
		assert.Error(t, err)
	case <-time.After(10 * time.Second):
		srv.CloseClientConnections() // frees the hung handler
		t.Fatal("the Read waiting for the resume did not return when the body was closed")
	}
}

// A resume is charged to the Budget as a transient retry: with the
// budget spent, the break is the Read's error.
func TestResumeSpendsTheBudget(t *testing.T) {
	res := newResource(100_000)
	s := &rangeServer{res: res, cutAt: 20_000}
	s.cuts.Store(1)
	srv := quietServer(t, s)
	budget := &TokenBucket{Capacity: 10}
	rt := New(nil, WithBudget(budget))
	defer rt.CloseIdleConnections()
	for budget.AllowRetry(Transient) {
	}
	_, err := getAll(t, rt, srv.URL)
	require.ErrorIs(t, err, io.ErrUnexpectedEOF)
	assert.Len(t, s.headers(), 1, "the resume was refused before it was sent")
}

// A resume passes BeforeAttempt, as a signed request must be signed anew.
func TestResumeRunsBeforeAttempt(t *testing.T) {
	res := newResource(100_000)
	s := &rangeServer{res: res, cutAt: 20_000}
	s.cuts.Store(1)
	srv := quietServer(t, s)
	var signed atomic.Int32
	rt := New(nil, WithBeforeAttempt(func(p Prepare) error {
		p.Request.Header.Set("X-Signature", strconv.Itoa(int(signed.Add(1))))
		return nil
	}))
	defer rt.CloseIdleConnections()
	got, err := getAll(t, rt, srv.URL)
	require.NoError(t, err)
	assert.Equal(t, res.data, got)
	hs := s.headers()
	require.Len(t, hs, 2)
	assert.Equal(t, "2", hs[1].Get("X-Signature"))
}
