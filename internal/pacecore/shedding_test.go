package pacecore

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/backoff-jitter/retry"
	"github.com/backoff-jitter/retry/internal/pacesim"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A server refusing a share of requests at random, whatever their rate,
// is no rate limit: the Pacer's cuts would not lower the share, and
// before, each cut was floored at a share of an accepted rate that fell
// with the rate, so the rate ratcheted down until the queue of turns
// outlasted every deadline. A share below a quarter now engages nothing
// (see State.suspect); a key that a higher one engages goes back to
// idle, and stays there; the attempts take about as long as without a
// Pacer.
func TestPacerRandomSheddingIsNoLimit(t *testing.T) {
	for _, adapt := range []Adapt{Cubic, AIMD} {
		for _, shed := range []float64{0.05, 0.1, 0.25} {
			t.Run(fmt.Sprintf("%d/%v", adapt, shed), func(t *testing.T) {
				p := &testPacer{Adapt: adapt, InitialWindow: -1}
				srv := &pacesim.Server{Shed: shed, Rnd: rand.New(rand.NewPCG(1, uint64(shed*100)))}
				const n, demand = 6000, 1000.0 // 6 s without a Pacer
				end, refused, disengaged := pacesim.Run(t, p.state(hostRequest(t, "api.example")), srv, pacerEpoch, demand, n)
				_, engaged := p.Rate("api.example")
				assert.False(t, engaged, "engaged at the end")
				if shed < engageLow {
					// Too few refused to engage the key at all (see
					// State.suspect).
					assert.Zero(t, disengaged, "went idle: engaged")
				}
				took := end.Sub(pacerEpoch)
				assert.Less(t, took, 7*time.Second, "6 s of attempts, paced; %d refused, went idle %d times", refused, disengaged)
				assert.InDelta(t, shed, float64(refused)/n, 0.03)
			})
		}
	}
}

// Shedding at random costs the clients little time: 40 clients, each
// retrying a refused attempt after a backoff with full jitter, take a
// median time within 5 % of what they take without a Pacer, up to a
// quarter shed. (At a quarter, about half the runs engage the key,
// and the test of shedding sends it idle again.)
func TestPacerRandomSheddingCostsLittleTime(t *testing.T) {
	for _, shed := range []float64{0.05, 0.1, 0.25} {
		none := shedClients(t, nil, shed, 100)
		for _, adapt := range []Adapt{Cubic, AIMD} {
			ends := shedClients(t, &adapt, shed, 100)
			assert.LessOrEqual(t, median(ends)/median(none), 1.05, "shed %v, a%d: median %v against no Pacer's %v",
				shed, adapt, time.Duration(median(ends)), time.Duration(median(none)))
		}
	}
}

// A rate limit's refusals fall as the rate falls: the Pacer stays
// engaged, near the limit, and the test of shedding never takes it for
// one, with or without some random refusals besides.
func TestPacerRateLimitIsNoShedding(t *testing.T) {
	for _, adapt := range []Adapt{Cubic, AIMD} {
		t.Run(fmt.Sprint(adapt), func(t *testing.T) {
			p := &testPacer{Adapt: adapt, InitialWindow: -1}
			srv := &pacesim.Server{Rate: 100, Rnd: rand.New(rand.NewPCG(2, 3))}
			_, refused, disengaged := pacesim.Run(t, p.state(hostRequest(t, "api.example")), srv, pacerEpoch, 1000, 3000)
			r, engaged := p.Rate("api.example")
			require.True(t, engaged)
			assert.Zero(t, disengaged)
			assert.InDelta(t, 100, r, 40)
			assert.Less(t, refused, 300, "of 3000 attempts")
		})
	}
}

