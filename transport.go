package retry

import (
	"context"
	"net/http"
	"sync"
	"time"
)

// Defaults of a [Transport] whose fields are zero.
const (
	DefaultMaxAttempts     = 4
	DefaultMaxRetryAfter   = 5 * time.Minute
	DefaultMaxBufferedBody = 8 << 20
)

// DefaultBackoff is the backoff of a [Transport] whose Backoff is nil:
// capped exponential backoff with full jitter, as the AWS Architecture Blog
// recommends. Before retry n it waits uniform(0, min(20s, 100ms·2^(n-1))).
var DefaultBackoff Backoff = Exponential{Base: 100 * time.Millisecond, Cap: 20 * time.Second, Jitter: FullJitter}

// Transport is an [http.RoundTripper] that retries failed requests with
// backoff and jitter, replays request bodies, and never replays a request
// the server may already have processed unless that is safe.
//
// The zero value is usable: every zero field means the default stated on
// it. The Transport reads its fields once, at first use (its first
// RoundTrip, Validate or CloseIdleConnections call), and never again: a
// field changed after that changes nothing, and must not be changed
// during it. A Transport is safe for concurrent use by multiple
// goroutines.
//
// The Transport calls its Classifier, its hooks and its Pacer's methods
// from the goroutines of concurrent RoundTrip calls: they must be safe for
// concurrent use.
type Transport struct {
	// Base sends each attempt. If nil, the Transport makes one
	// [cleanhttp.DefaultPooledTransport] of its own on first use, with
	// [ProxyConnectResponse] as its OnProxyConnectResponse hook.
	Base http.RoundTripper

	// MaxAttempts is the total number of tries, the first included.
	// Zero means DefaultMaxAttempts (4); 1 means no retries.
	MaxAttempts int

	// Backoff chooses the wait before each retry. Nil means [DefaultBackoff].
	Backoff Backoff

	// Classifier sorts each attempt's outcome. Where it answers
	// [Undecided], or it is nil, [DefaultClassifier] decides. It is called
	// from concurrent RoundTrips and must be safe for concurrent use.
	Classifier Classifier

	// MaxRetryAfter is the longest server-requested wait (Retry-After and
	// the other headers [ServerWait] reads) that is honoured. A response
	// asking for longer is returned at once instead of slept on. Zero
	// means DefaultMaxRetryAfter (5 minutes).
	MaxRetryAfter time.Duration

	// MaxBufferedBody is the largest request body, in bytes, kept for
	// replay when the request has no GetBody. A larger body is sent once
	// and not retried. Zero means DefaultMaxBufferedBody (8 MiB).
	MaxBufferedBody int64

	// AttemptTimeout, if positive, bounds each attempt until its response
	// headers arrive and are classified: an attempt still waiting then is
	// cancelled, with [ErrAttemptTimeout] as its context's cause, and
	// counts as transient (or unsent, when no connection was handed to
	// it). It does not bound reading the body of the response RoundTrip
	// returns: that response's context lives until its body is closed,
	// bounded by the request's context, so bound the whole call with a
	// context deadline or [http.Client.Timeout]. Zero means attempts are
	// bounded only by the request's context.
	//
	// An attempt that a retry could follow (the request is replay-safe,
	// attempts are left, and the Budget affords a retry) waits at most
	// half the time left before the request's deadline, so that its
	// retry has the other half; the last attempt waits the whole
	// AttemptTimeout, or until the deadline.
	AttemptTimeout time.Duration

	// StallTimeout, if positive, bounds the wait for the next bytes of
	// the body of the response RoundTrip returns: a Read that gets
	// nothing for that long fails with [ErrBodyStalled], and the
	// response's connection is closed. Only a Read that waits counts: a
	// caller that reads slowly never stalls its body. Zero, the default,
	// leaves the body bounded by the request's context alone, since some
	// bodies are quiet by design (server-sent events, long polls, watch
	// streams).
	StallTimeout time.Duration

	// Resumes is how many times the body of one response may be resumed
	// when reading it fails midway with a transport error (a reset, a
	// proxy's cut, an HTTP/2 GOAWAY, a stall under StallTimeout): the
	// rest is asked for with Range and If-Range, checked to be the rest
	// of the same representation, and read on as if nothing broke. Zero
	// means [DefaultResumes]; a negative number turns resuming off.
	//
	// Only a GET answered 200 with a strong validator (a strong ETag, or
	// a Last-Modified a second or more before the response's Date) is
	// resumed; never a request with its own Range header, a body with a
	// Content-Encoding or decoded by net/http, or multipart/byteranges.
	// An answer that is not the rest (a 200, another validator, another
	// range) is never spliced: the Read fails with a [*ResumeError]. A
	// resume is no attempt of the call, which has ended: it takes a Pacer
	// turn, asks the Breaker, runs BeforeAttempt (a signed request is
	// signed anew) and is charged to the Budget as a transient retry, and
	// OnResume is told of it. A resume after bytes were read goes at
	// once; one that follows a resume that read nothing waits the
	// Backoff's wait, growing with each in a row.
	Resumes int

	// OnResume, if set, is called after each resume of a body.
	OnResume func(ResumeEvent)

	// RateLimitReset declares how a response's X-RateLimit-Reset header is
	// read. Zero ignores it, since its meaning varies between APIs.
	RateLimitReset ResetFormat

	// LongWait says what to do with a server wait longer than
	// MaxRetryAfter: return the response at once (ReturnLongWait, the
	// zero value) or wait MaxRetryAfter and retry anyway (CapLongWait).
	LongWait LongWait

	// WaitFloor, if not nil, gives an outcome a floor under the wait
	// before its retry, as Retry-After is one: for a server whose rule
	// is written in its documentation rather than in a header (GitHub
	// asks for at least a minute after a secondary rate limit sent
	// without Retry-After). Zero means none. The floor counts as a
	// server's wait: the longer of it and the headers' wait is the
	// server's, held against MaxRetryAfter, LongWait and
	// ServerWaitJitter as they are. It is called from concurrent
	// RoundTrips and must be safe for concurrent use; it may peek at the
	// response body with [PeekBody].
	WaitFloor func(Outcome) time.Duration

	// ServerWaitJitter, if not nil, spreads a server's wait above the
	// wait it asked for, so that clients told the same Retry-After do not
	// all come back at the same moment: Spread(0.1) waits up to a tenth
	// longer. The wait is never shorter than the server's, nor longer
	// than MaxRetryAfter. Nil waits exactly what the server asked (or the
	// backoff's delay, when that is longer).
	ServerWaitJitter Jitter

	// AttemptHeader, if not empty, names a request header set to the
	// attempt number (1, 2, ...) on every attempt, as the AWS SDK's
	// amz-sdk-request or Envoy's x-envoy-attempt-count.
	AttemptHeader string

	// Budget is asked before every retry and told of every success, so
	// retries stop when they fail everywhere. Nil means a [TokenBucket]
	// of the Transport's own with the default settings, made on first use;
	// [NoBudget] means no budget. Pass one TokenBucket to several
	// Transports to share it.
	Budget Budget

	// Pacer spaces the attempts: every attempt, the first included, waits
	// for its turn. Nil means a Pacer of the Transport's own, made on first
	// use: package [github.com/backoff-jitter/retry/pace]'s with its
	// defaults, which paces nothing for a host until the host refuses
	// requests for their rate (and then learns the host's rate from its
	// refusals), at the cost of a map lookup, two clock reads and a few
	// atomic operations per attempt, and no allocation. [NoPacer] turns pacing off. A pace.Pacer of your own
	// configures it, and may be shared by several Transports.
	Pacer Pacer

	// Breaker, if not nil, is asked before every attempt, the first
	// included, and fails the call at once, before anything is sent,
	// while the circuit of the request's key is open (reason
	// StopBreaker). Package [github.com/backoff-jitter/retry/breaker]
	// provides one per host. Nil means no circuit breaking.
	Breaker Breaker

	// Key maps a request to the server state it counts against: its
	// Pacer key, its circuit, its hedging latency window. Nil means the
	// request's host (URL.Host). A Pacer or Breaker with a Key of its own
	// uses that instead. Key is called once per call, and must be safe for
	// concurrent use. See [RequestKey].
	Key func(*http.Request) string

	// Hedge, if its Delay is set, sends copies of an attempt that goes
	// unanswered that long, when the request is safe to replay, and
	// returns the first answer not worth retrying (see [Hedge]). The zero
	// value is no hedging.
	Hedge Hedge

	// OnRetry, if not nil, is called before the wait that precedes each
	// retry. Like OnGiveUp and OnDone, it is called on the goroutine of
	// the RoundTrip it reports on, so from concurrent RoundTrips at once:
	// each hook must be safe for concurrent use, and should be quick, as
	// the call waits for it.
	OnRetry func(Event)

	// OnGiveUp, if not nil, is called when a failed outcome is returned:
	// Event.Reason says why no further attempt was made. It is called for
	// outcomes that are not retried at all, such as an ordinary 404, too:
	// their Reason is StopPermanent, and [StopReason.GaveUp] reports false.
	OnGiveUp func(Event)

	// OnDone, if not nil, is called once per call of RoundTrip, as it
	// returns, successes included: the [Summary] says how many attempts
	// it took, how long it waited and how it ended.
	OnDone func(Summary)

	// OnHedge, if not nil, is called as each copy of a hedged attempt is
	// sent: Event.Attempt is the copy's number, Event.Delay the hedge
	// delay it waited for. Like the other hooks it is called from
	// concurrent RoundTrips and must be safe for concurrent use.
	OnHedge func(Event)

	// BeforeAttempt, if not nil, is called before each attempt is sent,
	// the first included, with the attempt's request: a clone whose
	// header the hook may change, to sign the request again (a SigV4
	// signature expires) or to set a token refreshed after a 401. It runs
	// after the wait and the Pacer's turn, just before the request goes
	// to Base, so what it sets is as fresh as it can be. An error it
	// returns ends the call before anything more is sent: RoundTrip
	// returns an [*Error] that wraps it, with reason StopBeforeAttempt.
	// Whether a request may be replayed is decided from the caller's
	// request, not from what the hook sets. Like the other hooks it is
	// called from concurrent RoundTrips and must be safe for concurrent
	// use.
	BeforeAttempt func(Prepare) error

	// Clock, if not nil, is the clock the Transport reads and sleeps on
	// between attempts, and times hedges by: a fake one in tests, such as
	// [github.com/backoff-jitter/retry/retrytest.Clock]. Nil means the
	// real one. A [TimerClock] (retrytest.Clock is one) also drives
	// AttemptTimeout and the bound on draining a discarded body. The
	// Transport's own Pacer uses it too; a pace.Pacer or breaker.Breaker
	// given to the Transport has a Clock field of its own, which a test
	// sets to the same clock. Context deadlines stay on the real clock:
	// start a fake clock at time.Now() when requests carry them.
	Clock Clock

	// Random, if not nil, supplies the uniform numbers in [0, 1) that the
	// backoff's jitter and ServerWaitJitter draw: a fixed one makes a
	// test's waits exact. Nil means math/rand/v2. It must be safe for
	// concurrent use.
	Random func() float64

	// Seams of this package's tests: the clock, the sleep and the random
	// source.
	now   func() time.Time
	sleep func(ctx context.Context, d time.Duration) error
	rand  func() float64

	// hedgeSet records that WithHedge was given, so that NoHedge among a
	// request's options turns hedging off (see ContextWithOptions).
	hedgeSet bool

	once       sync.Once
	resolved   settings
	resolveErr error
}

