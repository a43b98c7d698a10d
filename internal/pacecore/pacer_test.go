package pacecore

import (
	"fmt"
	"math"
	"net/http"
	"testing"
	"time"

	"github.com/backoff-jitter/retry"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func sendAt(p *testPacer, req *http.Request, from time.Time, rps float64, d time.Duration) time.Time {
	step := time.Duration(float64(time.Second) / rps)
	at := from
	for ; at.Sub(from) < d; at = at.Add(step) {
		p.reserve(req, at)
		p.observe(req, retry.Success, response(200), curGen(p, req), at)
	}
	return at
}

var (
	refusalsToEngage     = int(math.Ceil(engageAlarm/math.Log(engageHigh/engageLow) - 1e-9))
	coldRefusalsToEngage = int(math.Ceil((engageAlarm-coldSuspicion)/math.Log(engageHigh/engageLow) - 1e-9))
)

func engage(t *testing.T, p *testPacer, req *http.Request, resp *http.Response, at time.Time) {
	t.Helper()
	for range 20 {
		p.observe(req, retry.Throttled, resp, curGen(p, req), at)
		if _, on := p.Rate(req.URL.Host); on {
			return
		}
	}
	t.Fatal("twenty throttles in a row engaged nothing")
}

func curGen(p *testPacer, req *http.Request) uint64 {
	s := p.state(req)
	return s.st.sched.gen
}

func TestPacerIdleUntilThrottled(t *testing.T) {
	p := &testPacer{}
	req := hostRequest(t, "api.example")
	now := sendAt(p, req, pacerEpoch, 50, 3*time.Second)
	d, res := p.reserve(req, now)
	assert.Zero(t, d)
	assert.Nil(t, res)
	r, engaged := p.Rate("api.example")
	assert.False(t, engaged)
	assert.True(t, math.IsInf(r, 1))
}

func TestPacerCutsOnThrottle(t *testing.T) {
	tests := []struct {
		adapt Adapt
		want  float64 // fraction of the measured rate kept
	}{
		{Cubic, cubicBeta},
		{AIMD, aimdCut},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.adapt), func(t *testing.T) {
			p := &testPacer{Adapt: tt.adapt}
			req := hostRequest(t, "api.example")
			now := sendAt(p, req, pacerEpoch, 10, 5*time.Second)
			engage(t, p, req, response(429), now)
			r, engaged := p.Rate("api.example")
			require.True(t, engaged)
			// The measured rate is smoothed, and the throttle closes a
			// half-second with one attempt fewer: it is a little below 10/s.
			assert.GreaterOrEqual(t, r, 8*tt.want, "rate after a throttle while sending 10/s")
			assert.LessOrEqual(t, r, 10*tt.want)

			// A throttle of an attempt sent before the cut changes nothing.
			p.observe(req, retry.Throttled, response(429), 0, now.Add(5*time.Millisecond))
			same, _ := p.Rate("api.example")
			assert.Equal(t, r, same)

			// One paced at the new rate cuts again, but the server was
			// accepting 10/s: no further than 0.9 times that, which is
			// here 0.9 times the rate in force.
			p.observe(req, retry.Throttled, response(429), curGen(p, req), now.Add(10*time.Millisecond))
			r2, _ := p.Rate("api.example")
			assert.InDelta(t, acceptedShare*r, r2, 1e-9)
		})
	}
}

// The first half-second measured is the estimate of the sending rate, not
// a fifth of it (smoothing it with the zero before it).
func TestPacerFirstMeasurement(t *testing.T) {
	p := &testPacer{}
	req := hostRequest(t, "api.example")
	// Attempts at 0, 100, ..., 500 ms: the first bucket closes at 500 ms
	// with six attempts and six successes, 12/s. Two more, then the
	// refusals that engage the key (see suspect).
	now := sendAt(p, req, pacerEpoch, 10, 750*time.Millisecond)
	engage(t, p, req, response(429), now)
	r, _ := p.Rate("api.example")
	assert.InDelta(t, cubicBeta*12, r, 1e-9)
}

