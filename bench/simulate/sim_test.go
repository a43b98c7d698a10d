package main

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/backoff-jitter/retry"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const ms = time.Millisecond

// byName returns the strategy of that name among the blog's defaults.
func byName(t *testing.T, name string) retry.Backoff {
	t.Helper()
	for _, s := range strategies(5*ms, 2000*ms) {
		if s.name == name {
			return s.backoff
		}
	}
	t.Fatalf("no strategy %q", name)
	return nil
}

func TestStrategyNames(t *testing.T) {
	var names []string
	for _, s := range strategies(5*ms, 2000*ms) {
		names = append(names, s.name)
	}
	assert.Equal(t, []string{"None", "Exponential", "FullJitter", "EqualJitter", "Decorrelated"}, names)
	require.NoError(t, validateStrategies(strategies(5*ms, 2000*ms)))
}

// TestFirstRetrySleeps10ms checks the mapping of the model's attempt counter
// onto the library's retry number: retry 1 sleeps base*2 = 10ms.
func TestFirstRetrySleeps10ms(t *testing.T) {
	exp := byName(t, nameExponential)
	for _, tc := range []struct {
		attempt int
		want    time.Duration
	}{{1, 10 * ms}, {2, 20 * ms}, {3, 40 * ms}, {8, 1280 * ms}, {9, 2000 * ms}, {10000, 2000 * ms}} {
		if got := exp.Delay(tc.attempt, 0, 0.5); got != tc.want {
			t.Errorf("Exponential.Delay(%d, 0, 0.5) = %v; want %v", tc.attempt, got, tc.want)
		}
	}
	assert.Equal(t, 5*ms, byName(t, nameFullJitter).Delay(1, 0, 0.5), "FullJitter, retry 1, u = 0.5")
	assert.Equal(t, 7500*time.Microsecond, byName(t, nameEqualJitter).Delay(1, 0, 0.5), "EqualJitter, retry 1, u = 0.5")
	dec := byName(t, nameDecorrelated)
	assert.Equal(t, 10*ms, dec.Delay(1, 0, 0.5), "Decorrelated, first retry: uniform(5ms, 15ms) at 0.5")
	assert.Equal(t, 17500*time.Microsecond, dec.Delay(2, 10*ms, 0.5), "Decorrelated after 10ms: uniform(5ms, 30ms) at 0.5")
	assert.Equal(t, time.Duration(0), byName(t, nameNone).Delay(7, time.Second, 0.9), "None")
}

