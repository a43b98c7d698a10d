package pacecore

import (
	"math/rand/v2"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/backoff-jitter/retry/internal/pacesim"
)

// The simulation report: outcomes over many seeds on the fake clock, the
// gates of docs/pacing-design.md. Each test asserts what a user would
// notice; PACE_SIM_REPORT=1 prints the distributions too:
//
//	PACE_SIM_REPORT=1 go test ./internal/pacecore -run Report -v

func report(t *testing.T, format string, args ...any) {
	t.Helper()
	if os.Getenv("PACE_SIM_REPORT") != "" {
		t.Logf(format, args...)
	}
}

// q returns the f-quantile of sorted: the lower middle of an even count
// for f = 0.5.
func q(sorted []time.Duration, f float64) time.Duration {
	return sorted[int(f*float64(len(sorted)-1))].Round(time.Millisecond)
}

// shedClients returns the times, sorted, that 40 clients with 1 ms round
// trips take for 600 successes from a server that sheds a share shed at
// random, one run per seed: paced by a key of adapt, or with none if
// adapt is nil. A seed runs the same server and clients either way.
func shedClients(t testing.TB, adapt *Adapt, shed float64, seeds int) []time.Duration {
	var ends []time.Duration
	for seed := range uint64(seeds) {
		var k pacesim.Key = pacesim.Unpaced{}
		if adapt != nil {
			k = newSimKey(Config{Adapt: *adapt})
		}
		srv := &pacesim.Server{Shed: shed, Rnd: rand.New(rand.NewPCG(seed, 78))}
		end, _ := pacesim.Clients(t, k, srv, 40, 600, time.Millisecond, rand.New(rand.NewPCG(seed, 79)))
		ends = append(ends, end.Sub(pacesim.Epoch))
	}
	slices.Sort(ends)
	return ends
}

// Random shedding is no limit: a load balancer that refuses a share of
// the requests at random, whatever the rate, costs a paced client at
// most 5 % more time than an unpaced one (median over 100 runs), up to a
// quarter shed, and its slowest run at most half as long again as the
// slowest unpaced one.
func TestReportRandomShedding(t *testing.T) {
	for _, shed := range []float64{0.05, 0.1, 0.25} {
		none := shedClients(t, nil, shed, 100)
		for _, adapt := range []Adapt{Cubic, AIMD} {
			ends := shedClients(t, &adapt, shed, 100)
			ratio := float64(q(ends, .5)) / float64(q(none, .5))
			report(t, "shed %.2f, a%d: p50 %v (%.3f× no Pacer's %v), p99 %v, max %v (no Pacer's %v)", shed, adapt, q(ends, .5), ratio, q(none, .5), q(ends, .99), q(ends, 1), q(none, 1))
			if ratio > 1.05 {
				t.Errorf("shed %v, a%d: median %v, %.3f times no Pacer's %v; want at most 1.05", shed, adapt, q(ends, .5), ratio, q(none, .5))
			}
			if slowest, unpaced := ends[len(ends)-1], none[len(none)-1]; float64(slowest) > 1.5*float64(unpaced) {
				t.Errorf("shed %v, a%d: the slowest run took %v, no Pacer's %v; want at most 1.5 times", shed, adapt, slowest, unpaced)
			}
		}
	}
}

// throttled returns the times, sorted, that clients with 1 ms round trips
// take for n successes from a server that throttles a share shed at
// random, answering its refusals at once (before the successes sent with
// them) and asking for a 20 ms wait in hinted of them: paced by a key, or
// with none if paced is false.
func throttled(t testing.TB, paced bool, shed, hinted float64, clients, n, seeds int) []time.Duration {
	var ends []time.Duration
	for seed := range uint64(seeds) {
		var k pacesim.Key = pacesim.Unpaced{}
		if paced {
			k = newSimKey(Config{})
		}
		srv := &pacesim.Server{Shed: shed, Hinted: hinted, Hint: 20 * time.Millisecond, QuickRefusals: true, Rnd: rand.New(rand.NewPCG(seed, 90))}
		end, _ := pacesim.Clients(t, k, srv, clients, n, time.Millisecond, rand.New(rand.NewPCG(seed, 91)))
		ends = append(ends, end.Sub(pacesim.Epoch))
	}
	slices.Sort(ends)
	return ends
}