func TestPacerRecoversOnSuccess(t *testing.T) {
	for _, adapt := range []Adapt{Cubic, AIMD} {
		t.Run(fmt.Sprint(adapt), func(t *testing.T) {
			p := &testPacer{Adapt: adapt}
			req := hostRequest(t, "api.example")
			now := sendAt(p, req, pacerEpoch, 10, 5*time.Second)
			engage(t, p, req, response(429), now)
			cut, _ := p.Rate("api.example")
			// Keep sending at 10/s; the rate must climb back to the old
			// one and never beyond 1.25 times what is measured.
			at := now
			var r float64
			for i := 0; i < 200; i++ {
				at = at.Add(100 * time.Millisecond)
				p.reserve(req, at)
				p.observe(req, retry.Success, response(200), curGen(p, req), at)
				r, _ = p.Rate("api.example")
				require.LessOrEqual(t, r, growthLimit*10+1e-9)
			}
			assert.Greater(t, r, cut)
			assert.GreaterOrEqual(t, r, 10.0, "after 20 s without a throttle the rate is back to the old one")

			// A client that then sends less keeps the rate it learned.
			for i := 0; i < 20; i++ {
				at = at.Add(time.Second)
				p.reserve(req, at)
				p.observe(req, retry.Success, response(200), curGen(p, req), at)
			}
			kept, _ := p.Rate("api.example")
			assert.GreaterOrEqual(t, kept, r)
		})
	}
}

func TestPacerSpacesReservations(t *testing.T) {
	p := &testPacer{}
	req := hostRequest(t, "api.example")
	now := sendAt(p, req, pacerEpoch, 4, 4*time.Second)
	engage(t, p, req, response(429), now)
	r, _ := p.Rate("api.example")
	step := time.Duration(float64(time.Second) / r)
	var waits []time.Duration
	for i := 0; i < 4; i++ {
		d, res := p.reserve(req, now)
		require.NotNil(t, res)
		waits = append(waits, d)
	}
	// A burst of one: the first token is there, each next one a step later.
	for i := 1; i < len(waits); i++ {
		assert.InDelta(t, float64(step), float64(waits[i]-waits[i-1]), float64(time.Millisecond), "waits %v", waits)
	}

	// A reservation given back is reused by the next attempt.
	d, res := p.reserve(req, now)
	res.cancel()
	d2, _ := p.reserve(req, now)
	assert.Equal(t, d, d2)
}

func TestPacerServerHints(t *testing.T) {
	t.Run("Retry-After pauses the key", func(t *testing.T) {
		p := &testPacer{}
		req := hostRequest(t, "api.example")
		now := sendAt(p, req, pacerEpoch, 10, 2*time.Second)
		p.observe(req, retry.Throttled, response(429, "Retry-After", "3"), curGen(p, req), now)
		d, _ := p.reserve(req, now)
		assert.Equal(t, 3*time.Second, d)
		d2, _ := p.reserve(req, now)
		assert.Greater(t, d2, d, "after the pause, attempts are spaced, not released at once")
	})
	t.Run("a spent quota pauses before a refusal", func(t *testing.T) {
		p := &testPacer{}
		req := hostRequest(t, "api.example")
		now := sendAt(p, req, pacerEpoch, 10, 2*time.Second)
		p.observeHint(req, 5*time.Second, curGen(p, req), now)
		d, res := p.reserve(req, now)
		require.NotNil(t, res, "an exhausted quota engages the pacer before any throttle")
		assert.Equal(t, 5*time.Second, d)
	})
	t.Run("a pause voids the turns handed out before it", func(t *testing.T) {
		p := &testPacer{}
		req := hostRequest(t, "api.example")
		now := sendAt(p, req, pacerEpoch, 10, 2*time.Second)
		engage(t, p, req, response(429), now)
		_, before := p.reserve(req, now)
		require.NotNil(t, before)
		p.observeHint(req, 4*time.Second, curGen(p, req), now)
		assert.True(t, before.stale())
		d, after := p.reserve(req, now)
		assert.False(t, after.stale())
		assert.Equal(t, 4*time.Second, d)
	})
	t.Run("a spent quota before any throttle", func(t *testing.T) {
		p := &testPacer{}
		req := hostRequest(t, "api.example")
		p.observeHint(req, 2*time.Second, curGen(p, req), pacerEpoch)
		d, _ := p.reserve(req, pacerEpoch)
		assert.Equal(t, 2*time.Second, d)
	})
	t.Run("quota left changes nothing", func(t *testing.T) {
		p := &testPacer{}
		req := hostRequest(t, "api.example")
		p.observe(req, retry.Success, response(200, "RateLimit", `"default";r=40;t=5`), curGen(p, req), pacerEpoch)
		_, engaged := p.Rate("api.example")
		assert.False(t, engaged)
	})
}

func TestPacerMinRate(t *testing.T) {
	p := &testPacer{MinRate: 2}
	req := hostRequest(t, "api.example")
	now := pacerEpoch
	for i := 0; i < 20; i++ {
		now = now.Add(10 * time.Millisecond)
		p.observe(req, retry.Throttled, response(429), curGen(p, req), now)
	}
	r, _ := p.Rate("api.example")
	assert.Equal(t, 2.0, r)
}

