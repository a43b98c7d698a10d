package pacecore

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/backoff-jitter/retry"
	"github.com/backoff-jitter/retry/internal/pacesim"
	"github.com/stretchr/testify/assert"
)

// On a steady limit, a curve that grows back to the rate of the last
// throttle and probes above it is refused again within seconds, every
// time: against a limit of 5 requests a second, CUBIC alone averaged
// about 4 successes a second and was refused about once a second. Once
// throttles find the same limit again, the rate holds just below it, and
// probes above it less and less often.
func TestPacerHoldsBelowASteadyLimit(t *testing.T) {
	for _, adapt := range []Adapt{Cubic, AIMD} {
		t.Run(fmt.Sprint(adapt), func(t *testing.T) {
			p := &testPacer{Adapt: adapt}
			// A queue of attempts far faster than the limit, which
			// arrive up to 15 ms late (loopback nginx's measured spread).
			srv := &pacesim.Server{Rate: 5, Lag: 15 * time.Millisecond, Rnd: rand.New(rand.NewPCG(6, 7))}
			warm, _, _ := pacesim.Run(t, p.state(hostRequest(t, "api.example")), srv, pacerEpoch, 50, 100)
			const n = 1000 // 200 s at the limit
			end, refused, disengaged := pacesim.Run(t, p.state(hostRequest(t, "api.example")), srv, warm, 50, n)
			assert.Zero(t, disengaged)
			rate := float64(n-refused) / end.Sub(warm).Seconds()
			assert.Greater(t, rate, 0.85*5, "accepted per second; %d of %d refused", refused, n)
			assert.Less(t, refused, n/20, "refused of %d; %.2f accepted per second", n, rate)
		})
	}
}

// learn takes throttles within steadyBand of each other for one limit,
// the lowest of their rates; hold grows with each throttle that finds it
// again; reach is when the curve gets to plateauShare of it.
func TestRateCurveLearn(t *testing.T) {
	var r rateCurve
	r.learn(800, false, true, 0, Cubic) // a cold start's burst, measured
	assert.Equal(t, rateCurve{limit: 800}, r)
	r.learn(5.4, true, true, 0, Cubic)
	assert.Equal(t, 5.4, r.limit)
	assert.Zero(t, r.hold(), "one throttle is no steady limit")
	for i, base := range []float64{5.2, 5.9, 5.3, 5.25, 5.5, 5.1, 5.6, 5.2, 5.3} {
		r.learn(base, true, true, 0, Cubic)
		assert.Equal(t, i+1, r.steady)
	}
	assert.Equal(t, 5.1, r.limit)
	assert.Equal(t, holdMax, r.hold())
	r.steady = 1
	assert.Equal(t, holdBase, r.hold())
	r.steady = 3
	assert.Equal(t, 4*holdBase, r.hold())
	r.learn(2.5, true, true, 0, Cubic) // the limit halved: begin again
	assert.Equal(t, rateCurve{limit: 2.5}, r)
	r.learn(2.6, true, true, 0, Cubic)
	r.learn(3.2, true, true, 0, Cubic) // above the band
	assert.Equal(t, rateCurve{limit: 3.2}, r)

	// A throttle of the probe after a whole hold moves the limit halfway
	// to its rate, up or down; one before the hold ends, to the lower.
	r = rateCurve{limit: 4.6, steady: 2, lastMax: 4.6, cutTo: 3.2, window: math.Cbrt(1.4 / cubicScale)}
	probe := r.reach(Cubic) + r.hold().Seconds() + 0.5
	r.learn(5.2, true, true, probe, Cubic)
	assert.InDelta(t, 4.9, r.limit, 1e-9)
	assert.Equal(t, 3, r.steady)
	r = rateCurve{limit: 4.6, steady: 2, lastMax: 4.6, cutTo: 3.2, window: math.Cbrt(1.4 / cubicScale)}
	r.learn(5.2, true, true, probe-1, Cubic)
	assert.Equal(t, 4.6, r.limit)

	// reach: CUBIC from a cut at 5 to 3.5, curve back in window seconds;
	// AIMD one request per second per second.
	r = rateCurve{limit: 5, steady: 1, lastMax: 5, cutTo: 3.5, window: math.Cbrt(1.5 / cubicScale)}
	at := r.reach(Cubic)
	d := at - r.window
	assert.InDelta(t, plateauShare*5, cubicScale*d*d*d+r.lastMax, 1e-9)
	assert.InDelta(t, plateauShare*5-3.5, r.reach(AIMD), 1e-9)
	r.cutTo = 4.9
	assert.Zero(t, r.reach(Cubic), "a cut that left the rate above the plateau")
}

