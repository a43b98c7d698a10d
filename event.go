package retry

import (
	"context"
	"log/slog"
	"net/http"
	"strconv"
	"time"
)

// Event describes an attempt that failed, for the OnRetry and OnGiveUp hooks.
type Event struct {
	// Request is the caller's request.
	Request *http.Request
	// Attempt is the number of the attempt that failed, 1 for the first.
	Attempt int
	// Class is the attempt's outcome class.
	Class Class
	// StatusCode is the attempt's response status, or 0 when Err is set.
	StatusCode int
	// Err is the attempt's error, or nil when it had a response.
	Err error
	// Duration is how long the attempt took, from handing it to the base
	// transport to its response headers or its error; 0 for an attempt
	// that was not sent.
	Duration time.Duration
	// Delay is the wait before the next attempt (OnRetry only).
	Delay time.Duration
	// FromServer reports whether Delay is the server's requested wait,
	// which was longer than the backoff's (OnRetry only).
	FromServer bool
	// Reason is why no further attempt is made (OnGiveUp only).
	Reason StopReason
}

// StopReason is why a Transport made no further attempt.
type StopReason uint8

const (
	// StopNone is the zero value: the Transport has not stopped.
	StopNone StopReason = iota
	// StopPermanent: the outcome is one another attempt would not fix.
	StopPermanent
	// StopAttempts: MaxAttempts attempts were made.
	StopAttempts
	// StopUnsafe: the request may have been processed and is not safe to
	// replay (a method that is not idempotent, and no Idempotency-Key).
	StopUnsafe
	// StopBody: the request body cannot be sent again (it outgrew
	// MaxBufferedBody, or reading it or GetBody failed).
	StopBody
	// StopServerWait: the server asked for a wait longer than MaxRetryAfter.
	StopServerWait
	// StopDeadline: the next wait would end past the context's deadline.
	StopDeadline
	// StopCanceled: the request's context was done.
	StopCanceled
	// StopBudget: the retry budget refused the retry.
	StopBudget
	// StopRetriesOff: the outcome failed, and retries are off (MaxAttempts
	// is 1). Like StopPermanent, it is no give-up: the call opted out.
	StopRetriesOff
	// StopBeforeAttempt: the BeforeAttempt hook refused the next attempt
	// with an error.
	StopBeforeAttempt
	// StopBreaker: the Breaker refused the next attempt: the circuit of
	// the request's host (or key) is open.
	StopBreaker
)

// Summary describes a call to RoundTrip as it returns, for the OnDone
// hook: every call, successes included.
type Summary struct {
	// Request is the caller's request.
	Request *http.Request
	// Attempts is the number of attempts sent, 0 when none was, the
	// copies of hedged attempts included.
	Attempts int
	// Hedges is how many of the Attempts were copies of hedged attempts
	// (see [Hedge]), and HedgeWon whether the response or error returned
	// is a copy's.
	Hedges   int
	HedgeWon bool
	// Wait is the time spent between attempts: backoff, server waits and
	// pacing.
	Wait time.Duration
	// Elapsed is the time from RoundTrip's start to its return.
	Elapsed time.Duration
	// Class is the class of the last outcome: Success when the call
	// succeeded; Unsent when no attempt was sent because the Pacer
	// refused the first wait, and Permanent when the settings or the
	// request's body length were invalid (Reason says which).
	Class Class
	// Reason is why no further attempt was made; StopNone on success.
	Reason StopReason
	// StatusCode is the status of the response returned, 0 when Err is set.
	StatusCode int
	// Err is the error RoundTrip returns, nil with a response.
	Err error
	// RetryAt is the earliest time another call makes sense, when the
	// call failed and the Transport knew one (see [Ending]).
	RetryAt time.Time
}

