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
// is returned at once. A secondary limit without Retry-After gets the
// backoff's waits, which are far shorter than a minute by default: give
// such a client a backoff whose base is a minute, or fewer attempts.
package githubretry

import (
	"bytes"
	"net/http"
	"strings"

	"github.com/backoff-jitter/retry"
)

// peekLimit bounds how much of a 403's body Classify reads: GitHub's error
// documents are a few hundred bytes.
const peekLimit = 4 << 10

// Classify is a [retry.Classifier] for GitHub's REST API: [retry.Throttled]
// for a 403 or 429 that reports a rate limit, [retry.Undecided] for every
// other outcome. It reads at most 4 KiB of a 403's or 429's body, with
// [retry.PeekBody], and only when no header told; the body is put back for
// the caller.
func Classify(o retry.Outcome) retry.Class {
	resp := o.Response
	if resp == nil || (resp.StatusCode != http.StatusForbidden && resp.StatusCode != http.StatusTooManyRequests) {
		return retry.Undecided
	}
	h := resp.Header
	switch {
	case strings.TrimSpace(h.Get("X-Ratelimit-Remaining")) == "0":
		return retry.Throttled // the primary limit: waits for X-RateLimit-Reset
	case h.Get("Retry-After") != "":
		return retry.Throttled // a secondary limit, with its wait
	}
	body, _ := retry.PeekBody(resp, peekLimit)
	if bytes.Contains(bytes.ToLower(body), []byte("secondary rate limit")) {
		return retry.Throttled
	}
	return retry.Undecided
}

// Options returns the Transport settings GitHub's API needs: [Classify] in
// front of the default classifier, and X-RateLimit-Reset read as a Unix
// time in seconds ([retry.ResetUnixSeconds]). Append your own after them.
func Options() []retry.Option {
	return []retry.Option{
		retry.WithClassifier(Classify),
		retry.WithRateLimitReset(retry.ResetUnixSeconds),
	}
}
