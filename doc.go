// Package retry is an [http.RoundTripper] that retries failed HTTP requests
// with capped backoff and jitter, the way the AWS Architecture Blog's
// "Exponential Backoff And Jitter" recommends, safely and observably.
//
// One line makes a client survive a flaky or rate-limited API:
//
//	client := &http.Client{Transport: retry.New(nil)}
//
// or, the same thing, client := retry.NewClient().
//
// # Three uses
//
// A drop-in [http.Client]: [New] wraps any transport (nil means a pooled
// one of its own) and [NewClient] makes the client. Code that already takes
// an *http.Client needs no other change; see Example (HttpClient).
//
// A rate-limited API: tell the Transport how the API says "slow down" and
// how patient to be. Route 53 allows five requests a second per account
// and answers the sixth with HTTP 400 and the code Throttling; package
// awsretry's Classify reads such codes:
//
//	rt := retry.New(nil,
//		retry.WithClassifier(awsretry.Classify),
//		retry.WithMaxAttempts(20),
//		retry.WithBackoff(retry.Exponential{Base: 400 * time.Millisecond, Cap: 1600 * time.Millisecond, Jitter: retry.EqualJitter}),
//		retry.WithMaxRetryAfter(20*time.Second),
//	)
//
// Callers that queue for a rate limit wait as long as the queue is, far
// longer than a server takes to recover from a blip: the defaults (4
// attempts, 0.35s of waiting on average) give up too soon. The program in
// examples/route53 runs the AWS SDK for Go v2's Route 53 client through
// such a Transport (with the SDK's own retries off, aws.NopRetryer) against
// a fake Route 53 and explains each setting. The SDK signs a request
// before it reaches the Transport, so a retry replays the signature: AWS
// accepts it while the request's X-Amz-Date is within five minutes of its
// clock (in most cases), so keep the retries of a signed request well inside
// that, with a deadline on its context and a MaxRetryAfter well under the
// default, which is exactly 5 minutes. See Example (RateLimitedAPI).
//
// An SDK wrapper: a client library for an API gives each kind of call the
// settings it needs, all over one connection pool: reads retried freely,
// writes carrying an Idempotency-Key made once per call (the same on every
// attempt, so the server acts once), hooks wired to [log/slog] through
// [SlogHook] and to the library's counters, a deadline on every call. See
// Example (SdkWrapper) and the program in examples/sdkwrapper.
//
// # What is retried
//
// Each attempt's outcome is sorted into a [Class] by a [Classifier]
// ([DefaultClassifier] unless you add your own in front of it, whose
// documentation is the table of which statuses and errors fall where):
// [Throttled] and [Unsent] outcomes (the server refused the request without
// processing it, or it never left) are retried for every method;
// [Transient] ones (it may have been processed) only when a replay is
// safe, an idempotent method (GET, HEAD, OPTIONS, TRACE, PUT, DELETE) or
// a non-empty Idempotency-Key header, sent unchanged on every attempt; [Permanent]
// ones never.
//
// So a POST is never sent twice by accident: after a 500 or a reset it is
// returned to the caller, unless it carries an Idempotency-Key.
//
// # HTTP/1.1 and HTTP/2
//
// The default base speaks HTTP/1.1, and HTTP/2 with TLS servers that offer
// it; every promise here holds over both, and over HTTP/2 in cleartext.
// A request counts as unsent only when no connection was handed to it (or
// its HTTP/2 stream was refused): net/http's HTTP/2 client may still be
// flushing the headers when an attempt times out. net/http's HTTP/2 client
// replays by itself a request it can rewind after a stream reset, and one
// without a body always; the attempts of an unsafe request carry no
// GetBody, and a replay of one without a body is cancelled before it is
// written (so such a request whose stream is refused after it was written
// whole is returned, not replayed). The caller's body is closed exactly
// once, also when net/http drops a replay body it made, and when the
// request's context ends while the body blocks. [Transport.AttemptTimeout]
// ends an attempt with [ErrAttemptTimeout] on both protocols, and does not
// bound reading the body of the response returned.
//
// # Waits
//
// The wait before retry n is the [Backoff]'s delay ([DefaultBackoff]:
// Exponential{Base: 100ms, Cap: 20s, Jitter: FullJitter}). A server's
// Retry-After (and the other headers [ServerWait] reads) is a floor under
// it, honoured up to [Transport.MaxRetryAfter] (5 minutes by default): a
// server asking for longer gets its response returned at once, and so does
// any wait that would end past the request context's deadline. Waits end
// early when the context is done, or the request's deprecated Cancel
// channel is closed.
//
// A retry budget ([TokenBucket], one per Transport unless you share one
// with [WithBudget]) stops the retries when they fail everywhere, so that
// clients stop multiplying the load on a server that is down. A [Pacer]
// spaces the attempts: every Transport has one of its own, which paces
// nothing for a host until it refuses requests for their rate
// ([RateLimited]), then learns the host's rate from the refusals, so that
// a rate-limited API is finished instead of failed (a retry paced so
// costs the budget nothing). Package
// [github.com/backoff-jitter/retry/pace] configures it ([WithPacer]);
// [NoPacer] turns it off. A [Breaker] ([WithBreaker]) fails calls to a
// failing host at once; package [github.com/backoff-jitter/retry/breaker]
// provides one circuit per host.
//
// # Hedging
//
// A [Hedge] ([WithHedge]), off by default, sends a copy of a request
// that is safe to replay when it goes unanswered for a delay, and returns
// the first answer not worth retrying, cancelling the others. Copies are
// attempts: they count towards MaxAttempts, wait for the Pacer, ask the
// Breaker and spend the budget, so hedging cannot multiply the load on a
// struggling server. An unsafe request is never hedged.
//
// # Bodies
//
// Every attempt sends exactly the caller's bytes. A request with GetBody
// (bytes.Reader, strings.Reader, bytes.Buffer bodies) is replayed with it,
// without a copy; any other body is streamed on the first attempt and
// copied aside, up to [Transport.MaxBufferedBody] (8 MiB by default). A
// larger body is sent once and not retried. A body that contradicts its
// ContentLength (any body, and any body GetBody yields) fails once, as the
// caller's error. Discarded responses are drained (up to 64 KiB) and
// closed, so their connections are reused. The body of a 101 Switching
// Protocols response keeps its write side.
//
// # The end
//
// When attempts run out on a response, that response is returned, unread,
// with a nil error. When they run out on an error, RoundTrip returns an
// [*Error] that wraps it and says how many attempts were made and why the
// Transport stopped.
//
// # Observability
//
// Nothing is logged by default. [Transport.OnRetry] and [Transport.OnGiveUp]
// see every failed attempt, its class and the delay chosen; [SlogHook]
// adapts them to [log/slog]. [Transport.OnDone] sees every call once, as
// it returns, with a [Summary] for metrics; [StopReason.Label] names its
// reason for a label, and [StopReason.GaveUp] tells retries that ran out
// from outcomes that are never retried. The base transport sees the
// attempt number through [Attempt] on the request's context, and
// optionally as a header ([WithAttemptHeader]); the module otelretry puts
// it on each attempt's OpenTelemetry span.
//
// # Per-request settings
//
// [ContextWithOptions] puts options on a request's context that apply over
// the Transport's settings for that request only, over the same
// connections and budget: WithMaxAttempts(1) turns retries off for one
// call. A zero value keeps the Transport's setting, and a hook given this
// way runs after the Transport's own. The Transport's own fields are read
// once, at first use.
package retry
