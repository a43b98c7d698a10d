// Package bench compares retry with its peers, side by side in one run:
// the bare cleanhttp transport, retry's Transport, hashicorp's
// go-retryablehttp v0.7.8 used as a RoundTripper, and failsafe-go v0.9.8's
// failsafehttp round tripper.
//
// The benchmarks (bench_test.go) send four scenarios through each, against
// a loopback server and against an in-memory base transport; peakrss
// measures the peak memory of one 64 MiB upload through each; storm
// replays a retry storm against a server of fixed capacity. run.sh runs
// them all and prints benchstat tables.
//
// This is a module of its own so that the peers never enter retry's go.mod.
package bench

import (
	"net/http"

	"github.com/backoff-jitter/retry"
	"github.com/failsafe-go/failsafe-go/failsafehttp"
	"github.com/hashicorp/go-retryablehttp"
)

// Lib is one retry layer under comparison.
type Lib struct {
	// Name is the value of the benchmarks' /lib= key.
	Name string
	// Wrap returns a round tripper that sends through base and retries
	// throttled responses (429, 503) up to 3 times with no wait, logging
	// nothing. The bare library returns base itself: no retries.
	Wrap func(base http.RoundTripper) http.RoundTripper
}

// Libs are the libraries compared, the bare transport first.
var Libs = []Lib{
	{Name: "bare", Wrap: func(base http.RoundTripper) http.RoundTripper { return base }},
	{Name: "retry", Wrap: WrapRetry},
	{Name: "retryablehttp", Wrap: WrapRetryablehttp},
	{Name: "failsafe", Wrap: WrapFailsafe},
}

// LibNamed returns the library called name.
func LibNamed(name string) (Lib, bool) {
	for _, l := range Libs {
		if l.Name == name {
			return l, true
		}
	}
	return Lib{}, false
}

// WrapRetry is retry's Transport with its defaults but for the backoff,
// which is zero, and a budget that refills what a request retried twice
// spends. (The default budget refunds a retry that works plus one token, so
// a server that throttles every request twice, as scenario S4's does, drains
// it by 4 tokens a request: after about 125 requests it rightly stops
// retrying. Here the budget's work is measured, not its refusal.)
func WrapRetry(base http.RoundTripper) http.RoundTripper {
	return retry.New(base,
		retry.WithBackoff(retry.Constant{}),
		retry.WithBudget(&retry.TokenBucket{Refill: 5}),
	)
}

// WrapRetryablehttp is go-retryablehttp's RoundTripper around a client of
// its defaults, with the logger off, no wait between attempts, and base as
// the transport of its inner http.Client.
func WrapRetryablehttp(base http.RoundTripper) http.RoundTripper {
	c := retryablehttp.NewClient()
	c.Logger = nil
	c.RetryWaitMin, c.RetryWaitMax = 0, 0
	c.RetryMax = 3
	c.HTTPClient = &http.Client{Transport: base}
	return &retryablehttp.RoundTripper{Client: c}
}

// WrapFailsafe is failsafehttp's round tripper with its HTTP retry policy:
// by default it retries 429 and most 5xx with no delay (Retry-After aside).
func WrapFailsafe(base http.RoundTripper) http.RoundTripper {
	policy := failsafehttp.NewRetryPolicyBuilder().WithMaxRetries(3).Build()
	return failsafehttp.NewRoundTripper(base, policy)
}

// RetryablehttpDefaults is go-retryablehttp's client with its defaults,
// its logger off and base as its inner client's transport: 4 retries
// after waits of 1, 2, 4 and 8 s, no jitter, Retry-After honoured on 429
// and 503. The storm and the open-loop benchmark run it as users would.
func RetryablehttpDefaults(base http.RoundTripper) http.RoundTripper {
	c := retryablehttp.NewClient()
	c.Logger = nil
	c.HTTPClient = &http.Client{Transport: base}
	return &retryablehttp.RoundTripper{Client: c}
}

// FailsafeDefaults is failsafehttp's retry policy with its defaults: 2
// retries, no delay, Retry-After honoured on 429 and 503.
func FailsafeDefaults(base http.RoundTripper) http.RoundTripper {
	return failsafehttp.NewRoundTripper(base, failsafehttp.NewRetryPolicyBuilder().Build())
}
