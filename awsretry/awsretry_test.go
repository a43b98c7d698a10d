package awsretry

import (
	"bytes"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"testing/iotest"
	"time"

	"github.com/jarcoal/httpmock"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/backoff-jitter/retry"
	"github.com/backoff-jitter/retry/pace"
)

const (
	route53Throttling = `<?xml version="1.0"?>
<ErrorResponse xmlns="https://route53.amazonaws.com/doc/2013-04-01/"><Error><Type>Sender</Type><Code>Throttling</Code><Message>Rate exceeded</Message></Error><RequestId>1b3c1f3e-2a8e-4a9b-9b0e-2a1f0c8e5d7a</RequestId></ErrorResponse>`
	route53Prior = `<?xml version="1.0"?>
<ErrorResponse xmlns="https://route53.amazonaws.com/doc/2013-04-01/"><Error><Type>Sender</Type><Code>PriorRequestNotComplete</Code><Message>The request was rejected because Route 53 was still processing a prior request.</Message></Error><RequestId>5e1a3f0c-6b1d-4c6e-8f0e-0a9b8c7d6e5f</RequestId></ErrorResponse>`
	route53Invalid = `<?xml version="1.0"?>
<ErrorResponse xmlns="https://route53.amazonaws.com/doc/2013-04-01/"><Error><Type>Sender</Type><Code>InvalidInput</Code><Message>Invalid request</Message></Error><RequestId>9f8e7d6c-5b4a-4392-8170-6f5e4d3c2b1a</RequestId></ErrorResponse>`
	s3SlowDown = `<?xml version="1.0" encoding="UTF-8"?>
<Error><Code>SlowDown</Code><Message>Please reduce your request rate.</Message><RequestId>4442587FB7D0A2F9</RequestId><HostId>abc=</HostId></Error>`
	ec2Limit = `<?xml version="1.0" encoding="UTF-8"?>
<Response><Errors><Error><Code>RequestLimitExceeded</Code><Message>Request limit exceeded.</Message></Error></Errors><RequestID>ea966190-f9aa-478e-9ede-example</RequestID></Response>`
	dynamoThrottle = `{"__type":"com.amazonaws.dynamodb.v20120810#ProvisionedThroughputExceededException","message":"The level of configured provisioned throughput for the table was exceeded."}`
)

func TestThrottleCodes(t *testing.T) {
	want := []string{
		"Throttling", "ThrottlingException", "ThrottledException", "RequestThrottledException",
		"TooManyRequestsException", "ProvisionedThroughputExceededException",
		"TransactionInProgressException", "RequestLimitExceeded", "BandwidthLimitExceeded",
		"LimitExceededException", "RequestThrottled", "SlowDown", "PriorRequestNotComplete",
		"EC2ThrottledException",
	}
	got := ThrottleCodes()
	assert.ElementsMatch(t, want, got)
	require.True(t, slices.IsSorted(throttleCodes), "IsThrottleCode's binary search needs a sorted list")
	for _, code := range want {
		assert.True(t, IsThrottleCode(code), "IsThrottleCode(%q)", code)
	}
	for _, code := range []string{"", "throttling", "Throttling ", "InvalidInput", "RequestTimeout", "Throttl", "ThrottlingExceptionX"} {
		assert.False(t, IsThrottleCode(code), "IsThrottleCode(%q)", code)
	}

	got[0] = "InvalidInput"
	assert.False(t, IsThrottleCode("InvalidInput"), "changing ThrottleCodes' result changed the list")
	assert.NotContains(t, ThrottleCodes(), "InvalidInput")
}

// newResponse returns a response whose body yields body.
func newResponse(status int, header http.Header, body string) *http.Response {
	if header == nil {
		header = http.Header{}
	}
	return &http.Response{
		StatusCode: status,
		Header:     header,
		Body:       io.NopCloser(strings.NewReader(body)),
	}
}

