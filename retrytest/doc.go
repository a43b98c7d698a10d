// Package retrytest helps test code that sends through a
// [github.com/backoff-jitter/retry.Transport]:
//
//   - [Clock], a fake clock the Transport accepts (retry.WithClock), that
//     records every wait and never sleeps, and whose timers (the
//     Transport's attempt timeouts and drain bound) run when the test
//     advances it; a pace.Pacer or breaker.Breaker takes the same clock
//     in its Clock field;
//   - [Script], a RoundTripper to give the Transport as its base, whose
//     steps answer (with any header, Retry-After included), fail before
//     the request is written (unsent), fail after it was written (a
//     reset), reset an HTTP/2 stream as refused, fail as a GOAWAY after the
//     request was written, and record every
//     attempt;
//   - [Executions], a handler for a real server that counts the requests
//     it executes per request id, to assert that a request was never
//     executed twice.
//
// It depends on the standard library alone.
package retrytest
