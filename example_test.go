package retry_test

import (
	"fmt"
	"time"

	"github.com/backoff-jitter/retry"
)

// printDelays prints b's delays for retries 1 to n, passing u to every call
// and each delay as prev to the next.
func printDelays(b retry.Backoff, n int, u float64) {
	var prev time.Duration
	for i := 1; i <= n; i++ {
		prev = b.Delay(i, prev, u)
		if i > 1 {
			fmt.Print(" ")
		}
		fmt.Print(prev)
	}
	fmt.Println()
}

func ExampleExponential() {
	// The Transport's default curve without its jitter: doubling from
	// 100ms, capped at 20s.
	b := retry.Exponential{Base: 100 * time.Millisecond, Cap: 20 * time.Second}
	printDelays(b, 10, 0)
	fmt.Println(b.Delay(10000, 0, 0)) // no overflow, however many retries

	// Output:
	// 100ms 200ms 400ms 800ms 1.6s 3.2s 6.4s 12.8s 20s 20s
	// 20s
}

func ExampleExponential_fullJitter() {
	// The AWS "Full Jitter": random_between(0, min(Cap, Base*2^(n-1))).
	b := retry.Exponential{Base: time.Second, Cap: 10 * time.Second, Jitter: retry.FullJitter}
	for _, u := range []float64{0, 0.25, 0.5, 0.75} {
		fmt.Printf("u=%.2f: ", u)
		printDelays(b, 6, u)
	}

	// Output:
	// u=0.00: 0s 0s 0s 0s 0s 0s
	// u=0.25: 250ms 500ms 1s 2s 2.5s 2.5s
	// u=0.50: 500ms 1s 2s 4s 5s 5s
	// u=0.75: 750ms 1.5s 3s 6s 7.5s 7.5s
}

func ExampleExponential_Validate() {
	for _, b := range []retry.Exponential{
		{Base: 100 * time.Millisecond, Cap: 20 * time.Second},
		{Base: 100 * time.Millisecond, Multiplier: 0.5},
		{Base: time.Second, Cap: 500 * time.Millisecond},
		{Base: -time.Second},
	} {
		fmt.Println(b.Validate())
	}

	// Output:
	// <nil>
	// retry: Exponential.Multiplier 0.5 is less than 1
	// retry: Exponential.Cap 500ms is less than Base 1s
	// retry: Exponential.Base -1s is negative
}

func ExampleConstant() {
	printDelays(retry.Constant{Base: time.Second}, 4, 0)

	// Output:
	// 1s 1s 1s 1s
}

func ExampleLinear() {
	printDelays(retry.Linear{Base: time.Second, Cap: 4 * time.Second}, 6, 0)

	// Output:
	// 1s 2s 3s 4s 4s 4s
}

func ExampleFibonacci() {
	printDelays(retry.Fibonacci{Base: time.Second, Cap: time.Minute}, 12, 0)

	// Output:
	// 1s 1s 2s 3s 5s 8s 13s 21s 34s 55s 1m0s 1m0s
}

func ExamplePolynomial() {
	fmt.Print("quadratic: ")
	printDelays(retry.Polynomial{Base: time.Second, Degree: 2}, 5, 0)
	fmt.Print("cubic:     ")
	printDelays(retry.Polynomial{Base: time.Second, Degree: 3}, 5, 0)

	// Output:
	// quadratic: 1s 4s 9s 16s 25s
	// cubic:     1s 8s 27s 1m4s 2m5s
}

func ExampleDecorrelated() {
	// The AWS "Decorrelated Jitter": min(Cap, random_between(Base, 3*prev)),
	// with prev starting at Base. Each delay is passed as prev to the next.
	b := retry.Decorrelated{Base: time.Second, Cap: 10 * time.Second}
	for _, u := range []float64{0, 0.5, 0.9} {
		fmt.Printf("u=%.1f: ", u)
		printDelays(b, 6, u)
	}

	// Output:
	// u=0.0: 1s 1s 1s 1s 1s 1s
	// u=0.5: 2s 3.5s 5.75s 9.125s 10s 10s
	// u=0.9: 2.8s 7.66s 10s 10s 10s 10s
}

func ExampleFullJitter() {
	for _, u := range []float64{0, 0.25, 0.9} {
		fmt.Println(retry.FullJitter(time.Second, u))
	}

	// Output:
	// 0s
	// 250ms
	// 900ms
}

func ExampleEqualJitter() {
	for _, u := range []float64{0, 0.5, 0.9} {
		fmt.Println(retry.EqualJitter(time.Second, u))
	}

	// Output:
	// 500ms
	// 750ms
	// 950ms
}

func ExampleSpread() {
	// Up to 20% more than the curve's delay, as seed 004's
	// cappedDelay + random*cappedDelay*0.2; the Cap still holds.
	b := retry.Exponential{Base: time.Second, Cap: 30 * time.Second, Jitter: retry.Spread(0.2)}
	printDelays(b, 7, 0.5)

	// Output:
	// 1.1s 2.2s 4.4s 8.8s 17.6s 30s 30s
}

func ExampleBackoffFunc() {
	// A schedule given as a table; past its end the last delay repeats.
	table := []time.Duration{time.Second, 5 * time.Second, 30 * time.Second}
	b := retry.BackoffFunc(func(n int, _ time.Duration, _ float64) time.Duration {
		return table[min(max(n, 1), len(table))-1]
	})
	printDelays(b, 5, 0)

	// Output:
	// 1s 5s 30s 30s 30s
}