func TestErrorCode(t *testing.T) {
	tests := []struct {
		name     string
		status   int
		header   http.Header
		body     string
		want     string
		wantFind bool
	}{
		{"Route 53 Throttling", 400, nil, route53Throttling, "Throttling", true},
		{"Route 53 PriorRequestNotComplete", 400, nil, route53Prior, "PriorRequestNotComplete", true},
		{"Route 53 InvalidInput", 400, nil, route53Invalid, "InvalidInput", true},
		{"S3 SlowDown", 503, nil, s3SlowDown, "SlowDown", true},
		{"EC2 RequestLimitExceeded", 503, nil, ec2Limit, "RequestLimitExceeded", true},
		{"XML with a byte order mark and spaces", 400, nil, "\uFEFF \r\n" + s3SlowDown, "SlowDown", true},
		{"XML in Latin-1", 400, nil, `<?xml version="1.0" encoding="ISO-8859-1"?><Error><Code>SlowDown</Code></Error>`, "SlowDown", true},
		{"XML code with spaces around", 400, nil, "<Error><Code>\n  Throttling\n</Code></Error>", "Throttling", true},
		{"XML code as CDATA", 400, nil, "<Error><Code><![CDATA[Throttling]]></Code></Error>", "Throttling", true},
		{"XML code outside an Error", 400, nil, "<Foo><Code>Throttling</Code></Foo>", "", false},
		{"XML code with markup inside", 400, nil, "<Error><Code><b>Throttling</b></Code></Error>", "", false},
		{"XML code with spaces inside", 400, nil, "<Error><Code>Rate exceeded</Code></Error>", "", false},
		{"XML code empty", 400, nil, "<Error><Code></Code></Error>", "", false},
		{"XML code too long", 400, nil, "<Error><Code>" + strings.Repeat("A", 300) + "</Code></Error>", "", false},
		{"XML truncated in the code", 400, nil, "<Error><Code>Throttl", "", false},
		{"XML truncated after the code", 400, nil, "<Error><Code>Throttling</Code><Message>Rate exc", "Throttling", true},
		{"XML malformed before the code", 400, nil, "<Error><<>><Code>Throttling</Code></Error>", "", false},
		{"HTML", 503, nil, "<html><body><h1>503 Service Unavailable</h1></body></html>", "", false},
		{"DynamoDB __type", 400, nil, dynamoThrottle, "ProvisionedThroughputExceededException", true},
		{"__type with a URL", 400, nil, `{"__type":"ThrottlingException:http://internal.amazon.com/coral/com.amazon.coral.availability/"}`, "ThrottlingException", true},
		{"__type after code", 400, nil, `{"code":"Other","__type":"aws#ThrottlingException"}`, "ThrottlingException", true},
		{"code", 429, nil, `{"code":"TooManyRequestsException","message":"Rate exceeded"}`, "TooManyRequestsException", true},
		{"Code", 400, nil, `{"Message":"x","Code":"LimitExceededException"}`, "LimitExceededException", true},
		{"Error object", 400, nil, `{"Error":{"Type":"Sender","Code":"Throttling","Message":"Rate exceeded"},"RequestId":"r"}`, "Throttling", true},
		{"nested values skipped", 400, nil, `{"a":{"code":"Nested","b":[1,{"c":2}]},"x":[{"__type":"No"}],"code":"SlowDown"}`, "SlowDown", true},
		{"numeric code", 400, nil, `{"code":400,"message":"bad"}`, "", false},
		{"object code", 400, nil, `{"code":{"x":"Throttling"}}`, "", false},
		{"Error not an object", 400, nil, `{"Error":"Throttling"}`, "", false},
		{"JSON truncated after the type", 400, nil, `{"__type":"ThrottlingException","message":"Rate exc`, "ThrottlingException", true},
		{"JSON truncated in the type", 400, nil, `{"__type":"Throttl`, "", false},
		{"JSON malformed", 400, nil, `{"__type" "ThrottlingException"}`, "", false},
		{"JSON array", 400, nil, `["ThrottlingException"]`, "", false},
		{"header", 400, http.Header{"X-Amzn-Errortype": {"ThrottlingException:http://internal.amazon.com/coral/com.amazon.coral.availability/"}}, "", "ThrottlingException", true},
		{"header with a namespace", 400, http.Header{"X-Amzn-Errortype": {"aws.protocoltests#ThrottlingException"}}, "", "ThrottlingException", true},
		{"header wins over body", 400, http.Header{"X-Amzn-Errortype": {"SlowDown"}}, dynamoThrottle, "SlowDown", true},
		{"empty header, body", 400, http.Header{"X-Amzn-Errortype": {" "}}, dynamoThrottle, "ProvisionedThroughputExceededException", true},
		{"empty body", 400, nil, "", "", false},
		{"plain text", 400, nil, "Throttling", "", false},
		{"binary", 400, nil, "\x00\xff\xfe<\x01{", "", false},
		{"success not read", 200, nil, s3SlowDown, "", false},
		{"redirect not read", 307, http.Header{"X-Amzn-Errortype": {"SlowDown"}}, "", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := newResponse(tt.status, tt.header, tt.body)
			code, ok := ErrorCode(resp)
			assert.Equal(t, tt.want, code, "ErrorCode code")
			assert.Equal(t, tt.wantFind, ok, "ErrorCode found")
			all, err := io.ReadAll(resp.Body)
			require.NoError(t, err)
			assert.Equal(t, tt.body, string(all), "body after ErrorCode")
		})
	}
}

