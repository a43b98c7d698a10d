package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/aws"
	sdkretry "github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/route53"
)

// newSDKClient returns a Route 53 client that retries with the SDK's own
// retryer in mode ("standard" or "adaptive"), as a user of the SDK alone
// would, with MaxAttempts raised to this program's maxAttempts so that
// the calls are not cut short by an attempt count the Transport does not
// have. Everything else is the SDK's default: its backoff (full jitter,
// capped at 20s), its retry quota (500 tokens, 5 per retry) and, in
// adaptive mode, its client-side rate limiter (CUBIC).
func newSDKClient(endpoint, accessKey, secretKey, mode string, rt http.RoundTripper) *route53.Client {
	attempts := func(o *sdkretry.StandardOptions) { o.MaxAttempts = maxAttempts }
	var retryer aws.Retryer
	if mode == "adaptive" {
		retryer = sdkretry.NewAdaptiveMode(func(o *sdkretry.AdaptiveModeOptions) {
			o.StandardOptions = append(o.StandardOptions, attempts)
		})
	} else {
		retryer = sdkretry.NewStandard(attempts)
	}
	return route53.New(route53.Options{
		Region:       "us-east-1",
		BaseEndpoint: aws.String(endpoint),
		Credentials:  credentials.NewStaticCredentialsProvider(accessKey, secretKey, ""),
		Retryer:      retryer,
		HTTPClient:   &http.Client{Transport: rt},
	})
}

// noteInvocation is a RoundTripper that records in each request's call
// the SDK's invocation ID, which the server's log is searched by.
type noteInvocation struct{ base http.RoundTripper }

func (n noteInvocation) RoundTrip(req *http.Request) (*http.Response, error) {
	if c := callOf(req); c != nil {
		c.invocation = req.Header.Get("Amz-Sdk-Invocation-Id")
	}
	return n.base.RoundTrip(req)
}

// runSDK is run with the SDK's retryer instead of the Transport: each
// call's attempts, and the answer that made it retry, are read from the
// server's log by the call's invocation ID, since no hook of the
// Transport sees them.
func runSDK(ctx context.Context, out io.Writer, o options, fake *fakeRoute53, url string, res *result) (*result, error) {
	base := http.DefaultTransport.(*http.Transport).Clone()
	defer base.CloseIdleConnections()
	fmt.Fprintf(out, "Settings: the AWS SDK's %s retry mode, MaxAttempts %d, its other defaults; no retry.Transport\n", o.sdk, maxAttempts)
	client := newSDKClient(url, accessKey, secretKey, o.sdk, noteInvocation{base})
	return calls(ctx, out, o, fake, url, client, res, func(c *call) { fillFromLog(c, fake.Log()) })
}

// fillFromLog sets c's retries from the requests the server logged under
// c's invocation ID: each request after the first is a retry, after the
// answer to the one before, which arrived the time given as its wait
// earlier (the SDK's backoff and rate limiter, and a round trip).
func fillFromLog(c *call, log []served) {
	if c.invocation == "" {
		return
	}
	var mine []served
	for _, s := range log {
		if s.Invocation == c.invocation {
			mine = append(mine, s)
		}
	}
	slices.SortFunc(mine, func(a, b served) int { return a.At.Compare(b.At) })
	c.retries = c.retries[:0]
	for i := 1; i < len(mine); i++ {
		why := mine[i-1].Code
		if why == "" {
			why = strconv.Itoa(mine[i-1].Status)
		}
		c.retries = append(c.retries, retryNote{attempt: i, why: why, delay: mine[i].At.Sub(mine[i-1].At)})
	}
}
