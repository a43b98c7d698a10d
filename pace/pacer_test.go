package pace

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/backoff-jitter/retry"
	"github.com/backoff-jitter/retry/internal/pacecore"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var pacerEpoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func hostRequest(t *testing.T, host string) *http.Request {
	t.Helper()
	req, err := http.NewRequest("GET", "http://"+host+"/", nil)
	require.NoError(t, err)
	return req
}

func response(code int, header ...string) *http.Response {
	h := http.Header{}
	for i := 0; i+1 < len(header); i += 2 {
		h.Set(header[i], header[i+1])
	}
	return &http.Response{StatusCode: code, Header: h}
}

// sendAt feeds p successes at rps requests per second for d, starting at
// from, and returns the time after the last.
func sendAt(p *Pacer, req *http.Request, from time.Time, rps float64, d time.Duration) time.Time {
	step := time.Duration(float64(time.Second) / rps)
	at := from
	for ; at.Sub(from) < d; at = at.Add(step) {
		p.reserve(req, at)
		p.observe(req, retry.Success, response(200), curGen(p, req), at)
	}
	return at
}

// refusalsToEngage is how many throttles in a row engage an idle key
// after successes, coldRefusalsToEngage a new key before any: the
// Pacer's rules (its doc, "Idle until clearly throttled").
const refusalsToEngage, coldRefusalsToEngage = 7, 3

// engage feeds req's key throttles at time at, as a limit that refuses
// everything would send them, until the Pacer engages (the seventh, or the
// third of a new key's), and fails the test if twenty do not.
func engage(t *testing.T, p *Pacer, req *http.Request, resp *http.Response, at time.Time) {
	t.Helper()
	for range 20 {
		p.observe(req, retry.Throttled, resp, curGen(p, req), at)
		if _, on := p.Rate(p.key(req)); on {
			return
		}
	}
	t.Fatal("twenty throttles in a row engaged nothing")
}

// curGen returns the generation of the rate p paces req's key at now: the
// throttles the tests feed are of attempts paced at the current rate.
func curGen(p *Pacer, req *http.Request) uint64 {
	s := p.state(req)
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.st.Gen()
}

func TestPacerKeysAreIndependent(t *testing.T) {
	p := &Pacer{}
	a, b := hostRequest(t, "a.example"), hostRequest(t, "b.example")
	now := sendAt(p, a, pacerEpoch, 10, 2*time.Second)
	sendAt(p, b, pacerEpoch, 10, 2*time.Second)
	engage(t, p, a, response(429), now)
	_, engagedA := p.Rate("a.example")
	_, engagedB := p.Rate("b.example")
	assert.True(t, engagedA)
	assert.False(t, engagedB)
	d, res := p.reserve(b, now)
	assert.Zero(t, d)
	assert.Nil(t, res)

	// A custom key groups hosts: here, every request counts against one account.
	acct := &Pacer{Key: func(*http.Request) string { return "account-1" }}
	acct.observe(a, retry.Throttled, response(400), curGen(acct, a), now)
	engage(t, acct, b, response(400), now) // a's throttle counts too
	_, res = acct.reserve(b, now)
	assert.NotNil(t, res, "b.example shares account-1's limit")
}

func TestPacerValidate(t *testing.T) {
	for _, p := range []*Pacer{{MinRate: -1}, {MinRate: math.NaN()}, {MinRate: math.Inf(1)}, {Adapt: 9}} {
		err := p.Validate()
		require.Error(t, err)
		assert.Contains(t, err.Error(), "pace: Pacer.")
	}
	assert.NoError(t, (&Pacer{}).Validate())
}

func TestPacerConcurrentUse(t *testing.T) {
	p := &Pacer{}
	var wg sync.WaitGroup
	for g := 0; g < 16; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			req := hostRequest(t, fmt.Sprintf("h%d.example", g%3))
			at := pacerEpoch
			for i := 0; i < 300; i++ {
				at = at.Add(time.Duration(g+1) * time.Millisecond)
				class := retry.Success
				if i%50 == 49 {
					class = retry.Throttled
				}
				p.observe(req, class, response(200), curGen(p, req), at)
				if _, res := p.reserve(req, at); res != nil && i%7 == 0 {
					res.cancel()
				}
			}
		}(g)
	}
	// Keys that are never throttled take the lock-free path of observe
	// and reserve, from many goroutines at once.
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			req := hostRequest(t, "idle.example")
			at := pacerEpoch
			for i := 0; i < 300; i++ {
				at = at.Add(time.Duration(g+1) * time.Millisecond)
				p.reserve(req, at)
				p.observe(req, retry.Success, response(200), 0, at)
			}
		}(g)
	}
	wg.Wait()
	_, engaged := p.Rate("idle.example")
	assert.False(t, engaged)
	// The throttles come at one in fifty whatever the rate: the keys
	// engage, and may disengage again (see shedding).
	for i := 0; i < 3; i++ {
		r, engaged := p.Rate(fmt.Sprintf("h%d.example", i))
		assert.GreaterOrEqual(t, r, pacecore.DefaultMinRate)
		assert.Equal(t, !engaged, math.IsInf(r, 1))
	}
}

