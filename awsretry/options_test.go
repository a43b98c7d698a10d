package awsretry

import (
	"context"
	"net/http"
	"strings"
	"testing"
)

func TestAccessKeyID(t *testing.T) {
	const sig = "Signature=0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	tests := []struct {
		header string
		want   string // "" for none
	}{
		{"AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20260101/us-east-1/route53/aws4_request, SignedHeaders=host;x-amz-date, " + sig, "AKIAIOSFODNN7EXAMPLE"},
		{"AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20260101/us-east-1/route53/aws4_request,SignedHeaders=host," + sig, "AKIAIOSFODNN7EXAMPLE"},
		{"AWS4-HMAC-SHA256 SignedHeaders=host, Credential=ASIAEXAMPLE/20260101/us-east-1/route53/aws4_request, " + sig, "ASIAEXAMPLE"},
		{"AWS4-ECDSA-P256-SHA256 Credential=AKIDSIGV4A/20260101/route53/aws4_request, SignedHeaders=host, " + sig, "AKIDSIGV4A"},
		{"", ""},
		{"AWS4-HMAC-SHA256", ""},
		{"AWS4-HMAC-SHA256 ", ""},
		{"AWS4-HMAC-SHA256 Credential=", ""},
		{"AWS4-HMAC-SHA256 Credential=/20260101/us-east-1/route53/aws4_request", ""},
		{"AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE", ""},
		{"AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/", ""},
		{"AWS4-HMAC-SHA256 SignedHeaders=host, " + sig, ""},
		{"Bearer Credential=AKIAIOSFODNN7EXAMPLE/20260101/us-east-1/route53/aws4_request", ""},
		{"Basic QWxhZGRpbjpvcGVuIHNlc2FtZQ==", ""},
		{"AWS AKIAIOSFODNN7EXAMPLE:frJIUN8DYpKDtOLCwo//yllqDzg=", ""}, // SigV2: no Credential
		{"AWS4-HMAC-SHA256 Credential=AKIA EXAMPLE/20260101/us-east-1/route53/aws4_request", ""},
		{"AWS4-HMAC-SHA256 ,,, , Credential=AKID/x", "AKID"},
	}
	for _, tt := range tests {
		got, ok := accessKeyID(tt.header)
		if got != tt.want || ok != (tt.want != "") {
			t.Errorf("accessKeyID(%q) = %q, %v; want %q, %v", tt.header, got, ok, tt.want, tt.want != "")
		}
	}
}

func TestAccountKey(t *testing.T) {
	signed, _ := http.NewRequest(http.MethodGet, "https://route53.amazonaws.com/2013-04-01/hostedzone", nil)
	signed.Header.Set("Authorization", "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20260101/us-east-1/route53/aws4_request, SignedHeaders=host, Signature=00")
	unsigned, _ := http.NewRequest(http.MethodGet, "https://route53.amazonaws.com/2013-04-01/hostedzone", nil)
	malformed := unsigned.Clone(context.Background())
	malformed.Header.Set("Authorization", "AWS4-HMAC-SHA256 Credential=")
	noURL := &http.Request{Host: "example.net", Header: http.Header{}}
	for _, tt := range []struct {
		name string
		req  *http.Request
		want string
	}{
		{"signed", signed, "AKIAIOSFODNN7EXAMPLE"},
		{"unsigned", unsigned, "route53.amazonaws.com"},
		{"malformed", malformed, "route53.amazonaws.com"},
		{"no URL", noURL, "example.net"},
	} {
		if got := AccountKey(tt.req); got != tt.want {
			t.Errorf("%s: AccountKey = %q; want %q", tt.name, got, tt.want)
		}
	}
}

// FuzzAccessKeyID: no header makes accessKeyID panic, and an ID it returns
// is a non-empty part of the header without spaces, commas or slashes.
func FuzzAccessKeyID(f *testing.F) {
	f.Add("AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20260101/us-east-1/route53/aws4_request, SignedHeaders=host, Signature=00")
	f.Add("AWS4- Credential=/")
	f.Add("")
	f.Fuzz(func(t *testing.T, header string) {
		id, ok := accessKeyID(header)
		if ok != (id != "") || !strings.Contains(header, id) || strings.ContainsAny(id, " \t,/") {
			t.Errorf("accessKeyID(%q) = %q, %v", header, id, ok)
		}
	})
}