// A limit that begins after refusals at random engages the key: after a
// tenth shed, which engaged nothing but left the key the share it lived
// with (see shedding.idleBucket); after 30 %, which engaged the key and
// sent it idle with the share the test found; either way once the share
// refused rises well above it. Over 20 seeds (one run's luck decides how
// soon), nearly every run gets its 1000 attempts through in under 20 s
// with fewer than 300 refused (600 after 30 %, where the Pacer cuts only
// on refusals well above the share found; unpaced, most of the 1000 are
// refused), and ends engaged. AIMD's halvings make more runs slow, 5 of
// 20 here; without the share taken from the idle key, 19 of 20.
func TestPacerEngagesAgainAfterShedding(t *testing.T) {
	for _, tt := range []struct {
		adapt    Adapt
		shed     float64
		slowRuns int
	}{{Cubic, 0.1, 2}, {AIMD, 0.1, 8}, {Cubic, 0.3, 2}} {
		adapt, shed := tt.adapt, tt.shed
		t.Run(fmt.Sprint(adapt, "/", shed), func(t *testing.T) {
			slow, most := 0, 300
			if shed >= engageLow {
				most = 600
			}
			for seed := uint64(0); seed < 20; seed++ {
				p := &testPacer{InitialWindow: -1, Adapt: adapt}
				srv := &pacesim.Server{Shed: shed, Rnd: rand.New(rand.NewPCG(seed, 5))}
				end, _, disengaged := pacesim.Run(t, p.state(hostRequest(t, "api.example")), srv, pacerEpoch, 1000, 3000)
				if shed < engageLow {
					_, engaged := p.Rate("api.example")
					require.False(t, engaged, "seed %d", seed)
					require.Zero(t, disengaged, "seed %d: engaged", seed)
				} else {
					require.GreaterOrEqual(t, disengaged, 1, "seed %d", seed)
				}
				// The limit comes with a tenth shed.
				srv.Shed, srv.Rate = 0.1, 100
				start := end
				end, refused, _ := pacesim.Run(t, p.state(hostRequest(t, "api.example")), srv, end, 1000, 1000)
				// A limit of 100/s under a demand of 1000/s: engaged at the
				// end (a limit with a tenth shed besides may pass the test
				// of shedding paced below it, and go idle for a while).
				r, engaged := p.Rate("api.example")
				if engaged {
					assert.Less(t, r, 200.0, "seed %d", seed)
				}
				// 1000 attempts at 100/s at best, 90 of them accepted: 10 s.
				if took := end.Sub(start); took >= 20*time.Second || refused >= most || !engaged {
					t.Logf("seed %d: %v, %d refused, engaged %v", seed, took, refused, engaged)
					slow++
				}
			}
			assert.LessOrEqual(t, slow, tt.slowRuns, "runs of 20 that took 20 s or more, had %d refused or more, or ended idle", most)
		})
	}
}

// Without slow start, the first throttle can come at the very first
// attempts and engage the key far below the demand, and the test of
// shedding then runs at that low rate. A run could take minutes: after
// the key went idle, the refusals that had shown the shedding still
// counted in the current buckets, so the first few throttles of the
// queue let loose engaged it again, at a low rate. Over 20 seeds of each
// share, every run of 6000 attempts now ends within 20 s (6 s unpaced).
func TestPacerSheddingWithoutSlowStartTail(t *testing.T) {
	for _, shed := range []float64{0.05, 0.1, 0.25} {
		for seed := uint64(0); seed < 20; seed++ {
			p := &testPacer{InitialWindow: -1}
			srv := &pacesim.Server{Shed: shed, Rnd: rand.New(rand.NewPCG(seed, uint64(shed*100)))}
			end, refused, disengaged := pacesim.Run(t, p.state(hostRequest(t, "api.example")), srv, pacerEpoch, 1000, 6000)
			assert.Less(t, end.Sub(pacerEpoch), 20*time.Second, "shed %v seed %d: %d refused, went idle %d times", shed, seed, refused, disengaged)
		}
	}
}