// A cold start sends a burst far above the server's capacity: the first
// cut goes to just below the rate the server accepted, not to 0.7 times
// the burst's rate, which would take a dozen rounds of refusals.
func TestPacerColdStartCutsToAcceptedRate(t *testing.T) {
	p := &testPacer{}
	req := hostRequest(t, "api.example")
	for i := 0; i < 1000; i++ {
		p.reserve(req, pacerEpoch) // a burst: 1000 attempts at once
	}
	at := pacerEpoch
	for i := 0; i < 10; i++ { // ten accepted within 10ms
		at = at.Add(time.Millisecond)
		p.observe(req, retry.Success, response(200), 0, at)
	}
	// Most of the burst unanswered, its refusals engage the key once
	// they are over 0.4 of the answers (see tooEarly): the seventh.
	refusals := 0
	for engaged := false; !engaged && refusals < 10; _, engaged = p.Rate("api.example") {
		p.observe(req, retry.Throttled, response(429), 0, at)
		refusals++
	}
	require.Equal(t, 7, refusals)
	r, _ := p.Rate("api.example")
	// Ten successes in the 10ms measured: 1000/s, of which 0.9 is kept.
	assert.InDelta(t, acceptedShare*1000, r, 1e-6)

	// The burst's other refusals were not paced: they cut nothing more.
	for i := 0; i < 50; i++ {
		p.observe(req, retry.Throttled, response(429), 0, at)
	}
	r2, _ := p.Rate("api.example")
	assert.Equal(t, r, r2)
}

// A handful of successes is no rate: the cut ignores a current bucket of
// fewer than minSamples successes, which would make a rate of anything.
func TestPacerFewSuccessesAreNoRate(t *testing.T) {
	p := &testPacer{}
	req := hostRequest(t, "api.example")
	for i := 0; i < 100; i++ {
		p.reserve(req, pacerEpoch)
	}
	at := pacerEpoch.Add(time.Millisecond)
	p.observe(req, retry.Success, response(200), 0, at) // one in 10ms: "100/s"
	p.observe(req, retry.Throttled, response(429), 0, at)
	_, engaged := p.Rate("api.example")
	require.False(t, engaged, "one refusal of the first two answers engages nothing")
	engage(t, p, req, response(429), at)
	r, _ := p.Rate("api.example")
	// 100 attempts in the 10ms measured: 10000/s, cut to 0.7 times.
	assert.InDelta(t, cubicBeta*10000, r, 1e-6)
}

// A 503 while requests still get through is a throttle like a 429 (S3's
// SlowDown, Azure Storage's ServerBusy), and its Retry-After pauses the key.
func TestPacerLearnsFrom503(t *testing.T) {
	p := &testPacer{}
	req := hostRequest(t, "api.example")
	now := sendAt(p, req, pacerEpoch, 100, 2*time.Second)
	engage(t, p, req, response(503), now)
	r, engaged := p.Rate("api.example")
	require.True(t, engaged)
	assert.Less(t, r, 100.0)

	at := now.Add(time.Second)
	p.observe(req, retry.Throttled, response(503, "Retry-After", "2"), 0, at)
	d, _ := p.reserve(req, at)
	assert.Equal(t, 2*time.Second, d, "a 503's Retry-After pauses the key")
}

// An outage at a cold start refuses everything from the first attempt:
// the cuts stop at a quarter of the rate the first one set (so that the
// waiting requests keep turns within their deadlines), and the first
// success starts the key afresh, in slow start.
func TestPacerColdOutage(t *testing.T) {
	p := &testPacer{}
	req := hostRequest(t, "api.example")
	s := p.state(req)
	for i := 0; i < 10; i++ {
		p.reserve(req, pacerEpoch)
	}
	at := pacerEpoch
	var first float64
	for i := 0; i < 40; i++ {
		at = at.Add(20 * time.Millisecond)
		p.observe(req, retry.Throttled, response(503), curGen(p, req), at)
		r, engaged := p.Rate("api.example")
		switch {
		case i < coldRefusalsToEngage-1:
			require.False(t, engaged, "%d refusals engage nothing", i+1)
			continue
		case i == coldRefusalsToEngage-1:
			first = r
		}
		require.GreaterOrEqual(t, r, outageShare*first-1e-9, "refusal %d", i+1)
	}
	held, _ := p.Rate("api.example")
	assert.InDelta(t, outageShare*first, held, 1e-9, "the rate is held at a quarter")
	_, res := p.reserve(req, at)
	require.NotNil(t, res)
	p.observe(req, retry.Throttled, response(503), curGen(p, req), at)
	assert.False(t, res.stale(), "held, a refusal voids no turn")

	// The server is back: the rate learned in the outage is forgotten.
	at = at.Add(time.Millisecond)
	p.observe(req, retry.Success, response(200), curGen(p, req), at)
	_, engaged := p.Rate("api.example")
	assert.False(t, engaged)
	assert.True(t, res.stale(), "turns handed out in the outage are void")
	_, _, _, slow := slowState(s)
	assert.True(t, slow, "the key starts afresh, in slow start")
	assert.Zero(t, s.st.meter.measured)
}

