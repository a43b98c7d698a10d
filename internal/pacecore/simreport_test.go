package pacecore

import (
	"math/rand/v2"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/backoff-jitter/retry/internal/pacesim"
	"github.com/stretchr/testify/assert"
)

// TestSimReport prints the distributions the test of shedding was tuned
// against (docs/pacing-design.md, "The test in two stages"): runs of simRun and
// simClients on the fake clock, hundreds of seeds each, against random
// shedding, rate limits with and without a burst, and both at once. It
// takes about ten seconds, so it runs only when asked:
//
//	PACE_SIM_REPORT=1 go test ./internal/pacecore -run TestSimReport -v
//
// Each line is one scenario and algorithm (a0 CUBIC, a1 AIMD). It fails
// where the report's headline figures regress: a key refused far more
// than a limit needs in more than 5 of 100 runs, or 40 clients shed at
// random at 10 or 25 % taking over 5 s for what takes a median 30 to 80
// ms (before the test in two stages: 17 of 100 AIMD runs against a limit
// with a burst of 10; 0.75 s at most).
func TestSimReport(t *testing.T) {
	if os.Getenv("PACE_SIM_REPORT") == "" {
		t.Skip("set PACE_SIM_REPORT=1 to print the report")
	}
	q := func(d []time.Duration, f float64) time.Duration {
		return d[int(f*float64(len(d)-1))].Round(time.Millisecond)
	}
	adapts := []Adapt{Cubic, AIMD}
	// One queue at 1000/s, no slow start, 6000 attempts: "slow" is over
	// 10 s, against 6 s unpaced.
	for _, adapt := range adapts {
		for _, shed := range []float64{0.05, 0.1, 0.25, 0.4} {
			var ends []time.Duration
			slow := 0
			for seed := uint64(0); seed < 300; seed++ {
				p := &testPacer{InitialWindow: -1, Adapt: adapt}
				srv := &pacesim.Server{Shed: shed, Rnd: rand.New(rand.NewPCG(seed, 77))}
				end, _, _ := pacesim.Run(t, p.state(hostRequest(t, "api.example")), srv, pacerEpoch, 1000, 6000)
				ends = append(ends, end.Sub(pacerEpoch))
				if end.Sub(pacerEpoch) > 10*time.Second {
					slow++
				}
			}
			slices.Sort(ends)
			t.Logf("queue, shed %.2f, a%d: over 10 s %d/300, p99 %v, max %v", shed, adapt, slow, q(ends, .99), q(ends, 1))
		}
	}
	// 40 clients shed at random (see shedClients), and the median time
	// against no Pacer's (see TestPacerRandomSheddingCostsLittleTime).
	for _, shed := range []float64{0.05, 0.1, 0.25, 0.4} {
		none := shedClients(t, nil, shed, 300)
		t.Logf("40 clients, shed %.2f, no Pacer: p50 %v, p99 %v, max %v", shed, q(none, .5), q(none, .99), q(none, 1))
		for _, adapt := range adapts {
			ends := shedClients(t, &adapt, shed, 300)
			t.Logf("40 clients, shed %.2f, a%d: p50 %v (%.3f× no Pacer's), p99 %v, max %v",
				shed, adapt, q(ends, .5), median(ends)/median(none), q(ends, .99), q(ends, 1))
			if shed < 0.4 {
				assert.Less(t, ends[len(ends)-1], 5*time.Second, "40 clients, shed %v, a%d", shed, adapt)
			}
		}
	}
	// Rate limits, with a burst and random refusals besides; "bad" is a
	// run refused more than the bound.
	ms := time.Millisecond
	for _, l := range []struct {
		rate, burst, shed float64
		clients, n        int
		rtts              []time.Duration
		bad               int
	}{
		{100, 0, 0, 20, 600, []time.Duration{ms, 5 * ms, 20 * ms}, 500},
		{100, 10, 0, 20, 600, []time.Duration{ms, 5 * ms, 20 * ms}, 500},
		{100, 100, 0, 20, 600, []time.Duration{ms, 5 * ms, 20 * ms}, 500},
		{100, 10, 0.1, 20, 600, []time.Duration{ms, 5 * ms, 20 * ms}, 700},
		{5, 5, 0, 10, 200, []time.Duration{20 * ms, 50 * ms}, 300},
		{5, 0, 0, 10, 200, []time.Duration{20 * ms, 50 * ms}, 300},
	} {
		for _, adapt := range adapts {
			var refs []int
			var ends []time.Duration
			bad := 0
			for seed := uint64(0); seed < 100; seed++ {
				p := &testPacer{InitialWindow: -1, Adapt: adapt}
				rtt := l.rtts[int(seed)%len(l.rtts)]
				srv := &pacesim.Server{Rate: l.rate, Burst: l.burst, Shed: l.shed, Lag: rtt / 2, Rnd: rand.New(rand.NewPCG(seed, 80))}
				end, k := pacesim.Clients(t, p.state(hostRequest(t, "api.example")), srv, l.clients, l.n, rtt, rand.New(rand.NewPCG(seed, 81)))
				refs = append(refs, k)
				ends = append(ends, end.Sub(pacerEpoch))
				if k > l.bad {
					bad++
				}
			}
			slices.Sort(refs)
			slices.Sort(ends)
			t.Logf("limit %v/s, burst %v, shed %v, %d clients, a%d: over %d refused %d/100; refused p50 %d, p90 %d, max %d; time p50 %v, max %v",
				l.rate, l.burst, l.shed, l.clients, adapt, l.bad, bad, refs[50], refs[90], refs[99], q(ends, .5), q(ends, 1))
			assert.LessOrEqual(t, bad, 5, "limit %v/s, burst %v, shed %v, a%d", l.rate, l.burst, l.shed, adapt)
		}
	}
	// Shed 10 % until the key went idle, then a limit of 100/s besides:
	// "slow" is 20 s or more, or 300 refused or more, for 1000 attempts.
	for _, adapt := range adapts {
		var tooks []time.Duration
		slow := 0
		for seed := uint64(0); seed < 100; seed++ {
			p := &testPacer{InitialWindow: -1, Adapt: adapt}
			srv := &pacesim.Server{Shed: 0.1, Rnd: rand.New(rand.NewPCG(seed, 5))}
			end, _, _ := pacesim.Run(t, p.state(hostRequest(t, "api.example")), srv, pacerEpoch, 1000, 3000)
			srv.Rate = 100
			start := end
			end, refused, _ := pacesim.Run(t, p.state(hostRequest(t, "api.example")), srv, end, 1000, 1000)
			tooks = append(tooks, end.Sub(start))
			if end.Sub(start) >= 20*time.Second || refused >= 300 {
				slow++
			}
		}
		slices.Sort(tooks)
		t.Logf("limit after shedding, a%d: slow %d/100, p50 %v, p90 %v, max %v", adapt, slow, q(tooks, .5), q(tooks, .9), q(tooks, 1))
	}
}

// shedClients returns the times, sorted, that 40 clients with 1 ms round
// trips take for 600 successes from a server that sheds a share shed of
// the attempts at random, one run per seed: paced by a Pacer of adapt,
// or with none if adapt is nil. A seed runs the same server and clients
// either way.
func shedClients(t testing.TB, adapt *Adapt, shed float64, seeds int) []time.Duration {
	var ends []time.Duration
	for seed := uint64(0); seed < uint64(seeds); seed++ {
		var k pacesim.Key = pacesim.Unpaced{}
		if adapt != nil {
			p := &testPacer{InitialWindow: -1, Adapt: *adapt}
			k = p.state(hostRequest(t, "api.example"))
		}
		srv := &pacesim.Server{Shed: shed, Rnd: rand.New(rand.NewPCG(seed, 78))}
		end, _ := pacesim.Clients(t, k, srv, 40, 600, time.Millisecond, rand.New(rand.NewPCG(seed, 79)))
		ends = append(ends, end.Sub(pacerEpoch))
	}
	slices.Sort(ends)
	return ends
}

// median returns the median of sorted, in nanoseconds: the lower middle
// of an even count, as the report's p50 is.
func median(sorted []time.Duration) float64 { return float64(sorted[(len(sorted)-1)/2]) }
