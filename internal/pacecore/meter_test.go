package pacecore

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/backoff-jitter/retry/internal/pacesim"
	"github.com/stretchr/testify/assert"
)

// burstAfter runs a key busy at 50 requests a second for 1000 attempts,
// quiet for gap, then a queue of 1000 attempts at 1000 a second against a
// limit of 100: the rate the Pacer first engaged at in the queue, and how
// long the queue took.
func burstAfter(t *testing.T, adapt Adapt, gap time.Duration) (first float64, took time.Duration) {
	t.Helper()
	p := &testPacer{InitialWindow: -1, Adapt: adapt}
	srv := &pacesim.Server{Rnd: rand.New(rand.NewPCG(1, 2))}
	busy, _, _ := pacesim.Run(t, p.state(hostRequest(t, "api.example")), srv, pacerEpoch, 50, 1000)
	srv.Rate = 100
	start := busy.Add(gap)
	end, _, _ := simRunUntilEngaged(t, p, srv, start, &first)
	return first, end.Sub(start)
}

// simRunUntilEngaged is simRun of the queue, noting in first the rate the
// key first engaged at.
func simRunUntilEngaged(t *testing.T, p *testPacer, srv *pacesim.Server, from time.Time, first *float64) (time.Time, int, int) {
	t.Helper()
	srv.Trace = nil
	srv.OnAnswer = func() {
		if r, on := p.Rate("api.example"); on && *first == 0 {
			*first = r
		}
	}
	defer func() { srv.OnAnswer = nil }()
	return pacesim.Run(t, p.state(hostRequest(t, "api.example")), srv, from, 1000, 1000)
}

// TestQuietSpellIsMeasuredAfresh: a key busy, then quiet, measures the
// burst that ends the quiet as a new key would, instead of folding the
// quiet into its sending rate. Before, AIMD's first cut after 10 s of
// quiet (or 10 minutes) came from about 6 requests a second, where the
// same burst without the gap cut to 35, and the queue took 39 to 40 s
// instead of 22 (CUBIC: 8 against 35, 17 s against 14).
func TestQuietSpellIsMeasuredAfresh(t *testing.T) {
	for _, adapt := range []Adapt{AIMD, Cubic} {
		noGap, noGapTook := burstAfter(t, adapt, 0)
		for _, gap := range []time.Duration{10 * time.Second, 10 * time.Minute} {
			t.Run(fmt.Sprintf("a%d/%v", adapt, gap), func(t *testing.T) {
				first, took := burstAfter(t, adapt, gap)
				assert.GreaterOrEqual(t, first, 0.7*noGap, "first rate engaged after the gap; %.1f without it", noGap)
				assert.LessOrEqual(t, took, noGapTook*11/10, "1000 attempts at a limit of 100/s after the gap; %v without it", noGapTook)
			})
		}
	}
}

// A key's first bucket begins with its first attempt: a cold start's
// attempts sent over the first round trip, counted over what was left of
// it once the first answer came, read as several times the rate they
// were sent at. A fleet's slow start sent 13 attempts in 44 ms (its
// window of 10 at once, 3 more as answers came), was first answered at
// 35 ms, and engaged at 44 ms at 910 a second: 0.7 of 13 over
// minElapsed, against nginx's 100, and half a second of cuts and
// refusals came down from there.
func TestFirstBucketBeginsWithTheFirstAttempt(t *testing.T) {
	const window = 10 // the trace's
	s := New(&Config{MinRate: DefaultMinRate, InitialWindow: window})
	now := pacerEpoch
	for range window {
		fx := s.Step(now, Event{Kind: Admit})
		assert.True(t, fx.Slot)
	}
	// The window's attempts are counted as the next steps carry them in.
	ok := success(0)
	ok.Slot, ok.Sent = true, window
	s.Step(now.Add(35*time.Millisecond), ok)
	for range 3 {
		s.Step(now.Add(36*time.Millisecond), Event{Kind: Admit, Sent: 1})
	}
	at := now.Add(44 * time.Millisecond)
	for i := 0; !s.Engaged(); i++ {
		if i == 10 {
			t.Fatal("not engaged by ten refusals of eleven answers")
		}
		refused := throttle(0)
		refused.Slot = true
		s.Step(at, refused)
	}
	sent := float64(window+3) / at.Sub(now).Seconds()
	assert.LessOrEqual(t, s.Rate(), cubicBeta*sent+1e-9,
		"the first cut, against the %.0f a second the attempts were sent at", sent)
}

// A cold burst whose answers count too few successes to measure an
// accepted rate from is cut to below the share of them accepted, not by
// cubicBeta alone: against a limiter without a burst, cuts of 0.7 from
// the burst's rate took some twenty refusals.
func TestFirstCutStopsBelowTheBurstsAcceptedShare(t *testing.T) {
	const window = 10 // a burst of ten at once
	s := New(&Config{MinRate: DefaultMinRate, InitialWindow: window})
	now := pacerEpoch
	for range window {
		s.Step(now, Event{Kind: Admit})
	}
	// A limiter without a burst: the first answer accepted, the rest
	// refused, too few successes to measure a rate from.
	at := now.Add(time.Millisecond)
	ok := success(0)
	ok.Slot, ok.Sent = true, window
	s.Step(at, ok)
	answered := 1
	for !s.Engaged() {
		if answered == window {
			t.Fatal("not engaged by the burst's refusals")
		}
		refused := throttle(0)
		refused.Slot = true
		s.Step(at, refused)
		answered++
	}
	sent := float64(window) / minElapsed.Seconds()
	share := 1 / float64(answered) // one accepted
	assert.LessOrEqual(t, s.Rate(), acceptedShare*share*sent+1e-9,
		"the first cut, against %.0f a second sent and %.2f of the answers accepted", sent, share)
}