// An outage after successes: the rate comes down until the silence is as
// long as an outage's (ten times the usual spacing of successes, and at
// least outageTime), then holds, probing: cut on, it was about 1/s after
// two seconds, and the calls waiting for turns failed on their deadlines
// before a probe found the server back. A success then restarts the key.
func TestPacerOutageAfterSuccesses(t *testing.T) {
	p := &testPacer{}
	req := hostRequest(t, "api.example")
	now := sendAt(p, req, pacerEpoch, 100, 2*time.Second)
	at := now
	var atHold float64
	for i := 0; i < 60; i++ {
		at = at.Add(50 * time.Millisecond)
		p.observe(req, retry.Throttled, response(503), curGen(p, req), at)
		if s := p.state(req); s.st.Mode() == ModeHeld && atHold == 0 {
			atHold = s.st.Rate()
			require.GreaterOrEqual(t, at.Sub(now), outageTime, "held before the silence was an outage's")
		}
	}
	r, engaged := p.Rate("api.example")
	require.True(t, engaged)
	require.NotZero(t, atHold, "never held")
	assert.Less(t, r, 50.0, "the refusals bring the rate down")
	assert.Equal(t, atHold, r, "and once held, no further")
	p.observe(req, retry.Success, response(200), curGen(p, req), at)
	_, engaged = p.Rate("api.example")
	assert.False(t, engaged, "100/s before, silent for 3s: an outage, over")
}

// The turns waiting through an outage are sent as the server returns,
// before the restart's bucket began, and a limiter without a burst
// refuses all but one of them at once. The first cut after the restart
// reads their share accepted of the rate they were answered at, not of
// the one attempt the new bucket sent: of that, it went to a tenth of
// the rate instead of cubicBeta's cut, and redispace's
// TestRestartAgainstALimit failed (too few successes after the outage).
func TestFirstCutAfterARestartReadsTheBacklog(t *testing.T) {
	p := &testPacer{}
	req := hostRequest(t, "api.example")
	at := sendAt(p, req, pacerEpoch, 100, 2*time.Second)
	for p.state(req).st.Mode() != ModeHeld {
		at = at.Add(50 * time.Millisecond)
		require.Less(t, at.Sub(pacerEpoch), time.Minute, "never held")
		p.observe(req, retry.Throttled, response(503), curGen(p, req), at)
	}
	p.observe(req, retry.Success, response(200), curGen(p, req), at)
	require.Equal(t, ModeSlowStart, p.state(req).st.Mode(), "not restarted")
	// One attempt sent in the restart's bucket, and eight of the backlog
	// answered with it, refused.
	at = at.Add(time.Millisecond)
	p.reserve(req, at)
	for !p.state(req).st.Engaged() {
		p.observe(req, retry.Throttled, response(429), curGen(p, req), at)
	}
	// One success over minElapsed is accepted at more than the bucket
	// sent at: the cut is cubicBeta's.
	sent := 1 / minElapsed.Seconds()
	r, _ := p.Rate("api.example")
	assert.GreaterOrEqual(t, r, cubicBeta*sent-1e-9, "the first cut after the restart, from %.0f/s sent", sent)
}

// A limiter that admits its quota at the start of each window is silent
// for the rest of it: at 5 requests/s, a second without a success is no
// outage, and the key keeps what it learned. Ten spacings (2 s) are,
// after refusals that cut twice or more; after a single cut, the silence
// may be the client's own (callers backing off, or done), and is not.
func TestPacerWindowSilenceIsNoOutage(t *testing.T) {
	for _, tt := range []struct {
		silence  time.Duration
		refusals int
		restart  bool
	}{
		{time.Second, refusalsToEngage + 4, false},
		{2500 * time.Millisecond, refusalsToEngage + 4, true},
		{2500 * time.Millisecond, refusalsToEngage + 1, true},
		{2500 * time.Millisecond, refusalsToEngage, false},
	} {
		t.Run(fmt.Sprint(tt.silence, tt.refusals), func(t *testing.T) {
			p := &testPacer{}
			req := hostRequest(t, "api.example")
			last := sendAt(p, req, pacerEpoch, 5, 3*time.Second).Add(-200 * time.Millisecond)
			at := last
			for i := 0; i < tt.refusals; i++ {
				at = at.Add(time.Millisecond)
				p.observe(req, retry.Throttled, response(400), curGen(p, req), at)
			}
			p.observe(req, retry.Success, response(200), curGen(p, req), last.Add(tt.silence))
			_, engaged := p.Rate("api.example")
			assert.Equal(t, !tt.restart, engaged)
		})
	}
}

