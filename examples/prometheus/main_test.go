package main

import (
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The run exports every retry series a user would chart: attempts,
// retries by class, give-ups, the waits, the budget and the Pacer.
func TestRun(t *testing.T) {
	var out strings.Builder
	if err := run(&out); err != nil {
		t.Fatal(err)
	}
	t.Log(out.String())
	for _, series := range []string{
		"retry_client_attempts_total",
		"retry_client_retries_total",
		`retry_class="throttled"`,
		"retry_client_wait_duration_seconds_count",
		"retry_client_budget_tokens",
		"retry_client_pacer_keys",
	} {
		if !strings.Contains(out.String(), series) {
			t.Errorf("no %s in:\n%s", series, out.String())
		}
	}
}
