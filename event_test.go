package retry

import (
	"bytes"
	"log/slog"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestStopReasonLabels(t *testing.T) {
	label := regexp.MustCompile(`^[a-z]+(_[a-z]+)*$`)
	seen := map[string]StopReason{}
	for r := StopNone; r <= StopBudget; r++ {
		l := r.Label()
		assert.Regexp(t, label, l, "%v", r)
		if prev, dup := seen[l]; dup {
			t.Errorf("%v and %v share the label %q", prev, r, l)
		}
		seen[l] = r
	}
	assert.Equal(t, "attempts_exhausted", StopAttempts.Label())
	assert.Equal(t, "not_retryable", StopPermanent.Label())
	assert.Equal(t, "stop_200", StopReason(200).Label())
}

func TestStopReasonGaveUp(t *testing.T) {
	for r := StopNone; r <= StopBudget; r++ {
		want := r != StopNone && r != StopPermanent
		assert.Equal(t, want, r.GaveUp(), "%v", r)
	}
}

// SlogHook tells an outcome that is never retried from retries that ran
// out.
func TestSlogHookNotRetryable(t *testing.T) {
	var buf bytes.Buffer
	hook := SlogHook(slog.New(slog.NewTextHandler(&buf, nil)), slog.LevelWarn)
	req, _ := http.NewRequest("GET", "http://api.example/items?token=secret", nil)
	hook(Event{Request: req, Attempt: 1, Class: Permanent, StatusCode: 404, Reason: StopPermanent})
	hook(Event{Request: req, Attempt: 4, Class: Throttled, StatusCode: 503, Reason: StopAttempts})
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if assert.Len(t, lines, 2) {
		assert.Contains(t, lines[0], `msg="retry: not retryable"`)
		assert.Contains(t, lines[0], "reason=not_retryable")
		assert.Contains(t, lines[1], `msg="retry: giving up"`)
		assert.Contains(t, lines[1], "reason=attempts_exhausted")
	}
	assert.NotContains(t, buf.String(), "secret")
}
