package awsretry

import (
	"net/http"
	"strings"

	"github.com/backoff-jitter/retry"
	"github.com/backoff-jitter/retry/pace"
)

// Options returns the Transport's options for AWS APIs: [Classify] as
// its classifier, a Pacer of its own ([NewPacer]), and MaxAttempts
// [MaxAttempts]:
//
//	client := &http.Client{Transport: retry.New(nil, awsretry.Options()...)}
//
// Each call returns a new Pacer: give every Transport of one account the
// options of one call, or share one Transport, so that they learn the
// account's rate together.
func Options() []retry.Option {
	return []retry.Option{
		retry.WithClassifier(Classify),
		retry.WithPacer(NewPacer()),
		retry.WithMaxAttempts(MaxAttempts),
	}
}

// MaxAttempts is the attempts of [Options]: a wait for the Pacer's turn
// spends none, so they are spent on refusals, which come before the Pacer
// has learned an account's rate (the first seconds of a burst). Four (the
// Transport's default) let a call refused four times then fail; ten do
// not, and cost nothing once the rate is learned.
const MaxAttempts = 10

// NewPacer returns a Pacer for AWS APIs: keyed by the account
// ([AccountKey]), as AWS limits its APIs' rates per account (Route 53
// allows five requests a second for the whole account); learning no rate
// from the conflict codes ([RateRefusal]); and with slow start, as an API
// known to limit: a new account's first burst has at most
// [pace.DefaultInitialWindow] attempts unanswered at once.
func NewPacer() *pace.Pacer {
	return &pace.Pacer{Key: AccountKey, Refusal: RateRefusal, InitialWindow: pace.DefaultInitialWindow}
}

// AccountKey returns the limit an AWS request counts against: the access
// key ID of its SigV4 signature, which names the account's credentials,
// or the host for a request that is not signed with SigV4. A Transport
// below the SDK's signer sees signed requests.
func AccountKey(r *http.Request) string {
	if id, ok := accessKeyID(r.Header.Get("Authorization")); ok {
		return id
	}
	if r.URL != nil && r.URL.Host != "" {
		return r.URL.Host
	}
	return r.Host
}

// accessKeyID returns the access key ID of a SigV4 Authorization header,
// the first part of its Credential:
//
//	AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20260101/us-east-1/route53/aws4_request,
//	SignedHeaders=host;x-amz-date, Signature=...
//
// It reports false for a header without a Credential whose scope follows
// the ID.
func accessKeyID(authorization string) (string, bool) {
	scheme, params, ok := strings.Cut(authorization, " ")
	if !ok || !strings.HasPrefix(scheme, "AWS4-") {
		return "", false
	}
	for param := range strings.SplitSeq(params, ",") {
		credential, ok := strings.CutPrefix(strings.TrimSpace(param), "Credential=")
		if !ok {
			continue
		}
		id, scope, ok := strings.Cut(credential, "/")
		if !ok || id == "" || scope == "" || strings.ContainsAny(id, " \t") {
			return "", false
		}
		return id, true
	}
	return "", false
}
