package awsretry_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/backoff-jitter/retry"
	"github.com/backoff-jitter/retry/awsretry"
	"github.com/backoff-jitter/retry/pace"
)

func ExampleClassify() {
	// A stand-in for Route 53: a burst of changes gets HTTP 400 with the
	// code Throttling, and a bad change gets HTTP 400 InvalidInput.
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		code := "Throttling"
		if r.URL.Query().Has("bad") {
			code = "InvalidInput"
		}
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprintf(w, `<ErrorResponse xmlns="https://route53.amazonaws.com/doc/2013-04-01/">`+
			`<Error><Type>Sender</Type><Code>%s</Code><Message>...</Message></Error>`+
			`<RequestId>1</RequestId></ErrorResponse>`, code)
	}))
	defer srv.Close()
	defer srv.Client().CloseIdleConnections()

	// The Transport falls back to retry.DefaultClassifier when Classify
	// is Undecided; Chain spells that out.
	classify := retry.Chain(awsretry.Classify, retry.DefaultClassifier)
	for _, url := range []string{srv.URL, srv.URL + "?bad"} {
		req, _ := http.NewRequest(http.MethodPost, url, nil)
		resp, err := srv.Client().Do(req)
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Println(resp.StatusCode, awsretry.Classify(retry.Outcome{Request: req, Response: resp, Attempt: 1}),
			classify(retry.Outcome{Request: req, Response: resp, Attempt: 1}))
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	// Output:
	// 400 throttled throttled
	// 400 undecided permanent
}

func ExampleErrorCode() {
	resp := &http.Response{
		StatusCode: http.StatusBadRequest,
		Header: http.Header{
			"X-Amzn-Errortype": {"ThrottlingException:http://internal.amazon.com/coral/com.amazon.coral.availability/"},
		},
		Body: http.NoBody,
	}
	code, ok := awsretry.ErrorCode(resp)
	fmt.Println(code, ok, awsretry.IsThrottleCode(code))
	// Output: ThrottlingException true true
}

func ExampleRateRefusal() {
	// Route 53 answers a burst with Throttling, and a change to a zone
	// whose last change is still pending with PriorRequestNotComplete.
	// Both are replayed; only Throttling says the rate is too high.
	pacer := &pace.Pacer{Refusal: awsretry.RateRefusal}
	rt := retry.New(nil, retry.WithClassifier(awsretry.Classify), retry.WithPacer(pacer))
	_ = &http.Client{Transport: rt}

	for _, code := range []string{"Throttling", "PriorRequestNotComplete"} {
		resp := &http.Response{
			StatusCode: http.StatusBadRequest,
			Header:     http.Header{},
			Body: io.NopCloser(strings.NewReader(`<ErrorResponse xmlns="https://route53.amazonaws.com/doc/2013-04-01/">` +
				`<Error><Type>Sender</Type><Code>` + code + `</Code></Error></ErrorResponse>`)),
		}
		fmt.Println(code, awsretry.RateRefusal(retry.Feedback{Class: retry.Throttled, Response: resp}))
	}
	// Output:
	// Throttling true
	// PriorRequestNotComplete false
}
