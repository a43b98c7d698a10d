package pace

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/backoff-jitter/retry"
	"github.com/backoff-jitter/retry/retrytest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The Pacer through a retry.Transport, against loopback servers.

// fakePacer returns a Pacer whose clock and sleep are a fake clock.
func fakePacer(p *Pacer) (*Pacer, *retrytest.Clock) {
	clock := retrytest.NewClock(time.Now())
	p.now, p.sleep = clock.Now, clock.Sleep
	return p, clock
}

// statusServer answers request i with codes[i] (the last repeats), with
// the header fields given as name, value pairs after each code's index in
// headers, and counts the requests.
func statusServer(t *testing.T, codes []int, headers map[int][]string) (*httptest.Server, *atomic.Int32) {
	t.Helper()
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		i := int(n.Add(1)) - 1
		i = min(i, len(codes)-1)
		h := headers[i]
		for j := 0; j+1 < len(h); j += 2 {
			w.Header().Set(h[j], h[j+1])
		}
		w.WriteHeader(codes[i])
		fmt.Fprintf(w, "status %d", codes[i])
	}))
	t.Cleanup(srv.Close)
	return srv, &n
}

func get(t *testing.T, rt http.RoundTripper, ctx context.Context, url string) (*http.Response, error) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, "GET", url, nil)
	require.NoError(t, err)
	resp, err := rt.RoundTrip(req)
	if err == nil {
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	return resp, err
}

func host(srv *httptest.Server) string { return srv.Listener.Addr().String() }

func TestTransportPacesAfterThrottle(t *testing.T) {
	srv, n := statusServer(t, append(slices.Repeat([]int{429}, coldRefusalsToEngage), 200), nil)
	p, clock := fakePacer(&Pacer{})
	rt := retry.New(nil, retry.WithPacer(p), retry.WithBackoff(retry.Constant{}), retry.WithMaxAttempts(coldRefusalsToEngage+1))
	defer rt.CloseIdleConnections()
	_, err := get(t, rt, context.Background(), srv.URL)
	require.NoError(t, err)
	// The first two answers refused engaged nothing (see suspect); the
	// third engaged the pacer: three attempts sent within the shortest
	// measured time (10ms) estimate 300 requests/s, cut to 210. The retry
	// waits one interval after the throttle (after its backoff of 0), and
	// the next request one more.
	r, engaged := p.Rate(host(srv))
	require.True(t, engaged)
	assert.InDelta(t, 0.7*float64(coldRefusalsToEngage)*100, r, 1e-9) // AdaptCubic keeps 0.7
	_, err = get(t, rt, context.Background(), srv.URL)
	require.NoError(t, err)
	assert.EqualValues(t, coldRefusalsToEngage+2, n.Load())
	step := time.Duration(float64(time.Second) / r)
	assert.Equal(t, []time.Duration{step, step}, clock.Waits())
}

// closeCounter counts Close calls on a request body.
type closeCounter struct {
	io.Reader
	closes atomic.Int32
}

func (c *closeCounter) Close() error { c.closes.Add(1); return nil }

func TestTransportPacerPauseAndDeadline(t *testing.T) {
	srv, n := statusServer(t, []int{503, 200}, map[int][]string{0: {"Retry-After", "3600"}})
	p, _ := fakePacer(&Pacer{})
	var gaveUp []retry.Event
	rt := retry.New(nil, retry.WithPacer(p), retry.WithMaxRetryAfter(2*time.Hour),
		retry.WithOnGiveUp(func(e retry.Event) { gaveUp = append(gaveUp, e) }))
	defer rt.CloseIdleConnections()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// The first request is told to wait an hour: past its deadline, so
	// the 503 comes back at once, and the host is paused for an hour.
	resp, err := get(t, rt, ctx, srv.URL)
	require.NoError(t, err)
	assert.Equal(t, 503, resp.StatusCode)

	// The next request would wait for the pause: past its deadline too,
	// so it fails at once, sends nothing, and closes its body.
	cc := &closeCounter{Reader: strings.NewReader("x")}
	req, err := http.NewRequestWithContext(ctx, "PUT", srv.URL, cc)
	require.NoError(t, err)
	_, err = rt.RoundTrip(req)
	var re *retry.Error
	require.ErrorAs(t, err, &re)
	assert.Equal(t, retry.StopDeadline, re.Reason)
	assert.Equal(t, 0, re.Attempts)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.EqualValues(t, 1, cc.closes.Load())
	assert.EqualValues(t, 1, n.Load())
	require.Len(t, gaveUp, 2)
	assert.Equal(t, retry.StopDeadline, gaveUp[1].Reason)
}