// A throttle engages a key only on evidence (see State.suspect): one
// refusal among the first answers can be a load balancer's at random,
// and engaging on it took the rate of a millisecond's attempts for the
// server's. Three refusals in a row among a new key's first answers
// engage it, a half refused after eight answers within a score more, and
// the first refusal after a restart.
func TestPacerFirstRefusalNeedsEvidence(t *testing.T) {
	t.Run("one of the first answers", func(t *testing.T) {
		p := &testPacer{}
		req := hostRequest(t, "api.example")
		for i := 0; i < 3; i++ {
			p.reserve(req, pacerEpoch)
		}
		p.observe(req, retry.Throttled, response(429), 0, pacerEpoch)
		p.observe(req, retry.Success, response(200), 0, pacerEpoch)
		p.observe(req, retry.Throttled, response(429), 0, pacerEpoch)
		_, engaged := p.Rate("api.example")
		assert.False(t, engaged, "two refusals of three answers: a quarter shed at random begins so one time in ten")
	})
	t.Run("three in a row, the first answers", func(t *testing.T) {
		p := &testPacer{}
		req := hostRequest(t, "api.example")
		for i := 0; i < 10; i++ {
			p.reserve(req, pacerEpoch)
		}
		for i := range coldRefusalsToEngage {
			_, engaged := p.Rate("api.example")
			require.False(t, engaged, "%d refusals", i)
			p.observe(req, retry.Throttled, response(429), 0, pacerEpoch)
		}
		_, engaged := p.Rate("api.example")
		assert.True(t, engaged)
	})
	t.Run("after eight answers", func(t *testing.T) {
		p := &testPacer{}
		req := hostRequest(t, "api.example")
		for i := 0; i < 7; i++ {
			p.reserve(req, pacerEpoch)
			p.observe(req, retry.Success, response(200), 0, pacerEpoch)
		}
		p.reserve(req, pacerEpoch)
		p.observe(req, retry.Throttled, response(429), 0, pacerEpoch)
		_, engaged := p.Rate("api.example")
		assert.False(t, engaged, "one refusal, the eighth answer")
		// Successes weigh against the refusals: a share of a half takes
		// a score of answers or so.
		n := 1
		for ; n < 100 && !engaged; n++ {
			class, code := retry.Success, 200
			if n%2 == 0 {
				class, code = retry.Throttled, 429
			}
			p.reserve(req, pacerEpoch)
			p.observe(req, class, response(code), 0, pacerEpoch)
			_, engaged = p.Rate("api.example")
		}
		assert.True(t, engaged)
		assert.InDelta(t, 24, n, 8, "answers refused half the time before the key engaged")
	})
	t.Run("after a restart", func(t *testing.T) {
		// A key back from an outage has been throttled before: its first
		// refusal after the restart is its limit's (a storm's backlog
		// meeting the server as it returns, after the successes of the
		// server's burst), and engages it.
		p := &testPacer{}
		req := hostRequest(t, "api.example")
		s := p.state(req)
		for i := 0; i < 20; i++ {
			p.reserve(req, pacerEpoch)
			p.observe(req, retry.Success, response(200), 0, pacerEpoch)
		}
		s.change(func(s *State) { s.restart(pacerEpoch, 10) })
		for i := 0; i < 20; i++ { // the server's burst, accepted
			p.reserve(req, pacerEpoch)
			p.observe(req, retry.Success, response(200), 0, pacerEpoch)
		}
		p.observe(req, retry.Throttled, response(429), 0, pacerEpoch)
		_, engaged := p.Rate("api.example")
		assert.True(t, engaged)
	})
}

