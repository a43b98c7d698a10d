// Package githubretry teaches [retry] the rate limits of GitHub's REST API,
// which refuses over-limit requests with 403 as often as with 429, a status
// that [retry.DefaultClassifier] takes as permanent.
//
// GitHub signals its limits three ways (REST API documentation, "Rate
// limits for the REST API"), and [Classify] answers [retry.Throttled] for
// each, on a 403 or a 429:
//
//   - the primary limit spent: X-RateLimit-Remaining: 0, with the time it
//     resets in X-RateLimit-Reset, in Unix seconds;
//   - a secondary limit with a Retry-After header, the seconds to wait;
//   - a secondary limit without one, whose error message says "secondary
//     rate limit": GitHub asks clients to wait at least a minute.
//
// Any other 403 (bad credentials, no permission) is left to the default
// classifier, which does not retry it. Throttled requests are retried for
// every method, since GitHub refused them without acting on them.
//
// The Transport must read X-RateLimit-Reset as a Unix time to wait for the
// primary limit's reset; [Options] sets that and the classifier:
//
//	client := &http.Client{Transport: retry.New(nil, githubretry.Options()...)}
//
// A reset further away than the Transport's MaxRetryAfter (5 minutes by
// default; GitHub's primary limit resets hourly) is not slept on: the 403
// is returned at once, and [retry.RetryAt] says when the limit resets. A
// secondary limit without Retry-After waits at least a minute
// ([WaitFloor]), or, when the request's deadline is nearer, is returned at
// once with the time to come back.
//
// GitHub publishes the quota that remains on every answer; the
// Transport's Pacer spreads what remains over the time to its reset, so
// that a client that would spend it early is not refused (see [Key]).
//
// With google/go-github, set the client's DisableRateLimitCheck: otherwise
// go-github itself refuses, without sending them, the requests that
// follow a response whose quota was spent, until the reset, and the
// Transport never sees them to wait for the reset:
//
//	client := github.NewClient(&http.Client{Transport: retry.New(nil, githubretry.Options()...)})
//	client.DisableRateLimitCheck = true
package githubretry

import (
	"bytes"
	"net/http"
	"strings"
	"time"

	"github.com/backoff-jitter/retry"
)

// peekLimit bounds how much of a 403's body Classify reads: GitHub's error
// documents are a few hundred bytes.
const peekLimit = 4 << 10

// SecondaryWait is how long GitHub asks a client to wait after a secondary
// rate limit that came without Retry-After: at least a minute.
const SecondaryWait = time.Minute

// kind is what a response says of GitHub's rate limits.
type kind uint8

const (
	noLimit         kind = iota
	primary              // X-RateLimit-Remaining: 0, reset in X-RateLimit-Reset
	secondaryHeader      // a secondary limit with Retry-After
	secondaryBody        // a secondary limit told by its message alone
)

// limitOf reads resp for a rate limit: its headers, then at most 4 KiB of
// a 403's or 429's body, with [retry.PeekBody], which puts it back.
func limitOf(resp *http.Response) kind {
	if resp == nil || (resp.StatusCode != http.StatusForbidden && resp.StatusCode != http.StatusTooManyRequests) {
		return noLimit
	}
	h := resp.Header
	switch {
	case strings.TrimSpace(h.Get("X-Ratelimit-Remaining")) == "0":
		return primary
	case h.Get("Retry-After") != "":
		return secondaryHeader
	}
	body, _ := retry.PeekBody(resp, peekLimit)
	if bytes.Contains(bytes.ToLower(body), []byte("secondary rate limit")) {
		return secondaryBody
	}
	return noLimit
}

// Classify is a [retry.Classifier] for GitHub's REST API: [retry.Throttled]
// for a 403 or 429 that reports a rate limit, [retry.Undecided] for every
// other outcome. It reads at most 4 KiB of a 403's or 429's body, with
// [retry.PeekBody], and only when no header told; the body is put back for
// the caller.
func Classify(o retry.Outcome) retry.Class {
	if limitOf(o.Response) == noLimit {
		return retry.Undecided
	}
	return retry.Throttled
}

// WaitFloor is a [retry.Transport.WaitFloor] for GitHub's REST API:
// SecondaryWait after a secondary rate limit that came without
// Retry-After, nothing for any other outcome (the headers of the others
// say how long to wait).
func WaitFloor(o retry.Outcome) time.Duration {
	if limitOf(o.Response) == secondaryBody {
		return SecondaryWait
	}
	return 0
}

// Options returns the Transport settings GitHub's API needs: [Classify] in
// front of the default classifier, X-RateLimit-Reset read as a Unix time
// in seconds ([retry.ResetUnixSeconds]), [WaitFloor], and [Key], so that
// the Transport's Pacer spreads each quota GitHub publishes (per token and
// resource) over the time to its reset. Append your own after them.
func Options() []retry.Option {
	return []retry.Option{
		retry.WithClassifier(Classify),
		retry.WithRateLimitReset(retry.ResetUnixSeconds),
		retry.WithWaitFloor(WaitFloor),
		retry.WithKey(Key),
	}
}