// TestStrategiesMatchTheModel compares every strategy with the model's
// formulas (those of the AWS simulator) over many retries and random numbers.
func TestStrategiesMatchTheModel(t *testing.T) {
	const base, limit = 5 * ms, 2000 * ms
	expo := func(attempt int) float64 {
		return min(float64(limit), math.Pow(2, float64(attempt))*float64(base))
	}
	model := map[string]func(attempt int, prev time.Duration, u float64) float64{
		nameNone:        func(int, time.Duration, float64) float64 { return 0 },
		nameExponential: func(a int, _ time.Duration, _ float64) float64 { return expo(a) },
		nameFullJitter:  func(a int, _ time.Duration, u float64) float64 { return u * expo(a) },
		nameEqualJitter: func(a int, _ time.Duration, u float64) float64 { return expo(a)/2 + u*expo(a)/2 },
		nameDecorrelated: func(_ int, prev time.Duration, u float64) float64 {
			sleep := float64(max(prev, base)) // the model's sleep starts at base
			return min(float64(limit), float64(base)+u*(3*sleep-float64(base)))
		},
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for _, s := range strategies(base, limit) {
		var prev time.Duration
		for attempt := 1; attempt <= 30; attempt++ {
			u := rng.Float64()
			got := s.backoff.Delay(attempt, prev, u)
			want := model[s.name](attempt, prev, u)
			if math.Abs(float64(got)-want) > 1 {
				t.Errorf("%s: Delay(%d, %v, %v) = %v; want %v", s.name, attempt, prev, u, got, time.Duration(want))
			}
			prev = got
		}
	}
}

func TestExponentialBaseClampedToCap(t *testing.T) {
	ss := strategies(5*ms, 8*ms) // 2*base above the cap
	require.NoError(t, validateStrategies(ss))
	assert.Equal(t, 8*ms, ss[1].backoff.Delay(1, 0, 0), "Exponential with cap 8ms, retry 1")
}

// fixed is a model with a constant latency of 10ms and a generous limit.
func fixed(clients int, b retry.Backoff) model {
	return model{clients: clients, backoff: b, latency: 10 * ms, limit: time.Hour}
}

func run1(t *testing.T, m model, seed uint64) outcome {
	t.Helper()
	out, err := simulate(m, rand.New(rand.NewPCG(seed, 0)))
	require.NoError(t, err)
	return out
}

func TestOneClientWritesOnce(t *testing.T) {
	out := run1(t, fixed(1, byName(t, nameExponential)), 1)
	assert.Equal(t, outcome{calls: 1, time: 40 * ms, events: 4}, out)

	m := fixed(1, retry.Constant{})
	m.latencySD = 2 * ms
	for seed := range uint64(20) {
		out := run1(t, m, seed)
		assert.Equal(t, int64(1), out.calls, "seed %d", seed)
		assert.Equal(t, int64(4), out.events, "seed %d", seed)
		assert.Positive(t, out.time, "seed %d", seed)
	}
}

// TestTwoClients follows two clients in lockstep: both read at 10ms and
// write at 30ms; the first write sent wins, the other fails (its reply at
// 40ms) and tries again.
func TestTwoClients(t *testing.T) {
	// No backoff: read at 50ms, reply at 60, write at 70, reply at 80.
	assert.Equal(t, outcome{calls: 3, time: 80 * ms, events: 12}, run1(t, fixed(2, retry.Constant{}), 1))
	// Exponential: the retry's read travels 10ms + a 10ms sleep.
	assert.Equal(t, outcome{calls: 3, time: 90 * ms, events: 12}, run1(t, fixed(2, byName(t, nameExponential)), 1))
}

// TestLockstepRounds checks the blog's N rounds: with no backoff and no
// variance in the latency, one client succeeds in each round of 40ms.
func TestLockstepRounds(t *testing.T) {
	for _, n := range []int{1, 3, 10, 50} {
		out := run1(t, fixed(n, retry.Constant{}), 1)
		want := int64(n * (n + 1) / 2)
		assert.Equal(t, want, out.calls, "%d clients: calls", n)
		assert.Equal(t, time.Duration(n)*40*ms, out.time, "%d clients: time", n)
		assert.Equal(t, 4*want, out.events, "%d clients: events", n)
	}
}

// TestEveryClientWritesOnce checks the invariants of random runs: each
// client succeeds exactly once, each attempt is four messages, and the work
// stays within maxEvents.
func TestEveryClientWritesOnce(t *testing.T) {
	for _, s := range strategies(5*ms, 2000*ms) {
		for _, n := range []int{2, 7, 30} {
			for seed := range uint64(5) {
				m := fixed(n, s.backoff)
				m.latencySD = 2 * ms
				m.binWidth = seriesBin
				sm, err := newSim(m, rand.New(rand.NewPCG(seed, 9)))
				require.NoError(t, err)
				for sm.queue.Len() > 0 {
					require.NoError(t, sm.step())
				}
				out := sm.out
				assert.Equal(t, int64(n), sm.version, "%s, %d clients: successful writes", s.name, n)
				assert.Equal(t, 4*out.calls, out.events, "%s, %d clients", s.name, n)
				assert.LessOrEqual(t, out.events, maxEvents(n), "%s, %d clients", s.name, n)
				var binned int64
				for _, b := range out.bins {
					binned += b
				}
				assert.Equal(t, out.calls, binned, "%s, %d clients: calls in the bins", s.name, n)
			}
		}
	}
}

func TestTimeLimit(t *testing.T) {
	// No cap: exponential sleeps double until the clock runs off.
	m := fixed(50, retry.Exponential{Base: 10 * ms})
	m.latencySD = 2 * ms
	_, err := simulate(m, rand.New(rand.NewPCG(1, 1)))
	assert.True(t, errors.Is(err, errTimeLimit), "no cap: err = %v; want errTimeLimit", err)

	// A latency beyond the limit.
	m = fixed(3, retry.Constant{})
	m.latency, m.limit = 2*time.Hour, time.Hour
	_, err = simulate(m, rand.New(rand.NewPCG(1, 1)))
	assert.True(t, errors.Is(err, errTimeLimit), "long latency: err = %v; want errTimeLimit", err)
}

// TestZeroLatency checks that runs where everything happens at once still
// end: the ties are broken in the order the messages were sent.
func TestZeroLatency(t *testing.T) {
	for _, s := range strategies(5*ms, 2000*ms) {
		out := run1(t, model{clients: 20, backoff: s.backoff, limit: time.Hour}, 1)
		assert.LessOrEqual(t, out.events, maxEvents(20), s.name)
	}
}