// A fast client's first throttle, with few of its answers refused and
// the server answering about as fast as it sends, is measured over the
// millisecond it came in, not over ten (which made 25 attempts in 2 ms
// a rate of 2,500/s instead of 12,500/s), and cut to just below the
// share accepted, not floored at the rate of the successes counted so
// far (the answers still in flight missing from it).
func TestPacerModerateFirstCut(t *testing.T) {
	req := hostRequest(t, "api.example")
	// 60 sent at once, 40 answered over 2 ms, then seven throttles at
	// 2 ms (a limit reached: see suspect), 7 of 47 answers.
	firstCut := func(p *testPacer) (float64, bool) {
		at := pacerEpoch
		for i := 0; i < 60; i++ {
			p.reserve(req, pacerEpoch)
		}
		for i := 0; i < 40; i++ {
			p.observe(req, retry.Success, response(200), 0, at)
			at = at.Add(50 * time.Microsecond)
		}
		for range refusalsToEngage {
			p.observe(req, retry.Throttled, response(429), 0, pacerEpoch.Add(2*time.Millisecond))
		}
		return p.Rate("api.example")
	}
	p := &testPacer{}
	r, engaged := firstCut(p)
	require.True(t, engaged)
	base := 60 / 0.002 // 60 sent in the 2 ms since the first answer
	share := float64(refusalsToEngage) / float64(40+refusalsToEngage)
	assert.InDelta(t, acceptedShare*(1-share)*base, r, 1e-6)
	s := p.state(req)
	assert.InDelta(t, r, s.st.shed.low(), 1e-6, "the cut is the test's low rate")
	// Clamped to MinRate, the cut is the low rate as clamped: below it,
	// no rate in force would ever be low enough to test.
	p = &testPacer{MinRate: 26000}
	r, engaged = firstCut(p)
	require.True(t, engaged)
	assert.Equal(t, 26000.0, r)
	assert.Equal(t, r, p.state(req).st.shed.low(), "the low rate, at MinRate")
	// A burst answered far slower than it was sent is cut to the rate
	// accepted, as before: TestPacerColdStartCutsToAcceptedRate.
}

// The answers of attempts sent before a chain's first cut that come in
// after it (a burst's, mostly) are outcomes at the chain's rate: the
// share they show is the one the test weighs the low rate's against.
func TestSheddingCountsTheBurst(t *testing.T) {
	p := &testPacer{}
	req := hostRequest(t, "api.example")
	for i := 0; i < 40; i++ {
		p.reserve(req, pacerEpoch)
	}
	for i := 0; i < 10; i++ { // over a quarter answered, with the throttles
		p.observe(req, retry.Success, response(200), 0, pacerEpoch)
	}
	engage(t, p, req, response(429), pacerEpoch.Add(time.Millisecond))
	s := p.state(req)
	require.True(t, s.st.Engaged())
	hiN, hiK := s.st.shed.hiN, s.st.shed.hiK
	for i := 0; i < 20; i++ {
		class, code := retry.Success, 200
		if i%5 == 0 {
			class, code = retry.Throttled, 429
		}
		p.observe(req, class, response(code), 0, pacerEpoch.Add(time.Millisecond))
	}
	assert.Equal(t, hiN+20, s.st.shed.hiN)
	assert.Equal(t, hiK+4, s.st.shed.hiK)
	assert.Zero(t, s.st.shed.loN, "none was paced")
}

// Throttles of attempts paced before the key went idle, found to shed at
// random, are weighed against the share it sheds like any other: before,
// the first of them engaged the key again at once.
func TestPacerNoiseAfterSheddingIsNoThrottle(t *testing.T) {
	p := &testPacer{InitialWindow: -1}
	srv := &pacesim.Server{Shed: 0.3, Rnd: rand.New(rand.NewPCG(7, 10))}
	req := hostRequest(t, "api.example")
	at := pacerEpoch
	var gen uint64
	for i := 0; i < 6000 && gen == 0; i++ {
		d, res := p.reserve(req, at)
		at = at.Add(d + time.Millisecond)
		class, code := srv.Answer(at), http.StatusOK
		if class == retry.Throttled {
			code = http.StatusTooManyRequests
		}
		before := curGen(p, req)
		p.observe(req, class, response(code), res.generation(), at)
		if _, engaged := p.Rate("api.example"); !engaged && res.generation() != 0 {
			gen = before // went idle: the attempts still in flight were paced at gen
		}
	}
	require.NotZero(t, gen, "the key never went idle")
	for i := 0; i < 10; i++ {
		p.observe(req, retry.Success, response(200), 0, at)
	}
	p.observe(req, retry.Throttled, response(429), gen, at)
	_, engaged := p.Rate("api.example")
	assert.False(t, engaged, "a throttle within the share shed, paced before")
}