// A throttle that Refusal says was not for the rate (a conflict, such as
// Route 53's PriorRequestNotComplete) neither engages an idle key nor
// cuts an engaged one's rate; without Refusal, the same throttles do both.
func TestPacerRefusalIgnoresConflicts(t *testing.T) {
	notConflict := func(f retry.Feedback) bool { return f.Response == nil || f.Response.Header.Get("X-Conflict") == "" }
	// run feeds a Pacer successes, conflicts, throttles until it engages
	// (one at least), then conflicts a second apart; it returns whether
	// the first conflicts engaged the key, and the rate after the
	// throttles and after the conflicts.
	run := func(p *testPacer) (engagedByConflict bool, before, after float64) {
		req := hostRequest(t, "api.example")
		at := pacerEpoch
		for i := 0; i < 20; i++ {
			_, res := p.reserve(req, at)
			p.observe(req, retry.Success, response(200), res.generation(), at)
			at = at.Add(10 * time.Millisecond)
		}
		for range refusalsToEngage {
			_, res := p.reserve(req, at)
			p.observe(req, retry.Throttled, response(400, "X-Conflict", "1"), res.generation(), at)
		}
		_, engagedByConflict = p.Rate("api.example")
		for i, on := 0, false; i == 0 || !on && i < 20; i++ {
			at = at.Add(10 * time.Millisecond)
			_, res := p.reserve(req, at)
			p.observe(req, retry.Throttled, response(429), res.generation(), at)
			_, on = p.Rate("api.example")
		}
		before, _ = p.Rate("api.example")
		for i := 0; i < 5; i++ {
			at = at.Add(time.Second)
			d, res := p.reserve(req, at)
			at = at.Add(d)
			p.observe(req, retry.Throttled, response(400, "X-Conflict", "1"), res.generation(), at)
		}
		after, _ = p.Rate("api.example")
		return engagedByConflict, before, after
	}
	engaged, before, after := run(&testPacer{Refusal: notConflict, InitialWindow: -1})
	assert.False(t, engaged, "a conflict engaged the key")
	assert.Less(t, before, 100.0, "the throttle did not engage the key")
	assert.Equal(t, before, after, "conflicts cut the rate")

	engaged, before, after = run(&testPacer{InitialWindow: -1})
	assert.True(t, engaged, "without Refusal, a conflict is a throttle")
	assert.Less(t, after, before, "without Refusal, conflicts cut the rate")
}

// The hold does not keep the Pacer at a limit that moved: after two
// minutes at 5/s, a limit halved (another client came) is followed down,
// and a limit doubled is found by the next probes, within the minute.
func TestPacerFollowsALimitThatMoves(t *testing.T) {
	for _, to := range []float64{2.5, 10} {
		t.Run(fmt.Sprint(to), func(t *testing.T) {
			for seed := uint64(0); seed < 5; seed++ {
				p := &testPacer{}
				srv := &pacesim.Server{Rate: 5, Lag: 15 * time.Millisecond, Rnd: rand.New(rand.NewPCG(seed, 7))}
				warm, _, _ := pacesim.Run(t, p.state(hostRequest(t, "api.example")), srv, pacerEpoch, 50, 600)
				srv.Rate = to
				n := int(to * 60) // a minute's worth at the new limit
				end, refused, _ := pacesim.Run(t, p.state(hostRequest(t, "api.example")), srv, warm, 50, n)
				rate := float64(n-refused) / end.Sub(warm).Seconds()
				assert.Greater(t, rate, 0.75*to, "seed %d: accepted per second; %d of %d refused", seed, refused, n)
				assert.Less(t, refused, n/5, "seed %d: refused; %.2f accepted per second", seed, rate)
			}
		})
	}
}

// The test of shedding takes a share at the low rate for the chain's
// first only when it is below twice what that share may have been. A
// limit halved under AIMD: 4 % refused over 568 outcomes before the
// chain's first cut, 3 of 26 (11.5 %) at the low rate, is a limit's
// (with 0.05 of slack alone it passed for shedding); the same 3 refusals
// against a first share of 1 in 40, measured far less closely, are not.
func TestSheddingTestWeighsTheFirstShare(t *testing.T) {
	state := func(hiK, hiN, loK, loN int) (*State, *shedding) {
		s := &State{}
		s.rate.fill = 3
		setChain(s, shedding{chainRate: 5.2, hiK: hiK, hiN: hiN, loK: loK, loN: loN})
		return s, &s.shed
	}
	s, sh := state(22, 568, 3, 26)
	assert.Equal(t, shedHold, sh.test(s, pacerEpoch), "4 percent before, 3 of 26 after")
	s, sh = state(1, 40, 3, 60)
	assert.Equal(t, shedIndependent, sh.test(s, pacerEpoch), "1 of 40 before, 3 of 60 after")
	s, sh = state(22, 568, 2, 60)
	assert.Equal(t, shedHold, sh.test(s, pacerEpoch), "two refusals are too few to tell")
}
