package main

import (
	"bytes"
	"net/http"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/backoff-jitter/retry"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The breaker opens after three failures: calls 4 to 6 send nothing.
func TestRun(t *testing.T) {
	var out bytes.Buffer
	if err := run(&out); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"call 1: 500 Internal Server Error",
		"call 2: 500 Internal Server Error",
		"call 3: 500 Internal Server Error",
		"call 4: circuit open, not sent",
		"call 5: circuit open, not sent",
		"call 6: circuit open, not sent",
		"the server saw 3 requests",
	}
	if got := strings.TrimSpace(out.String()); got != strings.Join(want, "\n") {
		t.Errorf("output:\n%s\nwant:\n%s", got, strings.Join(want, "\n"))
	}
}

// Outcomes that are no failure leave gobreaker's counts alone: a rate
// limit's refusal and an abandoned turn. A 503 that names no wait is a
// failure.
func TestExcluded(t *testing.T) {
	var got []error
	tr := turn(func(err error) { got = append(got, err) })
	unavailable := func(h http.Header) *http.Response {
		return &http.Response{StatusCode: http.StatusServiceUnavailable, Header: h}
	}
	tr.Done(retry.Feedback{Class: retry.Throttled, Response: &http.Response{StatusCode: http.StatusTooManyRequests}})
	tr.Done(retry.Feedback{Class: retry.Throttled, Response: unavailable(http.Header{"Retry-After": {"1"}}), Hinted: true, Wait: time.Second})
	tr.Abandon()
	tr.Done(retry.Feedback{Class: retry.Throttled, Response: unavailable(nil)})
	tr.Done(retry.Feedback{Class: retry.Transient})
	tr.Done(retry.Feedback{Class: retry.Success})
	want := []error{errExcluded, errExcluded, errExcluded, errFailed, errFailed, nil}
	if len(got) != len(want) {
		t.Fatalf("reported %v; want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("outcome %d reported %v; want %v", i, got[i], want[i])
		}
	}
}
