package main

import (
	"errors"
	"net/http"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/route53"

	"github.com/backoff-jitter/retry"
	"github.com/backoff-jitter/retry/awsretry"
	"github.com/backoff-jitter/retry/pace"
)

// Route 53 allows five API requests a second per AWS account and answers
// the rest with HTTP 400 Throttling. When ten goroutines share that rate,
// the time a call must wait is set by the queue of callers ahead of it, not
// by a server recovering: about a second on average, and nearly the whole
// run for the unluckiest call, because a caller that gets through sends its
// next calls at once while the others sleep. The Transport's defaults (4
// attempts; waits of at most 100ms, 200ms and 400ms, 0.35s in all on
// average) give up long before that: with them (go run . -defaults) only 7
// of the 50 calls succeed. Some 27 run out of attempts within 1.5 seconds,
// and the look at a change that failed is never made.
//
// These are the settings this example uses, with a Pacer keyed by the
// account (newPacer, which learns the rate from the throttling): retries
// alone get a short burst of calls through, but callers that keep Route 53
// busy, 50 goroutines making 250 calls, are throttled some 40 times a
// second, and the failed throttled retries empty the retry budget
// (newBudget), which then returns each throttle at once: about 100 calls
// fail (go run . -workers 50 -pacer=false). The budget is right to stop a
// storm; the Pacer keeps the retries from becoming one, and every call
// succeeds, near the time 5 requests a second allow. It also gives the
// fairness retries alone cannot. docs/route53.md has the measurements.
const (
	// callTimeout bounds each call, all its attempts and waits included.
	// It must stay well inside the 5 minutes a SigV4 signature lasts,
	// because every replay reuses the signature the SDK made before the
	// first attempt: a replay that arrives more than 5 minutes after it
	// is refused (403 "Signature expired"). The Transport never starts a
	// wait that would end past the deadline; it returns the last
	// throttled response instead, which the SDK reports as the
	// Throttling error.
	callTimeout = time.Minute

	// maxAttempts: 20 attempts, 19 retries, whose waits with
	// route53Backoff add up to 14–28 seconds (21 on average): patience
	// for a queue that lasts the whole run, and well inside callTimeout.
	// In 40 runs of this program the unluckiest call needed 12 retries.
	maxAttempts = 20

	// maxRetryAfter caps a server-requested wait. Route 53 sends no
	// Retry-After, but a proxy in front of it may; the default, 5
	// minutes, is the whole life of a signature.
	maxRetryAfter = 20 * time.Second
)

// route53Backoff doubles from 400ms to a cap of 1.6s, with equal jitter:
// the wait before retry n is uniform in [d/2, d] for d = min(1.6s,
// 400ms·2^(n-1)): 0.2–0.4s, 0.4–0.8s, then 0.8–1.6s from the third retry
// on.
//
//   - The floor, d/2, keeps a caller from coming back sooner than 200ms,
//     the interval at which a window of 5 requests a second frees a slot.
//   - The jitter above it keeps callers throttled together from coming
//     back together.
//   - The low cap keeps waiting callers trying about once a second, so
//     that they take the slots as they free instead of sleeping through
//     them: the 50 calls take 11–13 seconds, near the 9 that 5 requests a
//     second need. With a cap of 3.2s they took 12–18 seconds, and with
//     10 attempts some calls ran out.
var route53Backoff = retry.Exponential{
	Base:   400 * time.Millisecond,
	Cap:    1600 * time.Millisecond,
	Jitter: retry.EqualJitter,
}

// newBudget returns the retry budget of one Route 53 client. The default
// TokenBucket charges 5 of its 500 tokens for each throttled retry that
// fails, and refunds only the retries that succeed: when callers queue for
// a rate limit, most throttled retries fail, and a client that keeps Route
// 53 busy empties the bucket in a few hundred calls, after which throttles
// are returned at once. A throttle costs Route 53 nothing, so here it costs
// 1; failures that may have cost the server work (500s, timeouts) keep
// their price, and a Route 53 that is down still stops the retries.
func newBudget() *retry.TokenBucket {
	return &retry.TokenBucket{ThrottledCost: 1}
}

// newTransport returns the retry layer for Route 53: AWS's throttling codes
// (Route 53's Throttling and PriorRequestNotComplete come as HTTP 400)
// are retried for every method, POST included, since the server refused
// them without acting on them, and every replay is signed anew with creds.
// opts are applied last, so they can add hooks or change a setting.
func newTransport(budget retry.Budget, creds aws.CredentialsProvider, opts ...retry.Option) *retry.Transport {
	return retry.New(nil, append([]retry.Option{
		retry.WithBudget(budget),
		retry.WithClassifier(awsretry.Classify),
		retry.WithMaxAttempts(maxAttempts),
		retry.WithBackoff(route53Backoff),
		retry.WithMaxRetryAfter(maxRetryAfter),
		// The server sees which attempt it is answering; set before
		// signAgain, which signs it with the rest.
		retry.WithAttemptHeader("X-Retry-Attempt"),
		retry.WithBeforeAttempt(signAgain(creds, time.Now)),
	}, opts...)...)
}

// signAgain returns the BeforeAttempt hook that signs each replay anew,
// with the SDK's own signer: the SDK signs a request once, before the
// first attempt, and a replay that carries that signature more than five
// minutes later is refused ("Signature expired"). The SDK passes the
// payload's hash, which the signature covers, in the request's context.
// now is the signing clock.
func signAgain(creds aws.CredentialsProvider, now func() time.Time) func(retry.Prepare) error {
	signer := v4.NewSigner()
	return func(p retry.Prepare) error {
		if p.Attempt == 1 {
			return nil // the SDK has just signed it
		}
		ctx := p.Request.Context()
		hash := v4.GetPayloadHash(ctx)
		if hash == "" {
			return errors.New("route53: the request carries no payload hash to sign a replay with")
		}
		c, err := creds.Retrieve(ctx)
		if err != nil {
			return err
		}
		return signer.SignHTTP(ctx, c, p.Request, hash, "route53", "us-east-1", now())
	}
}

// newClient returns a Route 53 client that sends through rt, with the
// SDK's own retries turned off: the SDK signs each request once, and rt,
// below the signer, replays it, signed anew (signAgain).
func newClient(endpoint, accessKey, secretKey string, rt http.RoundTripper) *route53.Client {
	return route53.New(route53.Options{
		Region:       "us-east-1", // Route 53 is global and signs for us-east-1
		BaseEndpoint: aws.String(endpoint),
		Credentials:  credentials.NewStaticCredentialsProvider(accessKey, secretKey, ""),
		Retryer:      aws.NopRetryer{}, // one attempt: the retries are rt's
		HTTPClient:   &http.Client{Transport: rt},
	})
}

// newPacer returns the Pacer: one rate for each account, as Route 53
// limits, learned from its throttling (awsretry.NewPacer: keyed by the
// signature's access key ID, with slow start). Share one Pacer among all
// the clients (and Transports) of an account. PriorRequestNotComplete is
// replayed like a throttle, but says a change to the zone is still
// pending, whatever the rate: awsretry.RateRefusal, the Pacer's Refusal,
// keeps it from learning a rate from it.
func newPacer() *pace.Pacer { return awsretry.NewPacer() }
