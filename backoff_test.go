package retry

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// curveCase is one call of Delay and the delay it must return.
type curveCase struct {
	n    int
	prev time.Duration
	u    float64
	want time.Duration
}

// checkCurveDelays runs each case against b, named name in messages.
func checkCurveDelays(t *testing.T, name string, b Backoff, cases []curveCase) {
	t.Helper()
	for _, c := range cases {
		if got := b.Delay(c.n, c.prev, c.u); got != c.want {
			t.Errorf("%s.Delay(%d, %v, %v) = %v; want %v", name, c.n, c.prev, c.u, got, c.want)
		}
	}
}

// curveSchedule returns delays for n = 1..len(want) with prev = 0 and u = 0.
func curveSchedule(want ...time.Duration) []curveCase {
	cases := make([]curveCase, len(want))
	for i, w := range want {
		cases[i] = curveCase{n: i + 1, want: w}
	}
	return cases
}

func TestBackoffConstant(t *testing.T) {
	const s, ms = time.Second, time.Millisecond
	tests := []struct {
		name  string
		b     Constant
		cases []curveCase
	}{
		{"Constant{}", Constant{}, curveSchedule(0, 0, 0)},
		{"Constant{Base: 1s}", Constant{Base: s}, []curveCase{
			{1, 0, 0, s}, {2, s, 0.5, s}, {1000, s, 0.99, s}, {0, 0, 0, s}, {-5, 0, 0, s}, {math.MaxInt, 0, 0, s},
		}},
		{"Constant{Base: 1s, Jitter: FullJitter}", Constant{Base: s, Jitter: FullJitter}, []curveCase{
			{1, 0, 0, 0}, {2, 0, 0.25, 250 * ms}, {3, 0, 0.9, 900 * ms},
		}},
		{"Constant{Base: 4s, Jitter: Spread(0.2)}", Constant{Base: 4 * s, Jitter: Spread(0.2)}, []curveCase{
			{1, 0, 0, 4 * s}, {1, 0, 0.5, 4400 * ms},
		}},
		{"Constant{Base: -1s}", Constant{Base: -s}, curveSchedule(0, 0)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { checkCurveDelays(t, tt.name, tt.b, tt.cases) })
	}
}

