// Package awsretry teaches [retry] the throttling signals of AWS APIs,
// which do not all use HTTP 429 or 503: Route 53, for one, answers a burst
// of ChangeResourceRecordSets calls with HTTP 400 and the error code
// Throttling or PriorRequestNotComplete, and DynamoDB sends
// ThrottlingException and ProvisionedThroughputExceededException as 400.
//
// [Classify] is a [retry.Classifier] that reads the error code of an error
// response (status 400 and above) and answers [retry.Throttled] for the
// codes AWS SDKs treat as throttling, [retry.Transient] for RequestTimeout
// and RequestTimeoutException, and [retry.Undecided] otherwise, leaving the
// status code to [retry.DefaultClassifier]: a Route 53 400 InvalidInput is
// still Permanent.
//
//	client := &http.Client{
//		Transport: retry.New(nil, retry.WithClassifier(awsretry.Classify)),
//	}
//
// The code is taken from the x-amzn-ErrorType header or, failing that, from
// the first 16 KiB of the body, read with [retry.PeekBody] and put back for
// the caller: XML errors (<Error><Code>, with the <ErrorResponse> and
// <Response><Errors> envelopes of the query and EC2 protocols) and JSON
// errors ("__type", "code" or "Code", or "Code" in an "Error" object).
// Successful responses are never read: S3's rare 200 OK carrying an error
// document (CopyObject, CompleteMultipartUpload) is not detected.
//
// A replay sends the same signed request again. AWS accepts a SigV4
// request within about five minutes of its X-Amz-Date, and refuses it after
// with 403 SignatureDoesNotMatch or RequestExpired, which this classifier
// leaves to [retry.DefaultClassifier] (permanent). The Transport's default
// MaxRetryAfter is five minutes, so for AWS set it lower and give each call
// a context deadline well inside the signature's lifetime
// (examples/route53 uses 20 seconds and one minute).
package awsretry

import (
	"slices"

	"github.com/backoff-jitter/retry"
)

// throttleCodes are the error codes the AWS SDKs (Go v2's retry package,
// JavaScript v3's service-error-classification) treat as throttling: the
// request was refused, not processed, and is retried for every method.
// Some services also answer LimitExceededException for a quota that no
// retry lifts; the SDKs retry it all the same, and so does this, up to the
// Transport's attempts. Sorted, for IsThrottleCode.
var throttleCodes = []string{
	"BandwidthLimitExceeded",
	"EC2ThrottledException",
	"LimitExceededException",
	"PriorRequestNotComplete",
	"ProvisionedThroughputExceededException",
	"RequestLimitExceeded",
	"RequestThrottled",
	"RequestThrottledException",
	"SlowDown",
	"ThrottledException",
	"Throttling",
	"ThrottlingException",
	"TooManyRequestsException",
	"TransactionInProgressException",
}

// conflictCodes are the throttle codes that refuse a request for what
// another request is doing, not for the rate: Route 53's
// PriorRequestNotComplete (a change to the zone is still pending) and
// DynamoDB's TransactionInProgressException (a transaction on the item is
// in progress). Sorted, for IsConflictCode.
var conflictCodes = []string{
	"PriorRequestNotComplete",
	"TransactionInProgressException",
}

// IsConflictCode reports whether code refuses a request for what another
// request is doing rather than for the rate: a throttle code (the request
// was not processed, and is replayed) that a rate limiter should not
// learn from. See [RateRefusal].
func IsConflictCode(code string) bool {
	_, ok := slices.BinarySearch(conflictCodes, code)
	return ok
}

// RateRefusal reports whether a throttled outcome that a
// [github.com/backoff-jitter/retry/pace.Pacer] is told of refused the
// request for its rate: false for the conflict codes (see
// [IsConflictCode]), which come at any rate; true for the other throttle
// codes (Throttling, SlowDown, ...); and for an answer without one, what
// [retry.RateLimited] says: a 429 is, a 503 that gives no server wait is
// not (a balancer with no healthy backend, a full queue: an outage, not a
// rate). Set it as the Pacer's Refusal with [Classify] as the Transport's
// classifier:
//
//	pacer := &pace.Pacer{Refusal: awsretry.RateRefusal}
//	rt := retry.New(nil, retry.WithClassifier(awsretry.Classify), retry.WithPacer(pacer))
//
// It reads the error code as [ErrorCode] does, and leaves the body whole.
func RateRefusal(f retry.Feedback) bool {
	code, ok := ErrorCode(f.Response)
	switch {
	case ok && IsConflictCode(code):
		return false
	case ok && IsThrottleCode(code):
		return true
	}
	return retry.RateLimited(f)
}

// transientCodes are the codes the SDKs retry as transient: the server gave
// up waiting for the request (S3 sends RequestTimeout as 400). Whether it
// was processed is not stated, so they are [retry.Transient], replayed only
// when that is safe, and not Throttled as the SDKs would have it.
var transientCodes = []string{
	"RequestTimeout",
	"RequestTimeoutException",
}

// ThrottleCodes returns the error codes [Classify] treats as throttling,
// sorted, in a new slice the caller may modify.
func ThrottleCodes() []string {
	return slices.Clone(throttleCodes)
}

// IsThrottleCode reports whether code is one of AWS's throttling error
// codes. The match is exact and case-sensitive, as AWS codes are.
func IsThrottleCode(code string) bool {
	_, found := slices.BinarySearch(throttleCodes, code)
	return found
}

// isTransientCode reports whether code is one of transientCodes.
func isTransientCode(code string) bool {
	return slices.Contains(transientCodes, code)
}

// Classify is a [retry.Classifier] for AWS APIs. For an error response
// (status 400 and above) whose error code [ErrorCode] finds, it returns
// [retry.Throttled] when [IsThrottleCode] says so and [retry.Transient]
// for RequestTimeout and RequestTimeoutException. It returns
// [retry.Undecided] for every other outcome, errors included, so that
// [retry.DefaultClassifier] decides by the status code.
//
// Classify reads at most 16 KiB of the body and restores it for the caller.
// It is safe for concurrent use on different outcomes.
func Classify(o retry.Outcome) retry.Class {
	return classify(o, nil)
}

// NewClassifier returns a [retry.Classifier] like [Classify] that also
// treats extraCodes as throttling codes, for a service with codes of its
// own. The codes are copied; they match exactly.
func NewClassifier(extraCodes ...string) retry.Classifier {
	extra := slices.Clone(extraCodes)
	return func(o retry.Outcome) retry.Class {
		return classify(o, extra)
	}
}

func classify(o retry.Outcome, extra []string) retry.Class {
	if o.Err != nil || o.Response == nil {
		return retry.Undecided
	}
	code, ok := ErrorCode(o.Response)
	switch {
	case !ok:
		return retry.Undecided
	case IsThrottleCode(code) || slices.Contains(extra, code):
		return retry.Throttled
	case isTransientCode(code):
		return retry.Transient
	}
	return retry.Undecided
}