// reserve and observe look up req's key, as the Transport does once per
// RoundTrip, for the tests that drive a Pacer directly.
func (p *Pacer) reserve(req *http.Request, now time.Time) (time.Duration, *reservation) {
	s := p.state(req)
	s.sent.Add(1)
	return s.reserveAt(now)
}

func (p *Pacer) observe(req *http.Request, class retry.Class, resp *http.Response, gen uint64, now time.Time) {
	f := retry.Feedback{Class: class, Response: resp}
	if class == retry.Throttled && resp != nil {
		f.Wait, f.Hinted = retry.ServerWait(resp.Header, now, retry.ResetIgnore)
	}
	p.observeState(p.state(req), false, f, gen, now)
}

// fakeLimit replaces slow start's timer: it records the duration asked for
// and fires only when the test says so.
type fakeLimit struct {
	mu      sync.Mutex
	d       time.Duration
	f       func()
	stopped bool
}

func (l *fakeLimit) afterFunc(d time.Duration, f func()) func() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.d, l.f = d, f
	return func() bool {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.stopped = true
		return true
	}
}

func (l *fakeLimit) fire() {
	l.mu.Lock()
	f := l.f
	l.mu.Unlock()
	f()
}

// admitAsync admits an attempt on another goroutine and reports the
// outcome on the returned channel.
func admitAsync(ctx context.Context, p *Pacer, s *entry) <-chan error {
	done := make(chan error, 1)
	go func() {
		slot, err := s.admit(ctx)
		if err == nil && !slot {
			err = errNoSlot
		}
		done <- err
	}()
	return done
}

var errNoSlot = errors.New("admitted without a slot")

// waitFor yields until cond holds under s's lock; the test's deadline
// bounds it.
func waitFor(t *testing.T, s *entry, cond func() bool) {
	t.Helper()
	for {
		s.mu.Lock()
		ok := cond()
		s.mu.Unlock()
		if ok {
			return
		}
		runtime.Gosched()
	}
}

func slowState(s *entry) (inflight, slots, waiting int, slow bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	inflight, slots, waiting = s.st.Window()
	return inflight, slots, waiting, s.st.Mode() == pacecore.ModeSlowStart
}

func TestPacerSlowStartWindow(t *testing.T) {
	limit := &fakeLimit{}
	p := &Pacer{InitialWindow: 2, afterFunc: limit.afterFunc}
	s := p.state(hostRequest(t, "api.example"))
	ctx := context.Background()
	for i := 0; i < 2; i++ {
		slot, err := s.admit(ctx)
		require.NoError(t, err)
		require.True(t, slot, "attempt %d is within the window", i+1)
	}
	assert.Equal(t, pacecore.SlowStartLimit, limit.d)
	third, fourth := admitAsync(ctx, p, s), admitAsync(ctx, p, s)
	waitFor(t, s, func() bool { _, _, w := s.st.Window(); return w == 2 })

	// An answer gives its slot back and opens one more: both waiters go.
	p.observeState(s, true, retry.Feedback{Class: retry.Success, Response: response(200)}, 0, pacerEpoch)
	require.NoError(t, <-third)
	require.NoError(t, <-fourth)
	inflight, slots, waiting, slow := slowState(s)
	assert.Equal(t, []int{3, 3, 0}, []int{inflight, slots, waiting})
	assert.True(t, slow)

	// A failure gives its slot back without opening one, and does not end
	// slow start.
	p.observeState(s, true, retry.Feedback{Class: retry.Transient}, 0, pacerEpoch)
	_, slots, _, slow = slowState(s)
	assert.Equal(t, 3, slots)
	assert.True(t, slow)

	// An answer that nothing waits for ends slow start, and its timer.
	p.observeState(s, true, retry.Feedback{Class: retry.Permanent, Response: response(404)}, 0, pacerEpoch)
	_, _, _, slow = slowState(s)
	assert.False(t, slow)
	assert.True(t, limit.stopped)
	for i := 0; i < 100; i++ {
		slot, err := s.admit(ctx)
		require.NoError(t, err)
		require.False(t, slot)
	}
	_, engaged := p.Rate("api.example")
	assert.False(t, engaged)
}

