package main

import (
	"bytes"
	"strings"
	"testing"

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

// Outcomes that are no failure leave gobreaker's counts alone.
func TestExcluded(t *testing.T) {
	var got []error
	tr := turn(func(err error) { got = append(got, err) })
	tr.Done(retry.Feedback{Class: retry.Throttled})
	tr.Abandon()
	tr.Done(retry.Feedback{Class: retry.Transient})
	tr.Done(retry.Feedback{Class: retry.Success})
	if len(got) != 4 || got[0] != errExcluded || got[1] != errExcluded || got[2] != errFailed || got[3] != nil {
		t.Errorf("reported %v", got)
	}
}