func TestTransportCancelDuringPacing(t *testing.T) {
	srv, n := statusServer(t, []int{429, 200}, map[int][]string{0: {"Retry-After", "3600"}})
	p := &Pacer{}
	rt := retry.New(nil, retry.WithPacer(p), retry.WithMaxRetryAfter(2*time.Hour), retry.WithMaxAttempts(1))
	defer rt.CloseIdleConnections()
	_, err := get(t, rt, context.Background(), srv.URL)
	require.NoError(t, err)
	// The real sleep, with a context canceled while waiting for the pacer.
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(10*time.Millisecond, cancel)
	start := time.Now()
	_, err = get(t, rt, ctx, srv.URL)
	assert.ErrorIs(t, err, context.Canceled)
	var re *retry.Error
	require.ErrorAs(t, err, &re)
	assert.Equal(t, retry.StopCanceled, re.Reason)
	assert.Less(t, time.Since(start), time.Minute)
	assert.EqualValues(t, 1, n.Load())
}

// A turn made void while the Transport waits for it wakes the attempt,
// which takes a turn at the new rate.
func TestTransportRetakesVoidTurn(t *testing.T) {
	srv, n := statusServer(t, append(slices.Repeat([]int{429}, coldRefusalsToEngage), 200), nil)
	p, clock := fakePacer(&Pacer{})
	rt := retry.New(nil, retry.WithPacer(p), retry.WithBackoff(retry.Constant{}), retry.WithMaxAttempts(coldRefusalsToEngage+2))
	defer rt.CloseIdleConnections()
	var blocked bool
	p.sleep = func(ctx context.Context, d time.Duration) error {
		if d > 0 && !blocked {
			// While the retry waits for its turn, another attempt at the
			// rate in force is throttled; the wait lasts until the turn
			// is void.
			blocked = true
			req := hostRequest(t, host(srv))
			p.observe(req, retry.Throttled, response(429), curGen(p, req), clock.Now())
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(10 * time.Second):
				t.Error("the void turn did not end the wait")
				return nil
			}
		}
		return clock.Sleep(ctx, d)
	}
	_, err := get(t, rt, context.Background(), srv.URL)
	require.NoError(t, err)
	require.True(t, blocked)
	// The new turn, an interval after the cut.
	r, _ := p.Rate(host(srv))
	assert.Equal(t, []time.Duration{time.Duration(float64(time.Second) / r)}, clock.Waits())
	assert.EqualValues(t, coldRefusalsToEngage+1, n.Load())
}

func TestTransportSlowStart(t *testing.T) {
	release := make(chan struct{})
	arrived := make(chan struct{}, 10)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived <- struct{}{}
		<-release
	}))
	defer srv.Close()
	p := &Pacer{InitialWindow: 2}
	rt := retry.New(nil, retry.WithPacer(p))
	defer rt.CloseIdleConnections()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	errs := make(chan error, 5)
	for i := 0; i < 5; i++ {
		go func() {
			req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL, nil)
			resp, err := rt.RoundTrip(req)
			if err == nil {
				resp.Body.Close()
			}
			errs <- err
		}()
	}
	<-arrived
	<-arrived
	st := p.state(hostRequest(t, host(srv)))
	waitFor(t, st, func() bool { _, _, w := st.st.Window(); return w == 3 })
	assert.Len(t, arrived, 0, "no third attempt before an answer")
	close(release)
	for i := 0; i < 5; i++ {
		require.NoError(t, <-errs)
	}
	inflight, slots, _, slow := slowState(st)
	assert.Zero(t, inflight)
	assert.GreaterOrEqual(t, slots, 4)
	assert.False(t, slow)
}

