package retry

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

// jitterCase is one call of a Jitter and the delay it must return.
type jitterCase struct {
	d    time.Duration
	u    float64
	want time.Duration
}

func TestJitter(t *testing.T) {
	const s, ms = time.Second, time.Millisecond
	tests := []struct {
		name  string
		j     Jitter
		cases []jitterCase
	}{
		{"FullJitter", FullJitter, []jitterCase{
			{s, 0, 0}, {s, 0.25, 250 * ms}, {s, 0.5, 500 * ms}, {s, 0.9, 900 * ms}, {s, belowOne, s - 1},
			{0, 0.5, 0}, {-s, 0.5, 0}, {math.MinInt64, 0.5, 0}, {1, 0.9, 0}, {3, 0.5, 1},
			{s, -0.5, 0}, {s, math.NaN(), 0}, {s, 1, s - 1}, {s, 1e300, s - 1},
			{maxDuration, 0.5, 1 << 62}, {maxDuration, belowOne, maxDuration - 1023}, {maxDuration, 1, maxDuration - 1023},
		}},
		{"EqualJitter", EqualJitter, []jitterCase{
			{s, 0, 500 * ms}, {s, 0.5, 750 * ms}, {s, 0.9, 950 * ms}, {s, belowOne, s - 1},
			{0, 0.5, 0}, {-s, 0.5, 0}, {math.MinInt64, 0.9, 0}, {1, 0, 0}, {1, 0.9, 0}, {3, 0, 1}, {3, 0.9, 2},
			{s, -1, 500 * ms}, {s, math.NaN(), 500 * ms}, {s, math.Inf(1), s - 1},
			{maxDuration, 0, maxDuration / 2}, {maxDuration, 1, maxDuration - 512},
		}},
		{"Spread(0.2)", Spread(0.2), []jitterCase{
			{4 * s, 0, 4 * s}, {4 * s, 0.5, 4400 * ms}, {10 * s, 0.25, 10500 * ms},
			{0, 0.5, 0}, {-s, 0.5, 0}, {math.MinInt64, 0.5, 0},
			{4 * s, -1, 4 * s}, {4 * s, math.NaN(), 4 * s}, {4 * s, 2, 4800*ms - 1},
			{maxDuration, 0.5, maxDuration}, {maxDuration - 1, 0.9, maxDuration},
		}},
		{"Spread(0)", Spread(0), []jitterCase{{4 * s, 0.9, 4 * s}, {-s, 0.9, 0}}},
		{"Spread(1e300)", Spread(1e300), []jitterCase{{4 * s, 0.5, maxDuration}, {4 * s, 0, 4 * s}}},
		{"Spread(-0.2)", Spread(-0.2), []jitterCase{{4 * s, 0.5, 4 * s}, {-s, 0.5, 0}}},
		{"Spread(NaN)", Spread(math.NaN()), []jitterCase{{4 * s, 0.5, 4 * s}}},
		{"Spread(+Inf)", Spread(math.Inf(1)), []jitterCase{{4 * s, 0.5, maxDuration}, {4 * s, 0, 4 * s}, {-s, 0.5, 0}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, c := range tt.cases {
				if got := tt.j(c.d, c.u); got != c.want {
					t.Errorf("%s(%v, %v) = %v; want %v", tt.name, c.d, c.u, got, c.want)
				}
			}
		})
	}
}

// TestJitterStatistics checks the distributions of the AWS formulas with a
// fixed seed, so that it is deterministic.
func TestJitterStatistics(t *testing.T) {
	const s, ms = time.Second, time.Millisecond
	const samples = 100000
	r := rand.New(rand.NewPCG(1, 2))
	const limit = 10 * s // retry 10 of Exponential{Base: 1s, Cap: 10s} is at the cap

	mean := func(t *testing.T, name string, b Backoff, n int, prev, lo, hi time.Duration) float64 {
		t.Helper()
		var sum float64
		for range samples {
			u := r.Float64()
			d := b.Delay(n, prev, u)
			if d < lo || d >= hi {
				t.Fatalf("%s.Delay(%d, %v, %v) = %v; want within [%v, %v)", name, n, prev, u, d, lo, hi)
			}
			sum += float64(d)
		}
		return sum / samples
	}
	within := func(t *testing.T, name string, got, want float64) {
		t.Helper()
		if math.Abs(got-want) > 0.02*want {
			t.Errorf("mean of %d samples of %s = %v; want %v within 2%%", samples, name, time.Duration(got), time.Duration(want))
		}
	}

	t.Run("FullJitter", func(t *testing.T) {
		const name = "Exponential{Base: 1s, Cap: 10s, Jitter: FullJitter}"
		b := Exponential{Base: s, Cap: limit, Jitter: FullJitter}
		within(t, name, mean(t, name, b, 10, 0, 0, limit), float64(limit)/2)
		within(t, name+" retry 2", mean(t, name, b, 2, 0, 0, 2*s), float64(s))
	})
	t.Run("EqualJitter", func(t *testing.T) {
		const name = "Exponential{Base: 1s, Cap: 10s, Jitter: EqualJitter}"
		b := Exponential{Base: s, Cap: limit, Jitter: EqualJitter}
		within(t, name, mean(t, name, b, 10, 0, limit/2, limit), float64(limit)*3/4)
	})
	t.Run("Spread", func(t *testing.T) {
		const name = "Constant{Base: 10s, Jitter: Spread(0.2)}"
		b := Constant{Base: limit, Jitter: Spread(0.2)}
		within(t, name, mean(t, name, b, 1, 0, limit, limit*12/10), float64(limit)*1.1)
	})
	t.Run("Decorrelated", func(t *testing.T) {
		const name = "Decorrelated{Base: 1s, Cap: 10s}"
		b := Decorrelated{Base: s, Cap: limit}
		within(t, name+" first retry", mean(t, name, b, 1, 0, s, 3*s), float64(2*s))
		within(t, name+" after 2s", mean(t, name, b, 2, 2*s, s, 6*s), float64(3500*ms))
	})
}

// TestSpreadClampsOnACurve: a clamped ratio is a valid setting, so Validate
// accepts it, and the curve bounds what it yields: +Inf ends at the Cap,
// NaN and negative ratios add nothing.
func TestSpreadClampsOnACurve(t *testing.T) {
	const s = time.Second
	tests := []struct {
		ratio float64
		want  time.Duration // Delay(2, 0, 0.5) with Base 1s, Cap 10s
	}{
		{math.Inf(1), 10 * s},
		{1e300, 10 * s},
		{math.NaN(), 2 * s},
		{-3, 2 * s},
		{0.5, 2500 * time.Millisecond},
	}
	for _, tt := range tests {
		b := Exponential{Base: s, Cap: 10 * s, Jitter: Spread(tt.ratio)}
		if err := b.Validate(); err != nil {
			t.Errorf("Spread(%v): Validate() = %v; want nil", tt.ratio, err)
		}
		if err := (&Transport{Backoff: b}).Validate(); err != nil {
			t.Errorf("Spread(%v): Transport.Validate() = %v; want nil", tt.ratio, err)
		}
		if got := b.Delay(2, 0, 0.5); got != tt.want {
			t.Errorf("Spread(%v): Delay(2, 0, 0.5) = %v; want %v", tt.ratio, got, tt.want)
		}
	}
}