// hiLower: a first share measured high by chance, 3 of 13 where 10 % are
// shed, against 14 of 155 at the low rate, is the same share; with half
// of 3/13 as the bound, the test held, undecided, for as long as the
// outcomes came.
func TestSheddingTestWeighsALowFirstShare(t *testing.T) {
	s := &State{}
	s.rate.fill = 3
	setChain(s, shedding{chainRate: 5.2, hiK: 3, hiN: 13, loK: 14, loN: 155})
	assert.Equal(t, shedIndependent, s.shed.test(s, pacerEpoch))
	// A limit's share falls to nothing: 1 of 155 is not shedding.
	setChain(s, shedding{chainRate: 5.2, hiK: 3, hiN: 13, loK: 1, loN: 155})
	assert.NotEqual(t, shedIndependent, s.shed.test(s, pacerEpoch))
}

// A chain begun again after one whose first share was a limit's weighs
// its own first share over 16 outcomes, not 8: against a window limiter
// of 5 a second, 3 refusals of 8 at 12.5/s (where it refused 60 %)
// passed for a moderate share, 3 of 8 at 8.7/s for the same one, and the
// key went idle under a limit (the Route 53 example's test, now and
// then). Each cut until then begins it again, at the cut.
func TestSheddingAfterALimitWeighsMore(t *testing.T) {
	s := &State{}
	s.rate.fill = 12.5
	setChain(s, shedding{chainRate: 36.3, hiK: 8, hiN: 8, loK: 3, loN: 8})
	s.shed.cut(s, 12.5, pacerEpoch) // the first share was a limit's: begin again from the low outcomes
	require.True(t, s.shed.limit)
	require.Equal(t, 3, s.shed.hiK)
	require.Equal(t, 8, s.shed.hiN)
	s.rate.fill = 8.7
	s.shed.loN, s.shed.loK = 8, 3
	assert.Equal(t, shedCut, s.shed.test(s, pacerEpoch), "8 outcomes after a limit's")
	s.shed.cut(s, 8.7, pacerEpoch)
	assert.Equal(t, 16, s.shed.hiN, "the outcomes since weigh the first share")
	assert.True(t, s.shed.limit)
	// Begun again at the cut, so that its low rate follows the cuts
	// down: kept at 12.5, the test would weigh a rate far below its low
	// rate, at the limit, against a share of every rate on the way.
	assert.Equal(t, 8.7, s.shed.chainRate, "at the cut's rate")
	setChain(s, shedding{chainRate: 12.5, hiK: 3, hiN: 8, loK: 3, loN: 8})
	assert.Equal(t, shedIndependent, s.shed.test(s, pacerEpoch), "a chain begun from idle weighs 8")
	// Begun again from fewer than 8 outcomes since the last cut, and so
	// again at the next cut: still after a limit's.
	setChain(s, shedding{chainRate: 36.3, hiK: 16, hiN: 16, epN: 3, epK: 2})
	s.shed.cut(s, 12.5, pacerEpoch)
	require.True(t, s.shed.limit)
	require.Equal(t, 3, s.shed.hiN)
	s.shed.loN, s.shed.loK = 2, 1
	s.shed.cut(s, 8.7, pacerEpoch)
	assert.True(t, s.shed.limit, "begun again with too few outcomes, after a limit's")
	assert.Equal(t, 5, s.shed.hiN)
	assert.Equal(t, 16, s.shed.need())
}

