package main

import (
	"bytes"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

// TestRun runs the quickstart against its own server and checks the story
// it tells: which requests were retried, which were not, and why.
func TestRun(t *testing.T) {
	var out bytes.Buffer
	if err := run(&out); err != nil {
		t.Fatalf("run: %v", err)
	}
	got := out.String()
	for _, want := range []string{
		"retry in 1s (server's Retry-After)",
		"attempt 3: 200 OK",
		"connection reset by peer",
		"transient -> stop: unsafe to replay",
		"=> 500 Internal Server Error",
		"=> 201 Created",
		"permanent -> stop: not retryable",
		"Summary: 7 requests, 5 succeeded, 2 failed",
		"13 attempts reached the server",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q:\n%s", want, got)
		}
	}
}

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
