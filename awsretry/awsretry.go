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
	"bytes"
	"encoding/json"
	"encoding/xml"
	"io"
	"net/http"
	"slices"
	"strings"

	"github.com/backoff-jitter/retry"
)

// peekLimit bounds how much of an error body ErrorCode reads. AWS error
// documents are a few hundred bytes, and their code comes first.
const peekLimit = 16 << 10

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

// ErrorCode returns the AWS error code of an error response (status 400 and
// above), and whether it found one. It reads the x-amzn-ErrorType header
// first and otherwise the first 16 KiB of the body, through
// [retry.PeekBody], so the body still yields every byte to its reader.
// The code is stripped of a namespace ("com.amazonaws.dynamodb.v20120810#")
// and of a ":"-separated suffix, as the AWS SDKs do.
//
// ErrorCode returns "", false without reading anything for a nil response
// or a status below 400, and for a body that is not an AWS error document:
// malformed, truncated before the code, or not XML or JSON.
func ErrorCode(resp *http.Response) (string, bool) {
	if resp == nil || resp.StatusCode < 400 {
		return "", false
	}
	if code := sanitize(resp.Header.Get("X-Amzn-Errortype")); code != "" {
		return code, true
	}
	// A read error leaves a shorter prefix, which may still hold the code.
	prefix, _ := retry.PeekBody(resp, peekLimit)
	prefix = bytes.TrimLeft(bytes.TrimPrefix(prefix, []byte("\uFEFF")), " \t\r\n")
	var code string
	switch {
	case len(prefix) == 0:
		return "", false
	case prefix[0] == '<':
		code = xmlCode(prefix)
	case prefix[0] == '{':
		code = jsonCode(prefix)
	}
	code = sanitize(code)
	return code, code != ""
}

// maxCodeLen bounds an error code's length; AWS's are under 64 bytes.
const maxCodeLen = 256

// sanitize cuts an AWS error code out of a header or __type value the way
// the AWS SDKs do: what precedes a ":" (a documentation URL follows it),
// then what follows a "#" (a namespace precedes it). A result that does not
// look like a code (empty, or with spaces or control characters) is "".
func sanitize(code string) string {
	code, _, _ = strings.Cut(code, ":")
	// The namespace ends at the last '#': "aws.protocoltests#Code", and
	// never leave a '#' in what is taken for the code.
	code = code[strings.LastIndexByte(code, '#')+1:]
	code = strings.TrimSpace(code)
	if len(code) > maxCodeLen || strings.ContainsFunc(code, func(r rune) bool { return r <= ' ' || r == 0x7f }) {
		return ""
	}
	return code
}

// xmlCode returns the text of the first complete <Code> element directly
// inside an <Error> element of doc, or "". It streams tokens, so a
// document truncated after the code still gives it, and stops at the first
// syntax error.
func xmlCode(doc []byte) string {
	d := xml.NewDecoder(bytes.NewReader(doc))
	d.Strict = false
	// Codes are ASCII: any ASCII-compatible charset yields them as is, and
	// an incompatible one fails to parse, which is no code found.
	d.CharsetReader = func(_ string, r io.Reader) (io.Reader, error) { return r, nil }
	var stack []string
	var text strings.Builder
	inCode := false
	for {
		tok, err := d.Token()
		if err != nil {
			return "" // the end of the prefix, or garbage, before a complete code
		}
		switch t := tok.(type) {
		case xml.StartElement:
			if inCode {
				return "" // a code has no markup inside
			}
			inCode = t.Name.Local == "Code" && len(stack) > 0 && stack[len(stack)-1] == "Error"
			stack = append(stack, t.Name.Local)
		case xml.CharData:
			if inCode {
				if text.Len()+len(t) > maxCodeLen {
					return "" // not a code
				}
				text.Write(t)
			}
		case xml.EndElement:
			if inCode {
				return text.String()
			}
			if len(stack) > 0 {
				stack = stack[:len(stack)-1]
			}
		}
	}
}

// jsonCode returns the error code of a JSON error document: the top-level
// "__type", else a top-level "code" (any case), else "Code" in a top-level
// "Error" object. Only string values count. It streams tokens, so a
// document truncated after the code still gives it.
func jsonCode(doc []byte) string {
	d := json.NewDecoder(bytes.NewReader(doc))
	if tok, err := d.Token(); err != nil || tok != json.Delim('{') {
		return ""
	}
	var typ, code, nested string
keys:
	for {
		tok, err := d.Token()
		if err != nil || tok == json.Delim('}') {
			break // truncated, malformed or done: use what was found
		}
		key, ok := tok.(string)
		if !ok {
			break
		}
		switch {
		case key == "__type":
			if s, ok := stringValue(d); ok && typ == "" {
				typ = s
			}
		case strings.EqualFold(key, "code"):
			if s, ok := stringValue(d); ok && code == "" {
				code = s
			}
		case strings.EqualFold(key, "error"):
			if s, ok := errorObjectCode(d); ok && nested == "" {
				nested = s
			}
		default:
			if !skipValue(d) {
				break keys
			}
		}
		if typ != "" {
			return typ // __type wins, and is usually first
		}
	}
	if code != "" {
		return code
	}
	return nested
}

// stringValue reads the next value of d and returns it if it is a string.
// A value of another kind is skipped; ok is false when reading failed or
// the value was not a string.
func stringValue(d *json.Decoder) (string, bool) {
	tok, err := d.Token()
	if err != nil {
		return "", false
	}
	if s, ok := tok.(string); ok {
		return s, true
	}
	if delim, ok := tok.(json.Delim); ok && (delim == '{' || delim == '[') {
		skipNested(d)
	}
	return "", false
}

// errorObjectCode reads the next value of d and, if it is an object, returns
// the string value of its "Code" key (any case).
func errorObjectCode(d *json.Decoder) (string, bool) {
	tok, err := d.Token()
	if err != nil {
		return "", false
	}
	if tok != json.Delim('{') {
		if delim, ok := tok.(json.Delim); ok && delim == '[' {
			skipNested(d)
		}
		return "", false
	}
	var code string
	for {
		tok, err := d.Token()
		if err != nil {
			return "", false
		}
		if tok == json.Delim('}') {
			return code, code != ""
		}
		key, ok := tok.(string)
		if !ok {
			return "", false
		}
		if strings.EqualFold(key, "code") && code == "" {
			code, _ = stringValue(d)
			continue
		}
		if !skipValue(d) {
			return "", false
		}
	}
}

// skipValue reads and discards the next value of d, reporting success.
func skipValue(d *json.Decoder) bool {
	tok, err := d.Token()
	if err != nil {
		return false
	}
	if delim, ok := tok.(json.Delim); ok && (delim == '{' || delim == '[') {
		return skipNested(d)
	}
	return true
}

// skipNested reads and discards tokens up to the end of the object or array
// whose opening delimiter was just read.
func skipNested(d *json.Decoder) bool {
	for depth := 1; depth > 0; {
		tok, err := d.Token()
		if err != nil {
			return false
		}
		switch tok {
		case json.Delim('{'), json.Delim('['):
			depth++
		case json.Delim('}'), json.Delim(']'):
			depth--
		}
	}
	return true
}