// A throttle among the first answers of a burst, most of it unanswered,
// engages nothing while the share refused is low: it cannot be read yet,
// and read as a burst's (the share unknown), the cut measured the rate
// over 10 ms, a tenth of it. A burst's refusals, over 0.4 of the
// answers, engage the key at once.
func TestPacerEarlyThrottleWaitsForAShare(t *testing.T) {
	p := &testPacer{}
	req := hostRequest(t, "api.example")
	for range 100 {
		p.reserve(req, pacerEpoch) // answered a millisecond later, all at once
	}
	at := pacerEpoch.Add(time.Millisecond)
	for range 15 {
		p.observe(req, retry.Success, response(200), 0, at)
	}
	for range refusalsToEngage {
		p.observe(req, retry.Throttled, response(429), 0, at)
	}
	_, engaged := p.Rate("api.example")
	require.False(t, engaged, "7 refusals of 22 answers, 78 to come")
	for !engaged {
		p.observe(req, retry.Success, response(200), 0, at)
		p.observe(req, retry.Throttled, response(429), 0, at)
		_, engaged = p.Rate("api.example")
	}
	r, _ := p.Rate("api.example")
	s := p.state(req)
	share, read := s.st.meter.answeredShare()
	require.True(t, read, "a quarter answered")
	// A third refused: a moderate first cut (0.9 times the share
	// accepted, over 50,000/s), from 100 sent over a millisecond, not
	// over 10 ms (10,000/s, cut to 7000).
	assert.LessOrEqual(t, share, shedMaxShare)
	assert.Greater(t, r, 50000.0)

	burst := &testPacer{}
	for range 40 {
		burst.reserve(req, pacerEpoch)
	}
	burst.observe(req, retry.Success, response(200), 0, at)
	for range refusalsToEngage {
		burst.observe(req, retry.Throttled, response(429), 0, at)
	}
	_, engaged = burst.Rate("api.example")
	assert.True(t, engaged, "7 of 8 refused: a burst's")
}

// Forty clients shed 5 % at random, every attempt answered a millisecond
// after it was sent, so that a cold start's forty answers come at once:
// with a Pacer, the runs' 90th percentile is within half again of
// theirs without one. Before tooEarly, a tenth of the runs engaged on a
// refusal among the first answers, read as a burst's, and took 180 to
// 420 ms where 20 do without a Pacer.
func TestPacerSheddingBurstAnsweredAtOnce(t *testing.T) {
	for _, shed := range []float64{0.05, 0.1} {
		var with, without []time.Duration
		for seed := uint64(0); seed < 100; seed++ {
			for _, paced := range []bool{true, false} {
				p := &testPacer{InitialWindow: -1}
				if !paced {
					p.Refusal = func(retry.Feedback) bool { return false } // no throttle teaches it
				}
				srv := &pacesim.Server{Shed: shed, Rnd: rand.New(rand.NewPCG(seed, 78))}
				end, _ := pacesim.Clients(t, p.state(hostRequest(t, "api.example")), srv, 40, 600, time.Millisecond, rand.New(rand.NewPCG(seed, 79)))
				if paced {
					with = append(with, end.Sub(pacerEpoch))
				} else {
					without = append(without, end.Sub(pacerEpoch))
				}
			}
		}
		slices.Sort(with)
		slices.Sort(without)
		assert.Less(t, with[90], without[90]*3/2, "shed %v: p90 %v against %v without a Pacer", shed, with[90], without[90])
	}
}

// A share just over shedMaxShare refused at random does not ratchet the
// rate down to MinRate. At 40 % shed, every chain's share of all its
// outcomes was a little over 0.4 about half the time, so the test ended
// undecided after shedMaxRefusals refusals and cut, and the next chain
// began lower. These seeds took 2.5 to 41 minutes for what takes 6 s
// without a Pacer (a queue at 1000/s came down to 1.5/s); below a
// quarter of the rate the key engaged from, a share up to collapseShare
// may be found independent now (see shedding.maxShare).
func TestPacerFortyPercentSheddingDoesNotCollapse(t *testing.T) {
	for _, tc := range []struct {
		adapt Adapt
		seed  uint64
	}{{Cubic, 201}, {Cubic, 239}, {AIMD, 97}, {AIMD, 201}, {AIMD, 239}} {
		p := &testPacer{InitialWindow: -1, Adapt: tc.adapt}
		srv := &pacesim.Server{Shed: 0.4, Rnd: rand.New(rand.NewPCG(tc.seed, 77))}
		end, _, _ := pacesim.Run(t, p.state(hostRequest(t, "api.example")), srv, pacerEpoch, 1000, 6000)
		assert.Less(t, end.Sub(pacerEpoch), 10*time.Second, "a%d, seed %d: 6 s of attempts shed 40 %% at random", tc.adapt, tc.seed)
	}
}