// Random throttling at a high rate is no limit either. Its refusals come
// before the successes sent with them, and some ask for a wait: neither
// may engage a key, nor a wait meant for one request hold the others. A
// paced client takes at most 5 % more time than an unpaced one (median
// over 10 runs of 200 clients) up to a quarter throttled. At 35 %, over
// engageLow, a burst may engage the key until the shedding test frees
// it, once: over 20,000 calls, bound at 1.10 times.
func TestReportRandomThrottles(t *testing.T) {
	for _, c := range []struct {
		shed, hinted, bound float64
		clients, n          int
	}{
		{0.15, 0.6, 1.05, 200, 5000},
		{0.25, 0, 1.05, 200, 5000},
		{0.25, 0.6, 1.05, 200, 5000},
		{0.35, 0.6, 1.10, 40, 20000},
	} {
		none := throttled(t, false, c.shed, c.hinted, c.clients, c.n, 10)
		ends := throttled(t, true, c.shed, c.hinted, c.clients, c.n, 10)
		ratio := float64(q(ends, .5)) / float64(q(none, .5))
		report(t, "throttled %.2f, hinted %.1f, %d clients: p50 %v (%.3f× no Pacer's %v), max %v (no Pacer's %v)",
			c.shed, c.hinted, c.clients, q(ends, .5), ratio, q(none, .5), q(ends, 1), q(none, 1))
		if ratio > c.bound {
			t.Errorf("throttled %v, hinted %v: median %v, %.3f times no Pacer's %v; want at most %v", c.shed, c.hinted, q(ends, .5), ratio, q(none, .5), c.bound)
		}
	}
}

// A rate limit is learned: clients that retry with backoff are refused
// far less often than unpaced ones, in all but 5 of 100 runs (bad: more
// refused than the bound), and finish about as soon.
func TestReportLimits(t *testing.T) {
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
		for _, adapt := range []Adapt{Cubic, AIMD} {
			var refs []int
			var ends, none []time.Duration
			bad := 0
			for seed := range uint64(100) {
				rtt := l.rtts[int(seed)%len(l.rtts)]
				run := func(k pacesim.Key) (time.Duration, int) {
					srv := &pacesim.Server{Rate: l.rate, Burst: l.burst, Shed: l.shed, Lag: rtt / 2, Rnd: rand.New(rand.NewPCG(seed, 80))}
					end, refused := pacesim.Clients(t, k, srv, l.clients, l.n, rtt, rand.New(rand.NewPCG(seed, 81)))
					return end.Sub(pacesim.Epoch), refused
				}
				end, refused := run(newSimKey(Config{Adapt: adapt}))
				unpaced, _ := run(pacesim.Unpaced{})
				refs, ends, none = append(refs, refused), append(ends, end), append(none, unpaced)
				if refused > l.bad {
					bad++
				}
			}
			slices.Sort(refs)
			slices.Sort(ends)
			slices.Sort(none)
			report(t, "limit %v/s+%v, shed %v, %d clients, a%d: over %d refused %d/100; refused p50 %d, max %d; time p50 %v (no Pacer %v), max %v",
				l.rate, l.burst, l.shed, l.clients, adapt, l.bad, bad, refs[50], refs[99], q(ends, .5), q(none, .5), q(ends, 1))
			if bad > 5 {
				t.Errorf("limit %v/s+%v, shed %v, a%d: %d of 100 runs refused over %d", l.rate, l.burst, l.shed, adapt, bad, l.bad)
			}
			if p50 := q(ends, .5); float64(p50) > 1.5*float64(q(none, .5)) {
				t.Errorf("limit %v/s+%v, shed %v, a%d: median time %v; no Pacer's %v", l.rate, l.burst, l.shed, adapt, p50, q(none, .5))
			}
		}
	}
}

// An outage is no rate limit: refusals with nothing accepted leave the
// key idle, so that a client is not held back when the server returns;
// and after it, the key learns the limit again.
func TestReportOutage(t *testing.T) {
	ms := time.Millisecond
	for _, adapt := range []Adapt{Cubic, AIMD} {
		for _, warm := range []bool{false, true} {
			k := newSimKey(Config{Adapt: adapt})
			srv := &pacesim.Server{Rate: 100, Lag: 5 * ms, Rnd: rand.New(rand.NewPCG(4, 5))}
			at := pacesim.Epoch
			if warm {
				at, _, _ = pacesim.Run(t, k, srv, at, 1000, 1000)
			}
			srv.Shed = 1
			at, _, _ = pacesim.Run(t, k, srv, at, 1000, 3000)
			if k.st.Engaged() {
				t.Errorf("a%d, warm %v: engaged after 3 s of refusals with nothing accepted; want idle", adapt, warm)
			}
			srv.Shed = 0
			end, refused, _ := pacesim.Run(t, k, srv, at, 1000, 1000)
			report(t, "a%d, warm %v: after the outage, 1000 attempts at 1000/s to 100/s took %v, %d refused", adapt, warm, end.Sub(at), refused)
			if !k.st.Engaged() || refused > 60 {
				t.Errorf("a%d, warm %v: after the outage, engaged %v with %d of 1000 refused; want the limit learned again", adapt, warm, k.st.Engaged(), refused)
			}
		}
	}
}
