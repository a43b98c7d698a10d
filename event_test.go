package retry

import (
	"bytes"
	"log/slog"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

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
	for r := StopNone; r <= StopRetriesOff; r++ {
		want := r != StopNone && r != StopPermanent && r != StopRetriesOff
		assert.Equal(t, want, r.GaveUp(), "%v", r)
	}
}

// SlogHook tells an outcome that is never retried, and one with retries
// off, from retries that ran out: it logs them a level lower, so a log at
// the hook's level has only the retries and give-ups.
func TestSlogHookNotRetryable(t *testing.T) {
	var buf bytes.Buffer
	hook := SlogHook(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo})), slog.LevelWarn)
	req, _ := http.NewRequest("GET", "http://api.example/items?token=secret", nil)
	hook(Event{Request: req, Attempt: 1, Class: Permanent, StatusCode: 404, Reason: StopPermanent})
	hook(Event{Request: req, Attempt: 1, Class: Throttled, StatusCode: 503, Reason: StopRetriesOff})
	hook(Event{Request: req, Attempt: 4, Class: Throttled, StatusCode: 503, Reason: StopAttempts})
	hook(Event{Request: req, Attempt: 1, Class: Throttled, StatusCode: 503, Delay: time.Second})
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if assert.Len(t, lines, 4) {
		assert.Contains(t, lines[0], `level=INFO msg="retry: not retryable"`)
		assert.Contains(t, lines[0], "reason=not_retryable")
		assert.Contains(t, lines[1], `level=INFO msg="retry: retries off"`)
		assert.Contains(t, lines[1], "reason=retries_off")
		assert.Contains(t, lines[2], `level=WARN msg="retry: giving up"`)
		assert.Contains(t, lines[2], "reason=attempts_exhausted")
		assert.Contains(t, lines[3], `level=WARN msg=retry`)
		assert.Contains(t, lines[3], "delay=1s")
	}
	assert.NotContains(t, buf.String(), "secret")

	buf.Reset()
	hook = SlogHook(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelWarn})), slog.LevelWarn)
	hook(Event{Request: req, Attempt: 1, Class: Permanent, StatusCode: 404, Reason: StopPermanent})
	assert.Empty(t, buf.String(), "an ordinary 404 stays out of a log at the hook's level")
}