var stopReasons = [...]string{
	StopNone:          "not stopped",
	StopPermanent:     "not retryable",
	StopAttempts:      "attempts exhausted",
	StopUnsafe:        "unsafe to replay",
	StopBody:          "body cannot be replayed",
	StopServerWait:    "server wait too long",
	StopDeadline:      "deadline too near",
	StopCanceled:      "context done",
	StopBudget:        "retry budget exhausted",
	StopRetriesOff:    "retries off",
	StopBeforeAttempt: "refused before the attempt",
	StopBreaker:       "circuit open",
}

func (r StopReason) String() string {
	if int(r) < len(stopReasons) {
		return stopReasons[r]
	}
	return "StopReason(" + strconv.Itoa(int(r)) + ")"
}

var stopLabels = [...]string{
	StopNone:          "none",
	StopPermanent:     "not_retryable",
	StopAttempts:      "attempts_exhausted",
	StopUnsafe:        "unsafe_to_replay",
	StopBody:          "body_not_replayable",
	StopServerWait:    "server_wait_too_long",
	StopDeadline:      "deadline_too_near",
	StopCanceled:      "context_done",
	StopBudget:        "budget_exhausted",
	StopRetriesOff:    "retries_off",
	StopBeforeAttempt: "before_attempt",
	StopBreaker:       "circuit_open",
}

// Label returns the reason's name for a metric label or a log field:
// lower case, words joined by underscores ("attempts_exhausted"), and
// stable across releases, unlike String, which is for people.
func (r StopReason) Label() string {
	if int(r) < len(stopLabels) {
		return stopLabels[r]
	}
	return "stop_" + strconv.Itoa(int(r))
}

// GaveUp reports whether the Transport stopped on an outcome it would
// otherwise have retried: attempts or the budget ran out, the deadline was
// too near, the request was unsafe to replay, and so on. It is false for
// StopNone, StopPermanent and StopRetriesOff: an ordinary 404 is not
// retried at all, a call with retries off opted out of them, and a count
// of give-ups should count neither.
func (r StopReason) GaveUp() bool {
	return r != StopNone && r != StopPermanent && r != StopRetriesOff
}

// SlogHook returns a hook for [Transport.OnRetry] or [Transport.OnGiveUp]
// that logs each event to l: the method and URL (without its query, which
// may hold secrets), the attempt, the class, the status or error, and the
// delay or the reason for stopping ([StopReason.Label]).
//
// Retries ("retry") and give-ups ("retry: giving up", [StopReason.GaveUp])
// are logged at level. An outcome that is never retried ("retry: not
// retryable": an ordinary 404) and a failure with retries off ("retry:
// retries off") are not failures of the retrying: they are logged one
// level lower (level - 4, so Info for Warn), to be told from retries that
// ran out, and kept out of a log set at level.
func SlogHook(l *slog.Logger, level slog.Level) func(Event) {
	return func(e Event) {
		ctx := context.Background()
		if e.Request != nil {
			ctx = e.Request.Context()
		}
		msg, at := "retry", level
		switch {
		case e.Reason.GaveUp():
			msg = "retry: giving up"
		case e.Reason == StopPermanent:
			msg, at = "retry: not retryable", level-4
		case e.Reason == StopRetriesOff:
			msg, at = "retry: retries off", level-4
		}
		if !l.Enabled(ctx, at) {
			return
		}
		attrs := make([]slog.Attr, 0, 8)
		if r := e.Request; r != nil && r.URL != nil {
			u := *r.URL
			u.RawQuery, u.Fragment, u.User = "", "", nil
			attrs = append(attrs, slog.String("method", r.Method), slog.String("url", u.String()))
		}
		attrs = append(attrs, slog.Int("attempt", e.Attempt), slog.String("class", e.Class.String()))
		if e.Err != nil {
			attrs = append(attrs, slog.String("error", e.Err.Error()))
		} else {
			attrs = append(attrs, slog.Int("status", e.StatusCode))
		}
		if e.Reason != StopNone {
			attrs = append(attrs, slog.String("reason", e.Reason.Label()))
		} else {
			attrs = append(attrs, slog.Duration("delay", e.Delay), slog.Bool("from_server", e.FromServer))
		}
		l.LogAttrs(ctx, at, msg, attrs...)
	}
}