func TestErrorCodeNil(t *testing.T) {
	code, ok := ErrorCode(nil)
	assert.Equal(t, "", code)
	assert.False(t, ok)
}

// countingReader counts the bytes read through it.
type countingReader struct {
	r io.Reader
	n int
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += n
	return n, err
}

func randomBytes(t *testing.T, n int) []byte {
	t.Helper()
	b := make([]byte, n)
	_, err := rand.Read(b)
	require.NoError(t, err)
	return b
}

func TestErrorCodeLargeBody(t *testing.T) {
	padding := strings.Repeat("<Message>Rate exceeded</Message>", 1<<15) // 1 MiB
	tests := []struct {
		name     string
		body     string
		want     string
		wantFind bool
	}{
		{"code first", "<Error><Code>Throttling</Code>" + padding + "</Error>", "Throttling", true},
		{"code past the limit", "<Error>" + padding + "<Code>Throttling</Code></Error>", "", false},
		{"JSON code first", `{"__type":"SlowDown","message":"` + strings.Repeat("x", 1<<20) + `"}`, "SlowDown", true},
		{"JSON code past the limit", `{"message":"` + strings.Repeat("x", 1<<20) + `","__type":"SlowDown"}`, "", false},
		{"random", "<" + string(randomBytes(t, 1<<20)), "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			counter := &countingReader{r: strings.NewReader(tt.body)}
			resp := &http.Response{StatusCode: 400, Header: http.Header{}, Body: io.NopCloser(counter)}
			code, ok := ErrorCode(resp)
			assert.Equal(t, tt.want, code)
			assert.Equal(t, tt.wantFind, ok)
			assert.LessOrEqual(t, counter.n, peekLimit, "bytes read by ErrorCode")

			all, err := io.ReadAll(resp.Body)
			require.NoError(t, err)
			require.True(t, tt.body == string(all), "body after ErrorCode differs (%d bytes, want %d)", len(all), len(tt.body))
		})
	}
}

func TestErrorCodeReadError(t *testing.T) {
	errRead := errors.New("connection reset")
	tests := []struct {
		name     string
		before   string
		want     string
		wantFind bool
	}{
		{"after the code", "<Error><Code>SlowDown</Code><Message>Please", "SlowDown", true},
		{"before the code", "<Error><Co", "", false},
		{"at once", "", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body := io.MultiReader(strings.NewReader(tt.before), iotest.ErrReader(errRead))
			resp := &http.Response{StatusCode: 503, Header: http.Header{}, Body: io.NopCloser(body)}
			code, ok := ErrorCode(resp)
			assert.Equal(t, tt.want, code)
			assert.Equal(t, tt.wantFind, ok)
			all, err := io.ReadAll(resp.Body)
			assert.ErrorIs(t, err, errRead, "the reader gets the read error")
			assert.Equal(t, tt.before, string(all), "the reader gets the bytes before it")
		})
	}
}

