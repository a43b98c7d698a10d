package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
)

// signatureLifetime is how far the X-Amz-Date of a request may be from
// the server's clock, either way. The IAM User Guide ("AWS Signature
// Version 4 for API requests") says that in most cases a request must
// reach AWS within five minutes of its time stamp, and AWS services reject
// later ones with "Signature expired: <X-Amz-Date> is now earlier than
// <now - 5 min> (<now> - 5 min.)".
const signatureLifetime = 5 * time.Minute

// amzDate is the layout of X-Amz-Date.
const amzDate = "20060102T150405Z"

// authorization matches a SigV4 Authorization header:
//
//	AWS4-HMAC-SHA256 Credential=AKID/20260101/us-east-1/route53/aws4_request,
//	SignedHeaders=host;x-amz-date, Signature=<64 hex digits>
var authorization = regexp.MustCompile(`^AWS4-HMAC-SHA256 ` +
	`Credential=([A-Z0-9]{16,128})/(\d{8})/([a-z0-9-]+)/([a-z0-9-]+)/aws4_request, ?` +
	`SignedHeaders=([a-z0-9-]+(?:;[a-z0-9-]+)*), ?` +
	`Signature=([0-9a-f]{64})$`)

// authenticate checks r's SigV4 signature as AWS does: the Authorization
// header is well formed, scoped to us-east-1 and route53 on the day of
// X-Amz-Date, by a known access key; X-Amz-Date is within 5 minutes of now;
// and the signature is the one the account's secret key gives for the
// headers it names and for body. It returns the account and the signing
// time.
func (f *fakeRoute53) authenticate(r *http.Request, body []byte, now time.Time) (string, time.Time, *apiError) {
	header := r.Header.Get("Authorization")
	if header == "" {
		return "", time.Time{}, &apiError{http.StatusForbidden, "MissingAuthenticationToken", "Missing Authentication Token"}
	}
	m := authorization.FindStringSubmatch(header)
	if m == nil {
		return "", time.Time{}, &apiError{http.StatusForbidden, "IncompleteSignature", "Authorization header is not a well-formed SigV4 header: " + header}
	}
	account, day, region, service, signedHeaders := m[1], m[2], m[3], m[4], strings.Split(m[5], ";")
	signedAt, err := time.Parse(amzDate, r.Header.Get("X-Amz-Date"))
	switch {
	case err != nil:
		return "", time.Time{}, &apiError{http.StatusForbidden, "IncompleteSignature", "X-Amz-Date is missing or malformed"}
	case signedAt.Format("20060102") != day:
		return "", signedAt, &apiError{http.StatusForbidden, "SignatureDoesNotMatch", "Credential date " + day + " does not match X-Amz-Date"}
	case region != "us-east-1" || service != "route53":
		return "", signedAt, &apiError{http.StatusForbidden, "SignatureDoesNotMatch", "Credential should be scoped to us-east-1/route53, not " + region + "/" + service}
	case !slices.Contains(signedHeaders, "host") || !slices.Contains(signedHeaders, "x-amz-date"):
		return "", signedAt, &apiError{http.StatusForbidden, "IncompleteSignature", "SignedHeaders must include host and x-amz-date"}
	case now.Sub(signedAt) > signatureLifetime:
		return "", signedAt, &apiError{http.StatusForbidden, "SignatureDoesNotMatch", "Signature expired: " +
			signedAt.Format(amzDate) + " is now earlier than " + now.Add(-signatureLifetime).UTC().Format(amzDate) +
			" (" + now.UTC().Format(amzDate) + " - 5 min.)"}
	case signedAt.Sub(now) > signatureLifetime:
		return "", signedAt, &apiError{http.StatusForbidden, "SignatureDoesNotMatch", "Signature not yet current: " +
			signedAt.Format(amzDate) + " is still later than " + now.Add(signatureLifetime).UTC().Format(amzDate) +
			" (" + now.UTC().Format(amzDate) + " + 5 min.)"}
	}
	secret, ok := f.Accounts[account]
	if !ok {
		return "", signedAt, &apiError{http.StatusForbidden, "InvalidClientTokenId", "The security token included in the request is invalid."}
	}
	want, err := resign(r, body, signedHeaders, aws.Credentials{AccessKeyID: account, SecretAccessKey: secret}, signedAt)
	if err != nil || want != header {
		return "", signedAt, &apiError{http.StatusForbidden, "SignatureDoesNotMatch",
			"The request signature we calculated does not match the signature you provided."}
	}
	return account, signedAt, nil
}

// resign signs a copy of r that holds only the headers r's signature
// covers, with the SDK's own signer, and returns its Authorization header.
func resign(r *http.Request, body []byte, signedHeaders []string, creds aws.Credentials, signedAt time.Time) (string, error) {
	req, err := http.NewRequest(r.Method, "http://"+r.Host+r.URL.RequestURI(), nil)
	if err != nil {
		return "", err
	}
	req.ContentLength = r.ContentLength
	for _, name := range signedHeaders {
		if name != "host" && name != "content-length" {
			req.Header[http.CanonicalHeaderKey(name)] = r.Header.Values(name)
		}
	}
	sum := sha256.Sum256(body)
	err = v4.NewSigner().SignHTTP(context.Background(), creds, req, hex.EncodeToString(sum[:]), "route53", "us-east-1", signedAt)
	return req.Header.Get("Authorization"), err
}
