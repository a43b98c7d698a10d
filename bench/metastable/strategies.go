package main

import (
	"fmt"
	"io"
	"net/http"
	"time"

	sdkretry "github.com/aws/aws-sdk-go-v2/aws/retry"
	smithyhttp "github.com/aws/smithy-go/transport/http"
	"github.com/failsafe-go/failsafe-go/budget"
	"github.com/failsafe-go/failsafe-go/failsafehttp"
	"github.com/hashicorp/go-cleanhttp"

	"github.com/backoff-jitter/retry"
	"github.com/backoff-jitter/retry/awsretry"
	"github.com/backoff-jitter/retry/bench"
	"github.com/backoff-jitter/retry/internal/clock"
)

// Strategy is one way of retrying, one client shared by every call of a
// run, as one process's would be.
type Strategy struct {
	Name string
	// New returns the round tripper of the run's calls over base.
	New func(base http.RoundTripper) http.RoundTripper
}

// Strategies are the strategies compared, in the order of the report.
var Strategies = []Strategy{
	{Name: "no-retries", New: func(base http.RoundTripper) http.RoundTripper { return base }},
	{Name: "retryablehttp", New: bench.RetryablehttpDefaults},
	{Name: "failsafe", New: bench.FailsafeDefaults},
	{Name: "failsafe+budget", New: func(base http.RoundTripper) http.RoundTripper {
		return failsafehttp.NewRoundTripper(base, failsafehttp.NewRetryPolicyBuilder().WithBudget(budget.New()).Build())
	}},
	{Name: "aws-standard", New: func(base http.RoundTripper) http.RoundTripper {
		return &awsStandard{base: base, r: sdkretry.NewStandard()}
	}},
	{Name: "retry", New: func(base http.RoundTripper) http.RoundTripper { return retry.New(base) }},
	{Name: "retry+attempt-timeout", New: func(base http.RoundTripper) http.RoundTripper {
		return retry.New(base, retry.WithAttemptTimeout(300*time.Millisecond))
	}},
	// The shape the default budget was chosen over: a share of traffic,
	// Finagle's (20 % of the last 10 s's requests, plus 10 a second).
	{Name: "retry+share", New: withShareBudget},
	{Name: "retry+route53", New: func(base http.RoundTripper) http.RoundTripper {
		return retry.New(base, awsretry.Options()...)
	}},
}

// newBase is every strategy's base transport: cleanhttp's pooled one,
// keeping enough idle connections for the load, so that the run measures
// retries rather than dials.
func newBase() *http.Transport {
	t := cleanhttp.DefaultPooledTransport()
	t.MaxIdleConnsPerHost = 2_000
	return t
}

// awsStandard drives the AWS SDK for Go v2's standard retryer (v1.48: a
// retry costs 14 tokens, 5 after a throttle, of 500; a first attempt that
// succeeds adds 1; a retry that succeeds refunds its cost; backoff from a
// 50 ms base, 1 s after a throttle) through its public interface, as the
// SDK's retry middleware does, for a plain HTTP call.
type awsStandard struct {
	base http.RoundTripper
	r    *sdkretry.Standard
}

func (a *awsStandard) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx := req.Context()
	// The first attempt's token: outside the SDK's middleware the context
	// carries no attempt number, and this is the token of a first one.
	release, err := a.r.GetAttemptToken(ctx)
	if err != nil {
		return nil, err
	}
	for attempt := 1; ; attempt++ {
		resp, err := a.base.RoundTrip(req)
		opErr := sdkError(resp, err)
		_ = release(opErr)
		if opErr == nil || attempt >= a.r.MaxAttempts() || !a.r.IsErrorRetryable(opErr) || ctx.Err() != nil {
			return resp, err
		}
		next, tokenErr := a.r.GetRetryToken(ctx, opErr)
		if tokenErr != nil { // the retry quota is spent
			return resp, err
		}
		delay, delayErr := a.r.RetryDelay(attempt, opErr)
		if resp != nil {
			io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
			resp.Body.Close()
		}
		if delayErr != nil {
			return nil, delayErr
		}
		if err := clock.Sleep(ctx, delay); err != nil {
			return nil, err
		}
		release = next
	}
}

// sdkError is the error the SDK's retryer would see for an attempt: the
// transport's, or a response error carrying the status of a 429 or 5xx.
func sdkError(resp *http.Response, err error) error {
	switch {
	case err != nil:
		return err
	case resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= 500:
		return &smithyhttp.ResponseError{
			Response: &smithyhttp.Response{Response: resp},
			Err:      fmt.Errorf("http status %d", resp.StatusCode),
		}
	}
	return nil
}