func TestClassify(t *testing.T) {
	tests := []struct {
		name        string
		resp        *http.Response
		err         error
		want        Class
		wantDefault retry.Class // with retry.DefaultClassifier after Classify
	}{
		{"Route 53 Throttling", newResponse(400, nil, route53Throttling), nil, retry.Throttled, retry.Throttled},
		{"Route 53 PriorRequestNotComplete", newResponse(400, nil, route53Prior), nil, retry.Throttled, retry.Throttled},
		{"Route 53 InvalidInput", newResponse(400, nil, route53Invalid), nil, retry.Undecided, retry.Permanent},
		{"S3 SlowDown", newResponse(503, nil, s3SlowDown), nil, retry.Throttled, retry.Throttled},
		{"EC2 RequestLimitExceeded", newResponse(503, nil, ec2Limit), nil, retry.Throttled, retry.Throttled},
		{"DynamoDB 400", newResponse(400, nil, dynamoThrottle), nil, retry.Throttled, retry.Throttled},
		{"header", newResponse(400, http.Header{"X-Amzn-Errortype": {"ThrottlingException:http://x/"}}, "{}"), nil, retry.Throttled, retry.Throttled},
		{"S3 RequestTimeout", newResponse(400, nil, "<Error><Code>RequestTimeout</Code></Error>"), nil, retry.Transient, retry.Transient},
		{"RequestTimeoutException", newResponse(408, nil, `{"__type":"RequestTimeoutException"}`), nil, retry.Transient, retry.Transient},
		{"InternalError", newResponse(500, nil, "<Error><Code>InternalError</Code></Error>"), nil, retry.Undecided, retry.Transient},
		{"AccessDenied", newResponse(403, nil, "<Error><Code>AccessDenied</Code></Error>"), nil, retry.Undecided, retry.Permanent},
		{"no code", newResponse(429, nil, ""), nil, retry.Undecided, retry.Throttled},
		{"success", newResponse(200, nil, s3SlowDown), nil, retry.Undecided, retry.Success},
		{"error", nil, errors.New("dial failed"), retry.Undecided, retry.Transient},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := httptest.NewRequest(http.MethodPost, "https://route53.amazonaws.com/2013-04-01/hostedzone/Z1/rrset", nil)
			o := retry.Outcome{Request: req, Response: tt.resp, Err: tt.err, Attempt: 1, Wrote: retry.WroteRequest}
			if got := Classify(o); got != tt.want {
				t.Errorf("Classify(%s) = %v; want %v", tt.name, got, tt.want)
			}
			if got := retry.Chain(Classify, retry.DefaultClassifier)(o); got != tt.wantDefault {
				t.Errorf("Chain(Classify, DefaultClassifier)(%s) = %v; want %v", tt.name, got, tt.wantDefault)
			}
		})
	}
}

// Class shortens the table above.
type Class = retry.Class

func TestNewClassifier(t *testing.T) {
	codes := []string{"MyServiceBusy"}
	c := NewClassifier(codes...)
	codes[0] = "Other"
	tests := []struct {
		body string
		want Class
	}{
		{`{"code":"MyServiceBusy"}`, retry.Throttled},
		{`{"code":"Other"}`, retry.Undecided},
		{`{"code":"Throttling"}`, retry.Throttled},
		{`{"code":"RequestTimeout"}`, retry.Transient},
	}
	for _, tt := range tests {
		t.Run(tt.body, func(t *testing.T) {
			o := retry.Outcome{Response: newResponse(400, nil, tt.body), Attempt: 1}
			if got := c(o); got != tt.want {
				t.Errorf("NewClassifier(MyServiceBusy)(%s) = %v; want %v", tt.body, got, tt.want)
			}
		})
	}
	o := retry.Outcome{Response: newResponse(400, nil, `{"code":"MyServiceBusy"}`), Attempt: 1}
	assert.Equal(t, retry.Undecided, Classify(o), "Classify knows no extra codes")
	assert.Equal(t, retry.Undecided, NewClassifier()(retry.Outcome{Response: newResponse(400, nil, `{"code":""}`)}))
}