func TestBackoffLinear(t *testing.T) {
	const s, ms = time.Second, time.Millisecond
	tests := []struct {
		name  string
		b     Linear
		cases []curveCase
	}{
		{"Linear{Base: 1s}", Linear{Base: s}, curveSchedule(s, 2*s, 3*s, 4*s, 5*s)},
		{"Linear{Base: 1s, Cap: 3s}", Linear{Base: s, Cap: 3 * s}, curveSchedule(s, 2*s, 3*s, 3*s, 3*s)},
		{"Linear{Base: 1s, Cap: 10s}", Linear{Base: s, Cap: 10 * s}, []curveCase{
			{0, 0, 0, s}, {-1, 0, 0, s}, {10000, 0, 0, 10 * s}, {math.MaxInt, 0, 0, 10 * s},
		}},
		{"Linear{Base: 1s}", Linear{Base: s}, []curveCase{
			{math.MaxInt32, 0, 0, math.MaxInt32 * s},
			{math.MaxInt, 0, 0, maxDuration},
		}},
		{"Linear{Base: 1ns}", Linear{Base: 1}, []curveCase{
			{math.MaxInt - 1, 0, 0, maxDuration - 1}, {math.MaxInt, 0, 0, maxDuration},
		}},
		{"Linear{Base: 1s, Cap: 3s, Jitter: FullJitter}", Linear{Base: s, Cap: 3 * s, Jitter: FullJitter}, []curveCase{
			{1, 0, 0.5, 500 * ms}, {2, 0, 0.5, s}, {100, 0, 0.5, 1500 * ms},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { checkCurveDelays(t, tt.name, tt.b, tt.cases) })
	}
}

func TestBackoffFibonacci(t *testing.T) {
	const s, ms = time.Second, time.Millisecond
	const fib92 = 7540113804746346429 // the largest Fibonacci number below 2^63
	tests := []struct {
		name  string
		b     Fibonacci
		cases []curveCase
	}{
		{"Fibonacci{Base: 1s}", Fibonacci{Base: s}, curveSchedule(s, s, 2*s, 3*s, 5*s, 8*s, 13*s, 21*s, 34*s, 55*s)},
		{"Fibonacci{Base: 1s, Cap: 10s}", Fibonacci{Base: s, Cap: 10 * s}, curveSchedule(s, s, 2*s, 3*s, 5*s, 8*s, 10*s, 10*s)},
		{"Fibonacci{Base: 1ns}", Fibonacci{Base: 1}, []curveCase{
			{0, 0, 0, 1}, {-3, 0, 0, 1}, {50, 0, 0, 12586269025}, {92, 0, 0, fib92},
			{93, 0, 0, maxDuration}, {94, 0, 0, maxDuration}, {10000, 0, 0, maxDuration}, {math.MaxInt, 0, 0, maxDuration},
		}},
		{"Fibonacci{Base: 2ns}", Fibonacci{Base: 2}, []curveCase{{90, 0, 0, 2 * 2880067194370816120}, {91, 0, 0, maxDuration}}},
		{"Fibonacci{Base: 1s, Cap: 1m}", Fibonacci{Base: s, Cap: time.Minute}, []curveCase{
			{62, 0, 0, time.Minute}, {math.MaxInt32, 0, 0, time.Minute},
		}},
		{"Fibonacci{Base: 1s, Jitter: EqualJitter}", Fibonacci{Base: s, Jitter: EqualJitter}, []curveCase{
			{5, 0, 0, 2500 * ms}, {5, 0, 0.5, 3750 * ms},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { checkCurveDelays(t, tt.name, tt.b, tt.cases) })
	}
}

func TestBackoffPolynomial(t *testing.T) {
	const s, ms = time.Second, time.Millisecond
	tests := []struct {
		name  string
		b     Polynomial
		cases []curveCase
	}{
		{"Polynomial{Base: 1s, Degree: 2}", Polynomial{Base: s, Degree: 2}, curveSchedule(s, 4*s, 9*s, 16*s, 25*s)},
		{"Polynomial{Base: 1s, Degree: 3}", Polynomial{Base: s, Degree: 3}, curveSchedule(s, 8*s, 27*s, 64*s, 125*s)},
		{"Polynomial{Base: 1s, Degree: 1}", Polynomial{Base: s, Degree: 1}, curveSchedule(s, 2*s, 3*s)},
		{"Polynomial{Base: 1s, Degree: 0}", Polynomial{Base: s}, curveSchedule(s, s, s)},
		{"Polynomial{Base: 1s, Degree: 0.5}", Polynomial{Base: s, Degree: 0.5}, curveSchedule(s, 1414213562, 1732050808, 2*s)},
		{"Polynomial{Base: 1s, Cap: 20s, Degree: 2}", Polynomial{Base: s, Cap: 20 * s, Degree: 2}, []curveCase{
			{0, 0, 0, s}, {-7, 0, 0, s}, {4, 0, 0, 16 * s}, {5, 0, 0, 20 * s}, {10000, 0, 0, 20 * s}, {math.MaxInt, 0, 0, 20 * s},
		}},
		{"Polynomial{Base: 1s, Degree: 2}", Polynomial{Base: s, Degree: 2}, []curveCase{
			{math.MaxInt32, 0, 0, maxDuration}, {math.MaxInt, 0, 0, maxDuration},
		}},
		{"Polynomial{Base: 1s, Cap: 20s, Degree: 2, Jitter: FullJitter}", Polynomial{Base: s, Cap: 20 * s, Degree: 2, Jitter: FullJitter}, []curveCase{
			{3, 0, 0.5, 4500 * ms}, {100, 0, 0.5, 10 * s},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { checkCurveDelays(t, tt.name, tt.b, tt.cases) })
	}
}

func TestBackoffExponential(t *testing.T) {
	const s, ms = time.Second, time.Millisecond
	tests := []struct {
		name  string
		b     Exponential
		cases []curveCase
	}{
		{"Exponential{Base: 100ms, Cap: 20s}", Exponential{Base: 100 * ms, Cap: 20 * s},
			curveSchedule(100*ms, 200*ms, 400*ms, 800*ms, 1600*ms, 3200*ms, 6400*ms, 12800*ms, 20*s, 20*s)},
		{"Exponential{Base: 1s}", Exponential{Base: s}, curveSchedule(s, 2*s, 4*s, 8*s, 16*s)},
		{"Exponential{Base: 1s, Multiplier: 3}", Exponential{Base: s, Multiplier: 3}, curveSchedule(s, 3*s, 9*s, 27*s)},
		{"Exponential{Base: 100ms, Multiplier: 1.5}", Exponential{Base: 100 * ms, Multiplier: 1.5}, curveSchedule(100*ms, 150*ms, 225*ms, 337500*time.Microsecond)},
		{"Exponential{Base: 100ms, Multiplier: 1.3}", Exponential{Base: 100 * ms, Multiplier: 1.3}, curveSchedule(100*ms, 130*ms, 169*ms)},
		{"Exponential{Base: 1s, Multiplier: 1}", Exponential{Base: s, Multiplier: 1}, curveSchedule(s, s, s)},
		{"Exponential{}", Exponential{}, []curveCase{{1, 0, 0, 0}, {10000, 0, 0, 0}, {math.MaxInt, 0, 0.9, 0}}},
		{"Exponential{Base: 100ms, Cap: 20s}", Exponential{Base: 100 * ms, Cap: 20 * s}, []curveCase{
			{0, 0, 0, 100 * ms}, {-1, 0, 0, 100 * ms}, {math.MinInt, 0, 0, 100 * ms},
			{62, 0, 0, 20 * s}, {63, 0, 0, 20 * s}, {64, 0, 0, 20 * s}, {65, 0, 0, 20 * s},
			{10000, 0, 0, 20 * s}, {math.MaxInt32, 0, 0, 20 * s}, {math.MaxInt, 0, 0, 20 * s},
		}},
		{"Exponential{Base: 1ns}", Exponential{Base: 1}, []curveCase{
			{63, 0, 0, 1 << 62}, {64, 0, 0, maxDuration}, {65, 0, 0, maxDuration},
			{10000, 0, 0, maxDuration}, {math.MaxInt, 0, 0, maxDuration},
		}},
		// AWS "Full Jitter": random_between(0, min(Cap, Base*2^(n-1))).
		{"Exponential{Base: 1s, Cap: 10s, Jitter: FullJitter}", Exponential{Base: s, Cap: 10 * s, Jitter: FullJitter}, []curveCase{
			{1, 0, 0, 0}, {1, 0, 0.5, 500 * ms}, {3, 0, 0.25, s}, {10, 0, 0.5, 5 * s}, {10000, 0, 0.5, 5 * s},
		}},
		// AWS "Equal Jitter": t/2 + random_between(0, t/2), t = min(Cap, Base*2^(n-1)).
		{"Exponential{Base: 1s, Cap: 10s, Jitter: EqualJitter}", Exponential{Base: s, Cap: 10 * s, Jitter: EqualJitter}, []curveCase{
			{1, 0, 0, 500 * ms}, {1, 0, 0.5, 750 * ms}, {3, 0, 0.5, 3 * s}, {10, 0, 0, 5 * s}, {10, 0, 0.5, 7500 * ms},
		}},
		{"Exponential{Base: 1s, Cap: 10s, Jitter: Spread(0.5)}", Exponential{Base: s, Cap: 10 * s, Jitter: Spread(0.5)}, []curveCase{
			{1, 0, 0.5, 1250 * ms}, {3, 0, 0.5, 5 * s}, {4, 0, 0.5, 10 * s}, {4, 0, 0, 8 * s}, {100, 0, 0.9, 10 * s},
		}},
		{"Exponential{Base: 1s, Jitter: Spread(0.5)}", Exponential{Base: s, Jitter: Spread(0.5)}, []curveCase{
			{63, 0, 0.9, maxDuration}, {math.MaxInt, 0, 0.9, maxDuration},
		}},
		{"Exponential{Base: 1s, Cap: 10s, Jitter: FullJitter} with u out of range", Exponential{Base: s, Cap: 10 * s, Jitter: FullJitter}, []curveCase{
			{2, 0, -1, 0}, {2, 0, math.NaN(), 0}, {2, 0, math.Inf(-1), 0},
			{2, 0, 1, 2*s - 1}, {2, 0, 7, 2*s - 1}, {2, 0, math.Inf(1), 2*s - 1},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { checkCurveDelays(t, tt.name, tt.b, tt.cases) })
	}
}

func TestBackoffDecorrelated(t *testing.T) {
	const s, ms = time.Second, time.Millisecond
	tests := []struct {
		name  string
		b     Decorrelated
		cases []curveCase
	}{
		// AWS "Decorrelated Jitter": min(Cap, random_between(Base, 3*prev)),
		// prev starting at Base.
		{"Decorrelated{Base: 1s, Cap: 10s}", Decorrelated{Base: s, Cap: 10 * s}, []curveCase{
			{1, 0, 0, s}, {1, 0, 0.5, 2 * s}, {1, 0, 0.25, 1500 * ms},
			{2, 2 * s, 0.5, 3500 * ms}, {3, 3500 * ms, 0.5, 5750 * ms}, {4, 5750 * ms, 0.5, 9125 * ms},
			{5, 9125 * ms, 0.5, 10 * s}, {6, 10 * s, 0.5, 10 * s}, {6, 10 * s, 0, s},
			{2, 500 * ms, 0.5, 2 * s}, {2, -s, 0.5, 2 * s}, {2, maxDuration, 0.5, 10 * s},
			{2, s, -1, s}, {2, s, math.NaN(), s}, {2, s, 1, 3*s - 1},
		}},
		{"Decorrelated{Base: 1s}", Decorrelated{Base: s}, []curveCase{
			{2, 1 << 62, 0.9, maxDuration}, {2, maxDuration, 0.999, maxDuration}, {2, maxDuration, 0, s},
			{2, 1 << 40, 0.5, s + (3<<40-s)/2},
		}},
		{"Decorrelated{}", Decorrelated{}, []curveCase{{1, 0, 0.5, 0}, {2, 2 * s, 0.5, 3 * s}}},
		{"Decorrelated{Base: 2s, Cap: 1s}", Decorrelated{Base: 2 * s, Cap: s}, []curveCase{{1, 0, 0, s}, {1, 0, 0.9, s}}},
		{"Decorrelated{Base: -1s, Cap: 1s}", Decorrelated{Base: -s, Cap: s}, []curveCase{{1, 0, 0.9, 0}, {2, s, 0.5, s}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { checkCurveDelays(t, tt.name, tt.b, tt.cases) })
	}
}

func TestBackoffFunc(t *testing.T) {
	const s, ms = time.Second, time.Millisecond
	f := BackoffFunc(func(n int, prev time.Duration, u float64) time.Duration {
		return time.Duration(n)*s + prev + time.Duration(u*1000)*ms
	})
	checkCurveDelays(t, "BackoffFunc", f, []curveCase{
		{1, 0, 0, s}, {2, s, 0.5, 3500 * ms}, {-3, 0, 0, 0},
	})
	if err := f.Validate(); err != nil {
		t.Errorf("BackoffFunc.Validate() = %v; want nil", err)
	}

	var nilFunc BackoffFunc
	checkCurveDelays(t, "BackoffFunc(nil)", nilFunc, []curveCase{{1, 0, 0.5, 0}})
	if err := nilFunc.Validate(); err == nil || !strings.HasPrefix(err.Error(), "retry: BackoffFunc") {
		t.Errorf("BackoffFunc(nil).Validate() = %v; want an error naming BackoffFunc", err)
	}
}

// validatingBackoff is what the curves have besides Delay.
type validatingBackoff interface {
	Backoff
	Validate() error
}

func TestBackoffValidate(t *testing.T) {
	const s, ms = time.Second, time.Millisecond
	nan, inf := math.NaN(), math.Inf(1)
	tests := []struct {
		name string
		b    validatingBackoff
		want string // "" for valid; otherwise the whole error message
	}{
		{"Constant{}", Constant{}, ""},
		{"Constant{Base: 1s, Jitter: Spread(0.2)}", Constant{Base: s, Jitter: Spread(0.2)}, ""},
		{"Constant{Base: -1s}", Constant{Base: -s}, "retry: Constant.Base -1s is negative"},
		{"Constant{Base: 1s, Jitter: Spread(-1)}", Constant{Base: s, Jitter: Spread(-1)}, ""},

		{"Linear{}", Linear{}, ""},
		{"Linear{Base: 1s, Cap: 1s}", Linear{Base: s, Cap: s}, ""},
		{"Linear{Base: -1s}", Linear{Base: -s}, "retry: Linear.Base -1s is negative"},
		{"Linear{Cap: -1s}", Linear{Cap: -s}, "retry: Linear.Cap -1s is negative"},
		{"Linear{Base: 2s, Cap: 1s}", Linear{Base: 2 * s, Cap: s}, "retry: Linear.Cap 1s is less than Base 2s"},
		{"Linear{Base: 1s, Jitter: Spread(NaN)}", Linear{Base: s, Jitter: Spread(nan)}, ""},

		{"Fibonacci{Base: 1s, Jitter: FullJitter}", Fibonacci{Base: s, Jitter: FullJitter}, ""},
		{"Fibonacci{Base: -1ns}", Fibonacci{Base: -1}, "retry: Fibonacci.Base -1ns is negative"},
		{"Fibonacci{Base: 1s, Cap: 999ms}", Fibonacci{Base: s, Cap: 999 * ms}, "retry: Fibonacci.Cap 999ms is less than Base 1s"},
		{"Fibonacci{Base: 1s, Jitter: Spread(+Inf)}", Fibonacci{Base: s, Jitter: Spread(inf)}, ""},

		{"Polynomial{Base: 1s, Degree: 2}", Polynomial{Base: s, Degree: 2}, ""},
		{"Polynomial{Base: 1s, Degree: 0}", Polynomial{Base: s}, ""},
		{"Polynomial{Base: 1s, Degree: -1}", Polynomial{Base: s, Degree: -1}, "retry: Polynomial.Degree -1 is negative"},
		{"Polynomial{Base: 1s, Degree: NaN}", Polynomial{Base: s, Degree: nan}, "retry: Polynomial.Degree NaN is not a finite number"},
		{"Polynomial{Base: 1s, Degree: +Inf}", Polynomial{Base: s, Degree: inf}, "retry: Polynomial.Degree +Inf is not a finite number"},
		{"Polynomial{Base: 1s, Cap: -1s}", Polynomial{Base: s, Cap: -s, Degree: 2}, "retry: Polynomial.Cap -1s is negative"},

		{"Exponential{}", Exponential{}, ""},
		{"Exponential{Base: 100ms, Cap: 20s, Jitter: FullJitter}", Exponential{Base: 100 * ms, Cap: 20 * s, Jitter: FullJitter}, ""},
		{"Exponential{Base: 1s, Multiplier: 1}", Exponential{Base: s, Multiplier: 1}, ""},
		{"Exponential{Base: 1s, Multiplier: 0.5}", Exponential{Base: s, Multiplier: 0.5}, "retry: Exponential.Multiplier 0.5 is less than 1"},
		{"Exponential{Base: 1s, Multiplier: -2}", Exponential{Base: s, Multiplier: -2}, "retry: Exponential.Multiplier -2 is less than 1"},
		{"Exponential{Base: 1s, Multiplier: NaN}", Exponential{Base: s, Multiplier: nan}, "retry: Exponential.Multiplier NaN is not a finite number"},
		{"Exponential{Base: 1s, Multiplier: +Inf}", Exponential{Base: s, Multiplier: inf}, "retry: Exponential.Multiplier +Inf is not a finite number"},
		{"Exponential{Base: -100ms}", Exponential{Base: -100 * ms}, "retry: Exponential.Base -100ms is negative"},
		{"Exponential{Base: 100ms, Cap: 50ms}", Exponential{Base: 100 * ms, Cap: 50 * ms}, "retry: Exponential.Cap 50ms is less than Base 100ms"},
		{"Exponential{Base: 1s, Jitter: Spread(-0.1)}", Exponential{Base: s, Jitter: Spread(-0.1)}, ""},

		{"Decorrelated{Base: 1s, Cap: 10s}", Decorrelated{Base: s, Cap: 10 * s}, ""},
		{"Decorrelated{Base: 1ns}", Decorrelated{Base: 1}, ""},
		{"Decorrelated{}", Decorrelated{}, "retry: Decorrelated.Base 0s is not positive (3 times 0 is 0 forever)"},
		{"Decorrelated{Base: -1s}", Decorrelated{Base: -s}, "retry: Decorrelated.Base -1s is not positive (3 times 0 is 0 forever)"},
		{"Decorrelated{Base: 1s, Cap: -1s}", Decorrelated{Base: s, Cap: -s}, "retry: Decorrelated.Cap -1s is negative"},
		{"Decorrelated{Base: 2s, Cap: 1s}", Decorrelated{Base: 2 * s, Cap: s}, "retry: Decorrelated.Cap 1s is less than Base 2s"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.b.Validate()
			if tt.want == "" {
				assert.NoError(t, err, "%s.Validate()", tt.name)
				return
			}
			require.Error(t, err, "%s.Validate()", tt.name)
			assert.Equal(t, tt.want, err.Error(), "%s.Validate()", tt.name)
		})
	}
}

// hostileJitter returns values a Jitter should not, to show that the curve's
// second cap holds them in.
func hostileJitter(d time.Duration, u float64) time.Duration {
	switch {
	case u < 0.3:
		return -d - 1
	case u < 0.6:
		return maxDuration
	}
	return math.MinInt64
}

// boundedCurve is a valid curve whose delays must stay within [0, limit].
type boundedCurve struct {
	name  string
	b     validatingBackoff
	limit time.Duration
}

// boundedCurves returns valid curves of every kind, with and without a cap,
// with every Jitter of this package and one that misbehaves.
func boundedCurves() []boundedCurve {
	const s, ms = time.Second, time.Millisecond
	type curve = boundedCurve
	var curves []curve
	jitters := []struct {
		name string
		j    Jitter
	}{{"nil", nil}, {"FullJitter", FullJitter}, {"EqualJitter", EqualJitter}, {"Spread(0.2)", Spread(0.2)}, {"Spread(1e9)", Spread(1e9)}, {"hostile", hostileJitter}}
	for _, limit := range []time.Duration{0, 20 * s, maxDuration} {
		for _, j := range jitters {
			suffix := "{Cap: " + limit.String() + ", Jitter: " + j.name + "}"
			curves = append(curves,
				curve{"Linear" + suffix, Linear{Base: 100 * ms, Cap: limit, Jitter: j.j}, curveLimit(limit)},
				curve{"Fibonacci" + suffix, Fibonacci{Base: 100 * ms, Cap: limit, Jitter: j.j}, curveLimit(limit)},
				curve{"Polynomial" + suffix, Polynomial{Base: 100 * ms, Cap: limit, Degree: 3, Jitter: j.j}, curveLimit(limit)},
				curve{"Exponential" + suffix, Exponential{Base: 100 * ms, Cap: limit, Jitter: j.j}, curveLimit(limit)},
				curve{"Exponential/1.5" + suffix, Exponential{Base: 1, Cap: limit, Multiplier: 1.5, Jitter: j.j}, curveLimit(limit)},
			)
		}
		curves = append(curves, curve{"Decorrelated{Cap: " + limit.String() + "}", Decorrelated{Base: 100 * ms, Cap: limit}, curveLimit(limit)})
	}
	for _, j := range jitters {
		curves = append(curves, curve{"Constant{Jitter: " + j.name + "}", Constant{Base: 100 * ms, Jitter: j.j}, maxDuration})
	}
	return curves
}

func TestBackoffBounds(t *testing.T) {
	const s, ms = time.Second, time.Millisecond
	// Every n from 1 to 10,000 with a few u, and the edges with every u and prev.
	type call struct {
		n    int
		prev time.Duration
		u    float64
	}
	var calls []call
	for n := 1; n <= 10000; n++ {
		for _, u := range []float64{0, 0.5, belowOne} {
			calls = append(calls, call{n, 0, u})
		}
	}
	for _, n := range []int{math.MinInt, -1, 0, 1, 62, 63, 64, 65, 10000, math.MaxInt32, math.MaxInt - 1, math.MaxInt} {
		for _, u := range []float64{0, 0.1, 0.5, 0.9, belowOne, 1, 2, -1, math.NaN(), math.Inf(1), math.Inf(-1)} {
			for _, prev := range []time.Duration{0, -s, 100 * ms, 20 * s, maxDuration} {
				calls = append(calls, call{n, prev, u})
			}
		}
	}
	for _, c := range boundedCurves() {
		t.Run(c.name, func(t *testing.T) {
			require.NoError(t, c.b.Validate())
			for _, k := range calls {
				if d := c.b.Delay(k.n, k.prev, k.u); d < 0 || d > c.limit {
					t.Fatalf("%s.Delay(%d, %v, %v) = %v; want within [0, %v]", c.name, k.n, k.prev, k.u, d, c.limit)
				}
			}
		})
	}
}

// TestBackoffSaturates checks that with no cap, growing curves reach the
// largest time.Duration and stay there instead of overflowing.
func TestBackoffSaturates(t *testing.T) {
	const s, ms = time.Second, time.Millisecond
	curves := []struct {
		name string
		b    Backoff
	}{
		{"Linear{Base: 1h}", Linear{Base: time.Hour}},
		{"Fibonacci{Base: 1ns}", Fibonacci{Base: 1}},
		{"Polynomial{Base: 1s, Degree: 2}", Polynomial{Base: s, Degree: 2}},
		{"Exponential{Base: 100ms}", Exponential{Base: 100 * ms}},
		{"Exponential{Base: 100ms, Jitter: EqualJitter}", Exponential{Base: 100 * ms, Jitter: EqualJitter}},
	}
	for _, c := range curves {
		t.Run(c.name, func(t *testing.T) {
			var last time.Duration
			for _, n := range []int{1, 2, 10, 62, 63, 64, 65, 100, 10000, math.MaxInt32, math.MaxInt} {
				d := c.b.Delay(n, 0, belowOne)
				if d < last {
					t.Fatalf("%s.Delay(%d, 0, %v) = %v; want at least %v (the delay of a smaller n)", c.name, n, belowOne, d, last)
				}
				last = d
			}
			if want := c.b.Delay(math.MaxInt, 0, 0.5); want < maxDuration/2 {
				t.Errorf("%s.Delay(%d, 0, 0.5) = %v; want at least %v", c.name, math.MaxInt, want, maxDuration/2)
			}
		})
	}
	for _, n := range []int{64, 10000, math.MaxInt} {
		if got := (Exponential{Base: 100 * ms}).Delay(n, 0, 0); got != maxDuration {
			t.Errorf("Exponential{Base: 100ms}.Delay(%d, 0, 0) = %v; want %v", n, got, maxDuration)
		}
	}
}

// FuzzBackoff checks that valid curves stay within [0, Cap] (or the largest
// time.Duration with no cap), that invalid ones do too and never panic, and
// that valid curves without jitter never shrink as n grows.
func FuzzBackoff(f *testing.F) {
	const s, ms = time.Second, time.Millisecond
	f.Add(uint8(4), int64(100*ms), int64(20*s), 0.0, 10000, int64(0), 0.5, uint8(1), 0.0)
	f.Add(uint8(4), int64(1), int64(0), 2.0, math.MaxInt, int64(0), 0.999, uint8(3), 0.2)
	f.Add(uint8(3), int64(s), int64(0), 3.0, math.MaxInt32, int64(0), 0.5, uint8(2), 0.0)
	f.Add(uint8(2), int64(1), int64(0), 0.0, 93, int64(0), 0.5, uint8(0), 0.0)
	f.Add(uint8(5), int64(s), int64(10*s), 0.0, 3, int64(maxDuration), 0.7, uint8(0), 0.0)
	f.Add(uint8(5), int64(0), int64(0), 0.0, 1, int64(0), math.NaN(), uint8(0), 0.0)
	f.Add(uint8(4), int64(-s), int64(-s), 0.5, -5, int64(-s), -1.0, uint8(4), math.NaN())
	f.Add(uint8(3), int64(s), int64(s/2), math.Inf(1), 64, int64(0), 2.0, uint8(3), math.Inf(1))
	f.Add(uint8(0), int64(s), int64(0), 0.0, 1, int64(0), 0.5, uint8(3), 1e300)
	f.Fuzz(func(t *testing.T, kind uint8, base, limit int64, param float64, n int, prev int64, u float64, jitterKind uint8, ratio float64) {
		var j Jitter
		switch jitterKind % 5 {
		case 1:
			j = FullJitter
		case 2:
			j = EqualJitter
		case 3:
			j = Spread(ratio)
		case 4:
			j = hostileJitter
		}
		b, c := time.Duration(base), time.Duration(limit)
		var curve validatingBackoff
		switch kind % 6 {
		case 0:
			curve, c = Constant{Base: b, Jitter: j}, 0
		case 1:
			curve = Linear{Base: b, Cap: c, Jitter: j}
		case 2:
			curve = Fibonacci{Base: b, Cap: c, Jitter: j}
		case 3:
			curve = Polynomial{Base: b, Cap: c, Degree: param, Jitter: j}
		case 4:
			curve = Exponential{Base: b, Cap: c, Multiplier: param, Jitter: j}
		default:
			curve = Decorrelated{Base: b, Cap: c}
		}
		err := curve.Validate() // must not panic either
		if err != nil && !strings.HasPrefix(err.Error(), "retry: ") {
			t.Fatalf("%#v.Validate() = %q; want the prefix \"retry: \"", curve, err)
		}
		upper := curveLimit(c) // for invalid curves with Cap >= 0 too
		d := curve.Delay(n, time.Duration(prev), u)
		if d < 0 || d > upper {
			t.Fatalf("%#v.Delay(%d, %v, %v) = %v; want within [0, %v] (Validate: %v)", curve, n, time.Duration(prev), u, d, upper, err)
		}
		if err != nil {
			return
		}
		if dc, ok := curve.(Decorrelated); ok && d < min(dc.Base, upper) {
			t.Fatalf("%#v.Delay(%d, %v, %v) = %v; want at least Base", curve, n, time.Duration(prev), u, d)
		}
		if j == nil && n < math.MaxInt {
			if _, ok := curve.(Decorrelated); !ok {
				if next := curve.Delay(n+1, time.Duration(prev), u); next < d {
					t.Fatalf("%#v.Delay(%d, ...) = %v; want at least Delay(%d, ...) = %v", curve, n+1, next, n, d)
				}
			}
		}
	})
}