// Every way out of RoundTrip gives a slow-start slot back: with a window
// of one, a leaked slot would keep the next request waiting for good.
func TestTransportSlowStartReleasesSlots(t *testing.T) {
	srv, _ := statusServer(t, []int{500}, nil)
	p, _ := fakePacer(&Pacer{InitialWindow: 1})
	rt := retry.New(nil, retry.WithPacer(p), retry.WithMaxAttempts(2), retry.WithBackoff(retry.Constant{}))
	defer rt.CloseIdleConnections()
	st := p.state(hostRequest(t, host(srv)))
	inflight := func() int { n, _, _, _ := slowState(st); return n }

	resp, err := get(t, rt, context.Background(), srv.URL) // 500, 500: gives up
	require.NoError(t, err)
	assert.Equal(t, 500, resp.StatusCode)
	assert.Zero(t, inflight())

	req, err := http.NewRequest("PUT", srv.URL, strings.NewReader("x"))
	require.NoError(t, err)
	req.GetBody = func() (io.ReadCloser, error) { return nil, errors.New("no body") }
	_, err = rt.RoundTrip(req) // 500, then GetBody fails: the retry is not sent
	require.ErrorContains(t, err, "no body")
	assert.Zero(t, inflight())

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = get(t, rt, ctx, srv.URL)
	require.ErrorIs(t, err, context.Canceled)
	assert.Zero(t, inflight())
	_, _, _, slow := slowState(st)
	assert.True(t, slow, "failures alone do not end slow start")
}

// A healthy client that sends one request at a time never waits.
func TestTransportPacerHealthyNeverWaits(t *testing.T) {
	srv, _ := statusServer(t, []int{200}, nil)
	p, clock := fakePacer(&Pacer{})
	rt := retry.New(nil, retry.WithPacer(p))
	defer rt.CloseIdleConnections()
	for i := 0; i < 20; i++ {
		_, err := get(t, rt, context.Background(), srv.URL)
		require.NoError(t, err)
	}
	assert.Empty(t, clock.Waits())
	_, engaged := p.Rate(host(srv))
	assert.False(t, engaged)
}

// staticTransport answers every request at once, from memory.
type staticTransport struct{}

func (staticTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	return &http.Response{StatusCode: 200, Body: http.NoBody, Request: r}, nil
}

var allocSink *http.Response

// An idle Pacer (a key past slow start that never throttled) costs the
// Transport's first-try success no allocation.
func TestIdlePacerAllocations(t *testing.T) {
	req := hostRequest(t, "127.0.0.1")
	var without, with http.RoundTripper = retry.New(staticTransport{}), retry.New(staticTransport{}, retry.WithPacer(&Pacer{}))
	for i := 0; i < 20; i++ {
		allocSink, _ = with.RoundTrip(req) // past slow start
	}
	a := testing.AllocsPerRun(200, func() { allocSink, _ = without.RoundTrip(req) })
	b := testing.AllocsPerRun(200, func() { allocSink, _ = with.RoundTrip(req) })
	if b > a {
		t.Errorf("a first-try success costs %.0f allocations with an idle Pacer, %.0f without", b, a)
	}
}

// A copy of a hedged attempt waits for its turn like any attempt: once the
// key has engaged, the attempt and its copy leave one interval apart, so
// hedging never sends faster than the rate learned.
func TestHedgedCopiesWaitForTurns(t *testing.T) {
	var refused atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == "/engage" && int(refused.Add(1)) <= coldRefusalsToEngage:
			w.WriteHeader(http.StatusTooManyRequests)
		case r.URL.Path == "/slow" && r.Header.Get("X-Attempt") == "1":
			<-r.Context().Done() // stalls until the copy's answer cancels it
		}
	}))
	t.Cleanup(srv.Close)
	p, clock := fakePacer(&Pacer{})
	rt := retry.New(nil, retry.WithPacer(p), retry.WithBackoff(retry.Constant{}), retry.WithMaxAttempts(coldRefusalsToEngage+1))
	defer rt.CloseIdleConnections()
	_, err := get(t, rt, context.Background(), srv.URL+"/engage")
	require.NoError(t, err)
	rate, engaged := p.Rate(host(srv))
	require.True(t, engaged)

	before := len(clock.Waits())
	hedged := retry.New(nil, retry.WithPacer(p), retry.WithAttemptHeader("X-Attempt"),
		retry.WithHedge(retry.Hedge{Delay: time.Millisecond}), retry.WithClock(retrytest.NewClock(time.Now())))
	defer hedged.CloseIdleConnections()
	var sum retry.Summary
	ctx := retry.ContextWithOptions(context.Background(), retry.WithOnDone(func(s retry.Summary) { sum = s }))
	resp, err := get(t, hedged, ctx, srv.URL+"/slow")
	require.NoError(t, err)
	assert.Equal(t, 200, resp.StatusCode)
	require.Equal(t, 1, sum.Hedges)
	waits := clock.Waits()[before:]
	require.Len(t, waits, 2, "the attempt's turn and the copy's")
	interval := time.Duration(float64(time.Second) / rate)
	assert.InDelta(t, float64(interval), float64(waits[1]), float64(time.Millisecond), "the copy waits one interval after the attempt's turn")
}