func TestClassifyRoute53Sequence(t *testing.T) {
	// A mock Route 53 that throttles, then is busy, then rejects the
	// input, classified as the Transport would with Classify in front.
	mock := httpmock.NewMockTransport()
	responses := []*http.Response{
		httpmock.NewStringResponse(400, route53Throttling),
		httpmock.NewStringResponse(400, route53Prior),
		httpmock.NewStringResponse(400, route53Invalid),
		httpmock.NewStringResponse(200, `<ChangeResourceRecordSetsResponse/>`),
	}
	mock.RegisterResponder(http.MethodPost, "https://route53.amazonaws.com/2013-04-01/hostedzone/Z1/rrset",
		httpmock.ResponderFromMultipleResponses(responses))
	classify := retry.Chain(Classify, retry.DefaultClassifier)

	want := []Class{retry.Throttled, retry.Throttled, retry.Permanent, retry.Success}
	bodies := []string{route53Throttling, route53Prior, route53Invalid, `<ChangeResourceRecordSetsResponse/>`}
	for i := range want {
		req := httptest.NewRequest(http.MethodPost, "https://route53.amazonaws.com/2013-04-01/hostedzone/Z1/rrset",
			strings.NewReader("<ChangeResourceRecordSetsRequest/>"))
		resp, err := mock.RoundTrip(req)
		require.NoError(t, err)
		got := classify(retry.Outcome{Request: req, Response: resp, Attempt: i + 1, Wrote: retry.WroteRequest})
		assert.Equal(t, want[i], got, "attempt %d", i+1)
		all, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		assert.Equal(t, bodies[i], string(all), "attempt %d body", i+1)
		resp.Body.Close()
	}
}

func TestClassifyRealResponse(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/xml")
		w.WriteHeader(http.StatusBadRequest)
		io.WriteString(w, route53Throttling)
	}))
	defer srv.Close()
	client := srv.Client()
	defer client.CloseIdleConnections()

	req, err := http.NewRequest(http.MethodPost, srv.URL+"/2013-04-01/hostedzone/Z1/rrset", strings.NewReader("<x/>"))
	require.NoError(t, err)
	resp, err := client.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	assert.Equal(t, retry.Throttled, Classify(retry.Outcome{Request: req, Response: resp, Attempt: 1}))
	all, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	assert.Equal(t, route53Throttling, string(all))
}

func FuzzErrorCode(f *testing.F) {
	for _, body := range []string{route53Throttling, s3SlowDown, ec2Limit, dynamoThrottle,
		`{"Error":{"Code":"Throttling"}}`, "<Error><Code>", `{"__type":`, "\x00\xff"} {
		f.Add(body, "")
	}
	f.Add("", "ThrottlingException:http://x")
	f.Fuzz(func(t *testing.T, body, header string) {
		resp := newResponse(400, http.Header{"X-Amzn-Errortype": {header}}, body)
		code, ok := ErrorCode(resp)
		if ok != (code != "") {
			t.Fatalf("ErrorCode = %q, %v", code, ok)
		}
		if ok && (len(code) > maxCodeLen || strings.ContainsAny(code, " \t\r\n:#")) {
			t.Fatalf("ErrorCode = %q: not a code", code)
		}
		all, err := io.ReadAll(resp.Body)
		if err != nil || !bytes.Equal([]byte(body), all) {
			t.Fatalf("body after ErrorCode = %q, %v; want %q", all, err, body)
		}
	})
}