// Clock is what a [Transport] reads the time from and sleeps on between
// attempts. Sleep must return ctx's error as soon as ctx is done.
type Clock interface {
	Now() time.Time
	Sleep(ctx context.Context, d time.Duration) error
}

// New returns a Transport that sends through base, configured by opts.
// A nil base means one [cleanhttp.DefaultPooledTransport] per Transport.
func New(base http.RoundTripper, opts ...Option) *Transport {
	t := &Transport{Base: base}
	for _, o := range opts {
		if o != nil {
			o(t)
		}
	}
	return t
}

// NewClient returns an [http.Client] whose Transport is New(nil, opts...).
func NewClient(opts ...Option) *http.Client {
	return &http.Client{Transport: New(nil, opts...)}
}

// Validate reports whether t's settings are valid. RoundTrip returns the
// same error, without sending anything, when they are not.
func (t *Transport) Validate() error {
	_, err := t.settings()
	return err
}

// CloseIdleConnections closes the idle connections of the base transport,
// if it has such a method.
func (t *Transport) CloseIdleConnections() {
	s, _ := t.settings()
	if ci, ok := s.base.(interface{ CloseIdleConnections() }); ok {
		ci.CloseIdleConnections()
	}
}

type attemptKey struct{}

// Attempt returns the attempt number a Transport put in the context of
// the request it passes to its base transport: 1 for the first attempt.
// It returns 0 for a context that carries none.
func Attempt(ctx context.Context) int {
	n, _ := ctx.Value(attemptKey{}).(int)
	return n
}

// RoundTrip sends req through the base transport, retrying as the
// Transport's settings say. It implements [http.RoundTripper]: req is not
// modified, and its body is closed, also on errors.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	s, err := t.settings()
	if opts, _ := req.Context().Value(optionsKey{}).([]Option); err == nil && len(opts) > 0 {
		var own *settings
		if own, err = s.withOptions(opts); err == nil {
			s = own
		}
	}
	if err == nil {
		err = checkContentLength(req)
	}
	r := roundTrip{s: s, req: req}
	if err == nil {
		r.req = s.withKey(req)
	}
	if s.timed() {
		r.timed, r.start = true, s.now()
	}
	var resp *http.Response
	if err != nil {
		// Invalid settings or a body that contradicts its length: nothing
		// is sent, and RoundTrip still owns the body.
		closeRequestBody(req)
		r.end, r.reason = Permanent, StopPermanent
	} else {
		r.safe = ReplaySafe(req)
		resp, err = r.run()
		if err == nil {
			resp = r.resumable(resp)
		}
	}
	if h := s.onDone; h != nil {
		h(r.summary(resp, err))
	}
	return resp, err
}