// Refusals right after a cold start's first successes follow no measured
// rate of successes: a silence after them cannot be told from a window
// limiter's, and restarts nothing.
func TestPacerColdSilenceIsNoOutage(t *testing.T) {
	p := &testPacer{}
	req := hostRequest(t, "api.example")
	for i := 0; i < 10; i++ {
		p.reserve(req, pacerEpoch)
	}
	at := pacerEpoch
	for i := 0; i < 5; i++ { // the window's quota, at once
		at = at.Add(time.Millisecond)
		p.observe(req, retry.Success, response(200), 0, at)
	}
	for i := 0; i < 20; i++ {
		at = at.Add(time.Millisecond)
		p.observe(req, retry.Throttled, response(400), curGen(p, req), at)
	}
	p.observe(req, retry.Success, response(200), curGen(p, req), pacerEpoch.Add(5*time.Second))
	_, engaged := p.Rate("api.example")
	assert.True(t, engaged)
}

// Cuts answered quickly, with successes slower to come (a cold start's
// burst), are not an outage: a success soon after them grows the rate.
func TestPacerQuickCutsAreNoOutage(t *testing.T) {
	p := &testPacer{}
	req := hostRequest(t, "api.example")
	now := sendAt(p, req, pacerEpoch, 100, 2*time.Second)
	at := now
	for i := 0; i < 30; i++ { // enough to hold the rate
		at = at.Add(2 * time.Millisecond)
		p.observe(req, retry.Throttled, response(429), curGen(p, req), at)
	}
	p.observe(req, retry.Success, response(200), curGen(p, req), at.Add(10*time.Millisecond))
	_, engaged := p.Rate("api.example")
	assert.True(t, engaged)
}

// A throttle of an attempt paced at the rate in force voids the turns
// handed out before it: their attempts take new ones at the new rate.
func TestPacerCutVoidsTurns(t *testing.T) {
	p := &testPacer{}
	req := hostRequest(t, "api.example")
	now := sendAt(p, req, pacerEpoch, 10, 2*time.Second)
	engage(t, p, req, response(429), now)
	var turns []*reservation
	for i := 0; i < 5; i++ {
		_, res := p.reserve(req, now)
		turns = append(turns, res)
	}
	later := now.Add(200 * time.Millisecond)
	p.observe(req, retry.Throttled, response(429), turns[0].generation(), later)
	r, _ := p.Rate("api.example")
	step := time.Duration(float64(time.Second) / r)
	for _, res := range turns {
		assert.True(t, res.stale())
	}
	s := p.state(req)
	d, res := s.reserveAt(later)
	assert.False(t, res.stale())
	assert.Equal(t, step, d, "the new schedule starts an interval after the throttle")
}

// Turns queued at a rate the key has since grown well past are void: the
// client would otherwise keep the old rate for as long as its queue lasts.
func TestPacerGrowthVoidsSlowTurns(t *testing.T) {
	p := &testPacer{}
	req := hostRequest(t, "api.example")
	now := sendAt(p, req, pacerEpoch, 10, 2*time.Second)
	engage(t, p, req, response(429), now)
	cut, _ := p.Rate("api.example")
	var queued []*reservation
	for i := 0; i < 50; i++ { // five seconds of turns at about 7/s
		_, res := p.reserve(req, now)
		queued = append(queued, res)
	}
	at := now
	for i := 0; i < 30 && !queued[0].stale(); i++ {
		at = at.Add(100 * time.Millisecond)
		p.reserve(req, at)
		p.observe(req, retry.Success, response(200), curGen(p, req), at)
	}
	assert.True(t, queued[len(queued)-1].stale())
	r, _ := p.Rate("api.example")
	assert.GreaterOrEqual(t, r, regrant*cut)
	d, _ := p.reserve(req, at)
	assert.Less(t, d, time.Second, "a new turn is near, not behind the void queue")
}