// RateRefusal tells a Pacer that a conflict is no refusal for the rate,
// every other throttle code is, and an answer without a code is what
// retry.RateLimited says (a bare 503 is an outage, unless it names a
// wait); it leaves the body whole for the caller.
func TestRateRefusal(t *testing.T) {
	require.True(t, slices.IsSorted(conflictCodes), "IsConflictCode's binary search needs a sorted list")
	for _, code := range conflictCodes {
		assert.True(t, IsThrottleCode(code), "conflict code %q is no throttle code: the Transport would not replay it", code)
	}
	dynamoConflict := `{"__type":"com.amazonaws.dynamodb.v20120810#TransactionInProgressException","message":"Transaction is ongoing for the item"}`
	slowDown := `<Error><Code>SlowDown</Code><Message>Please reduce your request rate.</Message></Error>`
	for _, tt := range []struct {
		name   string
		status int
		header http.Header
		body   string
		hinted bool
		want   bool
	}{
		{"Route 53 Throttling", 400, nil, route53Throttling, false, true},
		{"Route 53 PriorRequestNotComplete", 400, nil, route53Prior, false, false},
		{"DynamoDB ProvisionedThroughputExceededException", 400, nil, dynamoThrottle, false, true},
		{"DynamoDB TransactionInProgressException", 400, nil, dynamoConflict, false, false},
		{"conflict in x-amzn-ErrorType", 400, http.Header{"X-Amzn-Errortype": {"PriorRequestNotComplete:http://internal"}}, "", false, false},
		{"429 without a body", 429, nil, "", false, true},
		{"503 with a body that is no error document", 503, nil, "<html>busy</html>", false, false},
		{"503 with a server wait", 503, http.Header{"Retry-After": {"1"}}, "", true, true},
		{"S3 503 SlowDown", 503, nil, slowDown, false, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			resp := newResponse(tt.status, tt.header, tt.body)
			assert.Equal(t, tt.want, RateRefusal(retry.Feedback{Class: retry.Throttled, Response: resp, Hinted: tt.hinted}))
			b, err := io.ReadAll(resp.Body)
			require.NoError(t, err)
			assert.Equal(t, tt.body, string(b), "the body after RateRefusal")
		})
	}
	assert.True(t, RateRefusal(retry.Feedback{Class: retry.Throttled}), "no response")
}

// Through a Transport over a real server: a POST answered three times
// PriorRequestNotComplete, then accepted, after an earlier call the
// server accepted. The Pacer with RateRefusal never engages; without it,
// the conflicts engage it. The server counts the executions and the
// caller gets the final answer's body.
func TestRateRefusalThroughTransport(t *testing.T) {
	const conflicts = 4 // in a row after a success, they engage a new key (pace.Pacer)
	for _, withRefusal := range []bool{true, false} {
		t.Run(fmt.Sprint("Refusal=", withRefusal), func(t *testing.T) {
			var n atomic.Int32
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				body, _ := io.ReadAll(r.Body)
				if string(body) != "<change/>" {
					w.WriteHeader(http.StatusInternalServerError)
					return
				}
				w.Header().Set("Content-Type", "text/xml")
				if i := n.Add(1); i > 1 && i <= conflicts+1 {
					w.WriteHeader(http.StatusBadRequest)
					io.WriteString(w, route53Prior)
					return
				}
				io.WriteString(w, "<ChangeResourceRecordSetsResponse/>")
			}))
			defer srv.Close()
			pacer := &pace.Pacer{}
			if withRefusal {
				pacer.Refusal = RateRefusal
			}
			base := srv.Client().Transport
			rt := retry.New(base, retry.WithClassifier(Classify), retry.WithPacer(pacer),
				retry.WithBackoff(retry.Constant{Base: time.Millisecond}), retry.WithMaxAttempts(conflicts+1))
			client := &http.Client{Transport: rt}
			defer client.CloseIdleConnections()
			var resp *http.Response
			for range 2 {
				req, err := http.NewRequest(http.MethodPost, srv.URL+"/2013-04-01/hostedzone/Z1/rrset", strings.NewReader("<change/>"))
				require.NoError(t, err)
				resp, err = client.Do(req)
				require.NoError(t, err)
				if n.Load() == 1 {
					resp.Body.Close()
				}
			}
			all, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			require.NoError(t, err)
			assert.Equal(t, http.StatusOK, resp.StatusCode)
			assert.Equal(t, "<ChangeResourceRecordSetsResponse/>", string(all))
			assert.Equal(t, int32(conflicts+2), n.Load(), "executions")
			_, engaged := pacer.Rate(strings.TrimPrefix(srv.URL, "http://"))
			assert.Equal(t, !withRefusal, engaged, "engaged by PriorRequestNotComplete")
		})
	}
}