func TestPacerSlowStartEndsOnThrottle(t *testing.T) {
	p := &Pacer{InitialWindow: 1, afterFunc: (&fakeLimit{}).afterFunc}
	req := hostRequest(t, "api.example")
	s := p.state(req)
	ctx := context.Background()
	slot, err := s.admit(ctx)
	require.NoError(t, err)
	require.True(t, slot)
	s.sent.Add(1)
	waiter := admitAsync(ctx, p, s)
	waitFor(t, s, func() bool { _, _, w := s.st.Window(); return w == 1 })

	// The first answers, refused, engage nothing (see suspect): each
	// one's slot goes to the waiter.
	for range coldRefusalsToEngage - 1 {
		p.observeState(s, true, retry.Feedback{Class: retry.Throttled, Response: response(429)}, 0, pacerEpoch)
		require.NoError(t, <-waiter)
		s.sent.Add(1)
		waiter = admitAsync(ctx, p, s)
		waitFor(t, s, func() bool { _, _, w := s.st.Window(); return w == 1 })
	}

	p.observeState(s, true, retry.Feedback{Class: retry.Throttled, Response: response(429)}, 0, pacerEpoch)
	assert.ErrorIs(t, <-waiter, errNoSlot, "the waiter goes on without a slot, to wait for a turn")
	_, engaged := p.Rate("api.example")
	require.True(t, engaged)
	d, res := s.reserveAt(pacerEpoch)
	require.NotNil(t, res)
	assert.Positive(t, d, "the first turn after a throttle is an interval away")
}

func TestPacerSlowStartTimeLimit(t *testing.T) {
	limit := &fakeLimit{}
	p := &Pacer{InitialWindow: 1, afterFunc: limit.afterFunc}
	s := p.state(hostRequest(t, "api.example"))
	ctx := context.Background()
	slot, err := s.admit(ctx) // an attempt that never answers
	require.NoError(t, err)
	require.True(t, slot)
	waiter := admitAsync(ctx, p, s)
	waitFor(t, s, func() bool { _, _, w := s.st.Window(); return w == 1 })
	limit.fire()
	assert.ErrorIs(t, <-waiter, errNoSlot)
	_, _, _, slow := slowState(s)
	assert.False(t, slow)
}

func TestPacerSlowStartCancel(t *testing.T) {
	p := &Pacer{InitialWindow: 1, afterFunc: (&fakeLimit{}).afterFunc}
	s := p.state(hostRequest(t, "api.example"))
	_, err := s.admit(context.Background())
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	waiter := admitAsync(ctx, p, s)
	waitFor(t, s, func() bool { _, _, w := s.st.Window(); return w == 1 })
	cancel()
	assert.ErrorIs(t, <-waiter, context.Canceled)
	inflight, _, waiting, _ := slowState(s)
	assert.Equal(t, 1, inflight)
	assert.Zero(t, waiting)
}

func TestPacerSlowStartOff(t *testing.T) {
	p := &Pacer{InitialWindow: -1}
	s := p.state(hostRequest(t, "api.example"))
	for i := 0; i < 100; i++ {
		slot, err := s.admit(context.Background())
		require.NoError(t, err)
		require.False(t, slot)
	}
	_, _, _, slow := slowState(s)
	assert.False(t, slow)
}

// timers records every timer of slow start's time limit, in order.
type timers struct {
	mu sync.Mutex
	fs []func()
}

func (ts *timers) afterFunc(_ time.Duration, f func()) func() bool {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	ts.fs = append(ts.fs, f)
	return func() bool { return true }
}

func (ts *timers) fire(t *testing.T, i int) {
	t.Helper()
	ts.mu.Lock()
	require.Greater(t, len(ts.fs), i, "timers armed")
	f := ts.fs[i]
	ts.mu.Unlock()
	f()
}

// TestRestartOutlivesTheOldTimer: the time limit of a slow start that
// ended, fired just as it ended and run only after the key restarted,
// does not end the new slow start; the new one's own limit does.
func TestRestartOutlivesTheOldTimer(t *testing.T) {
	ts := &timers{}
	p := &Pacer{InitialWindow: 2, afterFunc: ts.afterFunc}
	req := hostRequest(t, "api.example")
	s := p.state(req)
	ctx := context.Background()
	slot, err := s.admit(ctx)
	require.NoError(t, err)
	require.True(t, slot)
	engage(t, p, req, response(429), pacerEpoch)
	_, _, _, slow := slowState(s)
	require.False(t, slow, "engaging ends slow start")

	// An outage ends: a second cut, no success ever, then one a minute
	// later restarts the key in slow start.
	p.observe(req, retry.Throttled, response(429), curGen(p, req), pacerEpoch)
	p.observe(req, retry.Success, response(200), curGen(p, req), pacerEpoch.Add(time.Minute))
	slot, err = s.admit(ctx)
	require.NoError(t, err)
	require.True(t, slot, "restarted in slow start")

	ts.fire(t, 0) // the first slow start's limit, late
	_, _, _, slow = slowState(s)
	assert.True(t, slow, "the old timer ended the new slow start")
	ts.fire(t, 1)
	_, _, _, slow = slowState(s)
	assert.False(t, slow, "the new slow start's own limit ends it")
}

// reserveAt is reserve for an attempt with no deadline.
func (e *entry) reserveAt(now time.Time) (time.Duration, *reservation) {
	d, res, _, _ := e.reserve(context.Background(), now)
	return d, res
}

// observeState is the answer f of an attempt paced at gen, at now.
func (p *Pacer) observeState(e *entry, slot bool, f retry.Feedback, gen uint64, now time.Time) {
	e.answer(f, slot, gen, now)
}
