package pacesim

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

// Scenarios returns the golden scenarios: those of the core's tests
// (its simulation report and the unit simulations), on fewer seeds.
func Scenarios() []Scenario {
	var all []Scenario
	add := func(name string, run func(t testing.TB, newKey func(Setup) Key, tr *Trace)) {
		all = append(all, Scenario{name, run})
	}
	ms := time.Millisecond
	const seeds = 6
	for adapt, aimd := range []bool{false, true} {
		// TestSimReport's queue, TestPacerRandomSheddingIsNoLimit,
		// TestPacerSheddingWithoutSlowStartTail, and 40 % shedding.
		for _, shed := range []float64{0.05, 0.1, 0.25, 0.4} {
			for seed := range uint64(seeds) {
				add(fmt.Sprintf("queue/a%d/shed%.2f/seed%d", adapt, shed, seed), func(t testing.TB, newKey func(Setup) Key, tr *Trace) {
					k := newKey(Setup{InitialWindow: -1, AIMD: aimd})
					srv := &Server{Shed: shed, Rnd: rand.New(rand.NewPCG(seed, 77)), Trace: tr}
					Run(t, k, srv, Epoch, 1000, 6000)
				})
			}
		}
		// TestSimReport's 40 clients, and TestPacerSheddingBurstAnsweredAtOnce.
		for _, shed := range []float64{0.05, 0.1, 0.25, 0.4} {
			for seed := range uint64(seeds) {
				add(fmt.Sprintf("clients40/a%d/shed%.2f/seed%d", adapt, shed, seed), func(t testing.TB, newKey func(Setup) Key, tr *Trace) {
					k := newKey(Setup{InitialWindow: -1, AIMD: aimd})
					srv := &Server{Shed: shed, Rnd: rand.New(rand.NewPCG(seed, 78)), Trace: tr}
					Clients(t, k, srv, 40, 600, ms, rand.New(rand.NewPCG(seed, 79)))
				})
			}
		}
		// TestReportRandomThrottles: refusals answered first, some asking
		// for a wait.
		for seed := range uint64(3) {
			add(fmt.Sprintf("throttled/a%d/seed%d", adapt, seed), func(t testing.TB, newKey func(Setup) Key, tr *Trace) {
				k := newKey(Setup{InitialWindow: -1, AIMD: aimd})
				srv := &Server{Shed: 0.25, Hinted: 0.6, Hint: 20 * ms, QuickRefusals: true, Rnd: rand.New(rand.NewPCG(seed, 90)), Trace: tr}
				Clients(t, k, srv, 200, 2000, ms, rand.New(rand.NewPCG(seed, 91)))
			})
		}
		// TestSimReport's limits, TestPacerBurstLimitIsNoShedding and
		// TestPacerColdStartAgainstABurst.
		for _, l := range []struct {
			rate, burst, shed float64
			clients, n        int
			rtts              []time.Duration
		}{
			{100, 0, 0, 20, 600, []time.Duration{ms, 5 * ms, 20 * ms}},
			{100, 10, 0, 20, 600, []time.Duration{ms, 5 * ms, 20 * ms}},
			{100, 20, 0, 10, 300, []time.Duration{ms, 5 * ms, 20 * ms}},
			{100, 100, 0, 20, 600, []time.Duration{ms, 5 * ms, 20 * ms}},
			{100, 10, 0.1, 20, 600, []time.Duration{ms, 5 * ms, 20 * ms}},
			{5, 5, 0, 10, 200, []time.Duration{20 * ms, 50 * ms}},
			{5, 0, 0, 10, 200, []time.Duration{20 * ms, 50 * ms}},
		} {
			for seed := range uint64(seeds) {
				add(fmt.Sprintf("limit/a%d/%v+%v/shed%v/c%d/seed%d", adapt, l.rate, l.burst, l.shed, l.clients, seed), func(t testing.TB, newKey func(Setup) Key, tr *Trace) {
					k := newKey(Setup{InitialWindow: -1, AIMD: aimd})
					rtt := l.rtts[int(seed)%len(l.rtts)]
					srv := &Server{Rate: l.rate, Burst: l.burst, Shed: l.shed, Lag: rtt / 2, Rnd: rand.New(rand.NewPCG(seed, 80)), Trace: tr}
					Clients(t, k, srv, l.clients, l.n, rtt, rand.New(rand.NewPCG(seed, 81)))
				})
			}
		}
		// TestSimReport's limit after shedding, and
		// TestPacerEngagesAgainAfterShedding.
		for _, shed := range []float64{0.1, 0.3} {
			for seed := range uint64(seeds) {
				add(fmt.Sprintf("after-shedding/a%d/shed%v/seed%d", adapt, shed, seed), func(t testing.TB, newKey func(Setup) Key, tr *Trace) {
					k := newKey(Setup{InitialWindow: -1, AIMD: aimd})
					srv := &Server{Shed: shed, Rnd: rand.New(rand.NewPCG(seed, 5)), Trace: tr}
					end, _, _ := Run(t, k, srv, Epoch, 1000, 3000)
					srv.Shed, srv.Rate = 0.1, 100
					Run(t, k, srv, end, 1000, 1000)
				})
			}
		}
		// TestPacerRateLimitIsNoShedding.
		add(fmt.Sprintf("limit-queue/a%d", adapt), func(t testing.TB, newKey func(Setup) Key, tr *Trace) {
			k := newKey(Setup{InitialWindow: -1, AIMD: aimd})
			srv := &Server{Rate: 100, Rnd: rand.New(rand.NewPCG(2, 3)), Trace: tr}
			Run(t, k, srv, Epoch, 1000, 3000)
		})
		// TestPacerHoldsBelowASteadyLimit, with slow start's state.
		add(fmt.Sprintf("steady/a%d", adapt), func(t testing.TB, newKey func(Setup) Key, tr *Trace) {
			k := newKey(Setup{AIMD: aimd})
			srv := &Server{Rate: 5, Lag: 15 * ms, Rnd: rand.New(rand.NewPCG(6, 7)), Trace: tr}
			warm, _, _ := Run(t, k, srv, Epoch, 50, 100)
			Run(t, k, srv, warm, 50, 1000)
		})
		// TestPacerFixedWindowLimit.
		for _, quota := range []int{10, 20, 100} {
			for _, rtt := range []time.Duration{ms, 20 * ms} {
				add(fmt.Sprintf("window/a%d/q%d/rtt%v", adapt, quota, rtt), func(t testing.TB, newKey func(Setup) Key, tr *Trace) {
					k := newKey(Setup{InitialWindow: -1, AIMD: aimd})
					srv := &Server{Window: time.Second, Quota: quota, Lag: rtt / 2, Rnd: rand.New(rand.NewPCG(1, 2)), Trace: tr}
					Clients(t, k, srv, 8, 8*quota, rtt, rand.New(rand.NewPCG(3, 4)))
				})
			}
		}
	}
	// TestQuietSpellIsMeasuredAfresh.
	for adapt, aimd := range []bool{false, true} {
		for _, gap := range []time.Duration{0, 10 * time.Second} {
			add(fmt.Sprintf("quiet/a%d/gap%v", adapt, gap), func(t testing.TB, newKey func(Setup) Key, tr *Trace) {
				k := newKey(Setup{InitialWindow: -1, AIMD: aimd})
				srv := &Server{Rnd: rand.New(rand.NewPCG(1, 2)), Trace: tr}
				busy, _, _ := Run(t, k, srv, Epoch, 50, 1000)
				srv.Rate = 100
				Run(t, k, srv, busy.Add(gap), 1000, 1000)
			})
		}
	}
	// Outages (TestPacerColdOutage, TestPacerOutageAfterSuccesses, as
	// simulations): every attempt refused for a while, from the first or
	// after a limit was learned, then the server back at its limit.
	for adapt, aimd := range []bool{false, true} {
		for _, warm := range []bool{false, true} {
			add(fmt.Sprintf("outage/a%d/warm%v", adapt, warm), func(t testing.TB, newKey func(Setup) Key, tr *Trace) {
				k := newKey(Setup{AIMD: aimd})
				srv := &Server{Rate: 100, Lag: 5 * ms, Rnd: rand.New(rand.NewPCG(4, 5)), Trace: tr}
				at := Epoch
				if warm {
					at, _, _ = Run(t, k, srv, at, 1000, 1000)
				}
				srv.Shed = 1
				at, _, _ = Run(t, k, srv, at, 1000, 150)
				srv.Shed = 0
				Run(t, k, srv, at, 1000, 1000)
			})
		}
	}
	// TestPacerFollowsALimitThatMoves.
	for _, to := range []float64{2.5, 10} {
		for seed := range uint64(3) {
			add(fmt.Sprintf("moves/to%v/seed%d", to, seed), func(t testing.TB, newKey func(Setup) Key, tr *Trace) {
				k := newKey(Setup{})
				srv := &Server{Rate: 5, Lag: 15 * ms, Rnd: rand.New(rand.NewPCG(seed, 7)), Trace: tr}
				warm, _, _ := Run(t, k, srv, Epoch, 50, 600)
				srv.Rate = to
				Run(t, k, srv, warm, 50, int(to*60))
			})
		}
	}
	return all
}
