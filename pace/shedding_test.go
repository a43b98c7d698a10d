package pace

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"testing"
	"time"

	"github.com/backoff-jitter/retry"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// simServer is a server on the fake clock: a token bucket of rate
// requests a second (0: no limit) with a burst of one, which also refuses
// a share shed of the requests at random, whatever the load. An attempt
// sent at a time arrives up to lag later, at random, and never before the
// one sent before it: the network's and the server's own timing.
type simServer struct {
	rate   float64
	shed   float64
	lag    time.Duration
	tokens float64
	last   time.Time
	rnd    *rand.Rand
}

func (s *simServer) answer(at time.Time) retry.Class {
	if s.rnd.Float64() < s.shed {
		return retry.Throttled
	}
	if s.rate == 0 {
		return retry.Success
	}
	if s.lag > 0 {
		at = at.Add(time.Duration(s.rnd.Float64() * float64(s.lag)))
		if at.Before(s.last) {
			at = s.last
		}
	}
	if !s.last.IsZero() {
		s.tokens = min(1, s.tokens+at.Sub(s.last).Seconds()*s.rate)
	}
	s.last = at
	if s.tokens < 1 {
		return retry.Throttled
	}
	s.tokens--
	return retry.Success
}

// simRun sends n attempts through p to srv, at demand attempts a second
// or as the Pacer allows, one after another from from (a queue served
// first come, first served), and returns when the last was sent, the
// attempts refused, and how many times the key went from engaged to idle.
func simRun(t *testing.T, p *Pacer, srv *simServer, from time.Time, demand float64, n int) (end time.Time, refused, disengaged int) {
	t.Helper()
	req := hostRequest(t, "api.example")
	at := from
	wasEngaged := false
	for i := 0; i < n; i++ {
		if due := from.Add(time.Duration(float64(i) / demand * float64(time.Second))); due.After(at) {
			at = due
		}
		d, res := p.reserve(req, at)
		at = at.Add(d)
		class, code := srv.answer(at), http.StatusOK
		if class == retry.Throttled {
			refused++
			code = http.StatusTooManyRequests
		}
		p.observe(req, class, response(code), res.generation(), at)
		_, engaged := p.Rate("api.example")
		if wasEngaged && !engaged {
			disengaged++
		}
		wasEngaged = engaged
	}
	return at, refused, disengaged
}

// A server refusing a share of requests at random, whatever their rate,
// is no rate limit: the Pacer's cuts would not lower the share, and
// before, each cut was floored at a share of an accepted rate that fell
// with the rate, so the rate ratcheted down until the queue of turns
// outlasted every deadline. The key now goes back to idle, and stays
// there, and the attempts take about as long as without a Pacer.
func TestPacerRandomSheddingIsNoLimit(t *testing.T) {
	for _, adapt := range []Adapt{AdaptCubic, AdaptAIMD} {
		for _, shed := range []float64{0.05, 0.1, 0.25} {
			t.Run(fmt.Sprintf("%d/%v", adapt, shed), func(t *testing.T) {
				p := &Pacer{Adapt: adapt, InitialWindow: -1}
				srv := &simServer{shed: shed, rnd: rand.New(rand.NewPCG(1, uint64(shed*100)))}
				const n, demand = 6000, 1000.0 // 6 s without a Pacer
				end, refused, disengaged := simRun(t, p, srv, pacerEpoch, demand, n)
				_, engaged := p.Rate("api.example")
				assert.False(t, engaged, "engaged at the end")
				assert.GreaterOrEqual(t, disengaged, 1)
				took := end.Sub(pacerEpoch)
				assert.Less(t, took, 7*time.Second, "6 s of attempts, paced; %d refused, went idle %d times", refused, disengaged)
				assert.InDelta(t, shed, float64(refused)/n, 0.03)
			})
		}
	}
}

// A rate limit's refusals fall as the rate falls: the Pacer stays
// engaged, near the limit, and the test of shedding never takes it for
// one, with or without some random refusals besides.
func TestPacerRateLimitIsNoShedding(t *testing.T) {
	for _, adapt := range []Adapt{AdaptCubic, AdaptAIMD} {
		t.Run(fmt.Sprint(adapt), func(t *testing.T) {
			p := &Pacer{Adapt: adapt, InitialWindow: -1}
			srv := &simServer{rate: 100, rnd: rand.New(rand.NewPCG(2, 3))}
			_, refused, disengaged := simRun(t, p, srv, pacerEpoch, 1000, 3000)
			r, engaged := p.Rate("api.example")
			require.True(t, engaged)
			assert.Zero(t, disengaged)
			assert.InDelta(t, 100, r, 40)
			assert.Less(t, refused, 300, "of 3000 attempts")
		})
	}
}

// Found to shed at random, a key engages again once the share refused
// rises well above what it sheds: a rate limit begins. Over 20 seeds
// (one run's luck decides how soon), every key engages, and nearly every
// run gets its 1000 attempts through in under 20 s with fewer than 300
// refused.
func TestPacerEngagesAgainAfterShedding(t *testing.T) {
	slow := 0
	for seed := uint64(0); seed < 20; seed++ {
		p := &Pacer{InitialWindow: -1}
		srv := &simServer{shed: 0.1, rnd: rand.New(rand.NewPCG(seed, 5))}
		end, _, disengaged := simRun(t, p, srv, pacerEpoch, 1000, 3000)
		require.GreaterOrEqual(t, disengaged, 1, "seed %d", seed)
		srv.rate = 100
		start := end
		end, refused, _ := simRun(t, p, srv, end, 1000, 1000)
		r, engaged := p.Rate("api.example")
		assert.True(t, engaged, "seed %d: a limit of 100/s under a demand of 1000/s", seed)
		assert.Less(t, r, 200.0, "seed %d", seed)
		// 1000 attempts at 100/s at best, 90 of them accepted: 10 s; an
		// unpaced client would be refused most of them.
		if took := end.Sub(start); took >= 20*time.Second || refused >= 300 {
			t.Logf("seed %d: %v, %d refused", seed, took, refused)
			slow++
		}
	}
	assert.LessOrEqual(t, slow, 2, "runs of 20 that took 20 s or more, or had 300 refused or more")
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
			p := &Pacer{InitialWindow: -1}
			srv := &simServer{shed: shed, rnd: rand.New(rand.NewPCG(seed, uint64(shed*100)))}
			end, refused, disengaged := simRun(t, p, srv, pacerEpoch, 1000, 6000)
			assert.Less(t, end.Sub(pacerEpoch), 20*time.Second, "shed %v seed %d: %d refused, went idle %d times", shed, seed, refused, disengaged)
		}
	}
}
