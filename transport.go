package retry

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptrace"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-cleanhttp"
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

// drainLimit is how much of a discarded response body is read so that its
// connection can be reused, and drainTimeout bounds the time spent on it.
const (
	drainLimit   = 64 << 10
	drainTimeout = time.Second
)

// Transport is an [http.RoundTripper] that retries failed requests with
// backoff and jitter, replays request bodies, and never replays a request
// the server may already have processed unless that is safe.
//
// The zero value is usable: every zero field means the default stated on
// it. Fields must not be changed after the first RoundTrip. A Transport is
// safe for concurrent use by multiple goroutines.
type Transport struct {
	// Base sends each attempt. If nil, the Transport makes one
	// [cleanhttp.DefaultPooledTransport] of its own on first use.
	Base http.RoundTripper

	// MaxAttempts is the total number of tries, the first included.
	// Zero means DefaultMaxAttempts (4); 1 means no retries.
	MaxAttempts int

	// Backoff chooses the wait before each retry. Nil means [DefaultBackoff].
	Backoff Backoff

	// Classifier sorts each attempt's outcome. Where it answers
	// [Undecided], or it is nil, [DefaultClassifier] decides.
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
	AttemptTimeout time.Duration

	// RateLimitReset declares how a response's X-RateLimit-Reset header is
	// read. Zero ignores it, since its meaning varies between APIs.
	RateLimitReset ResetFormat

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

	// Pacer, if not nil, spaces the attempts: every attempt, the first
	// included, waits for its turn. Package
	// [github.com/backoff-jitter/retry/pace] provides one that learns each
	// host's rate from its throttling.
	Pacer Pacer

	// OnRetry, if not nil, is called before the wait that precedes each retry.
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

	// Seams for tests: the clock, the sleep and the random source.
	now   func() time.Time
	sleep func(ctx context.Context, d time.Duration) error
	rand  func() float64

	once   sync.Once
	cfg    config
	cfgErr error
}

// Budget limits retries across requests: when retries fail everywhere it
// refuses them, so that clients stop multiplying the load on a struggling
// server. [TokenBucket] is the one this package provides. Implementations
// must be safe for concurrent use, must not block, and should make Success
// cheap: it is called on every successful request.
type Budget interface {
	// AllowRetry reports whether a retry after an outcome of class c may
	// be made, and takes its cost when it may.
	AllowRetry(c Class) bool
	// Success records an attempt that succeeded. retried is the class
	// of the outcome that attempt was a retry of, or Undecided when it
	// was the first attempt, so a budget can give a retry that worked
	// its cost back.
	Success(retried Class)
}

// config is a Transport's settings with the defaults filled in.
type config struct {
	base          http.RoundTripper
	maxAttempts   int
	backoff       Backoff
	classifier    Classifier
	maxRetryAfter time.Duration
	maxBuffered   int64
	budget        Budget // nil: no budget
}

// Option configures a [Transport]; each sets the field of the same name.
type Option func(*Transport)

// WithMaxAttempts sets [Transport.MaxAttempts]: total tries, the first included.
func WithMaxAttempts(n int) Option { return func(t *Transport) { t.MaxAttempts = n } }

// WithBackoff sets [Transport.Backoff].
func WithBackoff(b Backoff) Option { return func(t *Transport) { t.Backoff = b } }

// WithClassifier sets [Transport.Classifier].
func WithClassifier(c Classifier) Option { return func(t *Transport) { t.Classifier = c } }

// WithMaxRetryAfter sets [Transport.MaxRetryAfter]: the longest
// server-requested wait honoured.
func WithMaxRetryAfter(d time.Duration) Option { return func(t *Transport) { t.MaxRetryAfter = d } }

// WithMaxBufferedBody sets [Transport.MaxBufferedBody]: the largest body
// buffered for replay.
func WithMaxBufferedBody(n int64) Option { return func(t *Transport) { t.MaxBufferedBody = n } }

// WithAttemptTimeout sets [Transport.AttemptTimeout].
func WithAttemptTimeout(d time.Duration) Option { return func(t *Transport) { t.AttemptTimeout = d } }

// WithRateLimitReset sets [Transport.RateLimitReset].
func WithRateLimitReset(f ResetFormat) Option { return func(t *Transport) { t.RateLimitReset = f } }

// WithAttemptHeader sets [Transport.AttemptHeader].
func WithAttemptHeader(name string) Option { return func(t *Transport) { t.AttemptHeader = name } }

// WithBudget sets [Transport.Budget]: WithBudget(NoBudget) turns the
// budget off, and WithBudget(nil), like a nil field, means the default
// one.
func WithBudget(b Budget) Option { return func(t *Transport) { t.Budget = b } }

// WithPacer sets [Transport.Pacer].
func WithPacer(p Pacer) Option { return func(t *Transport) { t.Pacer = p } }

// WithOnRetry sets [Transport.OnRetry].
func WithOnRetry(f func(Event)) Option { return func(t *Transport) { t.OnRetry = f } }

// WithOnGiveUp sets [Transport.OnGiveUp].
func WithOnGiveUp(f func(Event)) Option { return func(t *Transport) { t.OnGiveUp = f } }

// WithOnDone sets [Transport.OnDone].
func WithOnDone(f func(Summary)) Option { return func(t *Transport) { t.OnDone = f } }

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
	_, err := t.config()
	return err
}

func (t *Transport) config() (*config, error) {
	t.once.Do(t.setup)
	return &t.cfg, t.cfgErr
}

func (t *Transport) setup() {
	c := config{
		base:          t.Base,
		maxAttempts:   t.MaxAttempts,
		backoff:       t.Backoff,
		classifier:    t.Classifier,
		maxRetryAfter: t.MaxRetryAfter,
		maxBuffered:   t.MaxBufferedBody,
	}
	if c.base == nil {
		c.base = cleanhttp.DefaultPooledTransport()
	}
	if c.maxAttempts == 0 {
		c.maxAttempts = DefaultMaxAttempts
	}
	if c.backoff == nil {
		c.backoff = DefaultBackoff
	}
	if c.maxRetryAfter == 0 {
		c.maxRetryAfter = DefaultMaxRetryAfter
	}
	if c.maxBuffered == 0 {
		c.maxBuffered = DefaultMaxBufferedBody
	}
	switch t.Budget.(type) {
	case nil:
		c.budget = new(TokenBucket)
	case noBudget:
		// No budget: the loop skips it.
	default:
		c.budget = t.Budget
	}
	t.cfg = c
	t.cfgErr = t.check()
}

// check validates the fields as the user set them.
func (t *Transport) check() error {
	switch {
	case t.MaxAttempts < 0:
		return fmt.Errorf("retry: MaxAttempts %d is negative", t.MaxAttempts)
	case t.MaxRetryAfter < 0:
		return fmt.Errorf("retry: MaxRetryAfter %v is negative", t.MaxRetryAfter)
	case t.MaxBufferedBody < 0:
		return fmt.Errorf("retry: MaxBufferedBody %d is negative", t.MaxBufferedBody)
	case t.AttemptTimeout < 0:
		return fmt.Errorf("retry: AttemptTimeout %v is negative", t.AttemptTimeout)
	case t.RateLimitReset > ResetUnixMillis:
		return fmt.Errorf("retry: RateLimitReset %d is not a known format", t.RateLimitReset)
	case t.AttemptHeader != "" && !isToken(t.AttemptHeader):
		return fmt.Errorf("retry: AttemptHeader %q is not a valid header name", t.AttemptHeader)
	}
	if v, ok := t.Pacer.(interface{ Validate() error }); ok {
		if err := v.Validate(); err != nil {
			return err
		}
	}
	if v, ok := t.Backoff.(interface{ Validate() error }); ok {
		if err := v.Validate(); err != nil {
			return fmt.Errorf("retry: invalid Backoff: %w", err)
		}
	}
	if v, ok := t.Budget.(interface{ Validate() error }); ok {
		if err := v.Validate(); err != nil {
			return fmt.Errorf("retry: invalid Budget: %w", err)
		}
	}
	return nil
}

// CloseIdleConnections closes the idle connections of the base transport,
// if it has such a method.
func (t *Transport) CloseIdleConnections() {
	c, _ := t.config()
	if ci, ok := c.base.(interface{ CloseIdleConnections() }); ok {
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
	c, err := t.config()
	if err == nil {
		t, c, err = t.forRequest(req, c)
	}
	if err == nil {
		err = checkContentLength(req)
	}
	r := roundTrip{t: t, c: c, req: req}
	if t.OnDone != nil || t.OnRetry != nil || t.OnGiveUp != nil {
		r.timed, r.start = true, r.now()
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
	}
	if h := t.OnDone; h != nil {
		h(r.summary(resp, err))
	}
	return resp, err
}

type optionsKey struct{}

// ContextWithOptions returns a copy of ctx that carries opts: a Transport
// sending a request with that context applies them over its own settings,
// for that request only. So one Transport (one connection pool, one
// budget) can turn retries off for one call (WithMaxAttempts(1)), give
// another more attempts or its own backoff or classifier, or hooks of its
// own. Options given this way to a context that already carries some are
// applied after those.
//
// What the options leave unset is the Transport's own: its base
// transport, its budget (a per-request WithBudget(nil) means that one
// too), its Pacer and hooks. Invalid settings fail the request, as they
// would fail every request of a Transport.
func ContextWithOptions(ctx context.Context, opts ...Option) context.Context {
	if prev, ok := ctx.Value(optionsKey{}).([]Option); ok {
		opts = append(slices.Clip(prev), opts...)
	}
	return context.WithValue(ctx, optionsKey{}, opts)
}

// forRequest returns the Transport and settings that send req: t's own,
// or, when req's context carries options, a Transport of req's own made of
// t's fields and them.
func (t *Transport) forRequest(req *http.Request, c *config) (*Transport, *config, error) {
	opts, _ := req.Context().Value(optionsKey{}).([]Option)
	if len(opts) == 0 {
		return t, c, nil
	}
	o := t.clone()
	for _, opt := range opts {
		if opt != nil {
			opt(o)
		}
	}
	// The Transport's connections and budget, not new ones.
	if o.Base == nil {
		o.Base = c.base
	}
	if o.Budget == nil {
		o.Budget = c.budget
		if o.Budget == nil {
			o.Budget = NoBudget
		}
	}
	oc, err := o.config()
	return o, oc, err
}

// clone returns a new Transport with t's exported fields and seams.
func (t *Transport) clone() *Transport {
	return &Transport{
		Base:            t.Base,
		MaxAttempts:     t.MaxAttempts,
		Backoff:         t.Backoff,
		Classifier:      t.Classifier,
		MaxRetryAfter:   t.MaxRetryAfter,
		MaxBufferedBody: t.MaxBufferedBody,
		AttemptTimeout:  t.AttemptTimeout,
		RateLimitReset:  t.RateLimitReset,
		AttemptHeader:   t.AttemptHeader,
		Budget:          t.Budget,
		Pacer:           t.Pacer,
		OnRetry:         t.OnRetry,
		OnGiveUp:        t.OnGiveUp,
		OnDone:          t.OnDone,
		now:             t.now,
		sleep:           t.sleep,
		rand:            t.rand,
	}
}

// checkContentLength refuses, before anything is sent, an in-memory body
// whose length contradicts the request's ContentLength: net/http would
// refuse it over HTTP/1.1 after sending the headers, and send it malformed
// over HTTP/2, and no retry would change it. Other bodies are checked as
// they are read (see replayBody.checkLength).
func checkContentLength(req *http.Request) error {
	if req.ContentLength <= 0 {
		return nil // no body, or a length net/http learns by reading
	}
	var n int
	switch b := inMemory(req.Body).(type) {
	case *bytes.Reader:
		n = b.Len()
	case *strings.Reader:
		n = b.Len()
	case *bytes.Buffer:
		n = b.Len()
	default:
		return nil
	}
	if int64(n) != req.ContentLength {
		return fmt.Errorf("retry: request body has %d bytes, but its ContentLength is %d", n, req.ContentLength)
	}
	return nil
}

// The types io.NopCloser returns, which http.NewRequest wraps its bodies in.
var (
	nopCloserType         = reflect.TypeOf(io.NopCloser(nil))
	nopCloserWriterToType = reflect.TypeOf(io.NopCloser(strings.NewReader("")))
)

// inMemory returns the reader inside body when body is io.NopCloser's
// wrapper (as net/http's own isKnownInMemoryReader looks through it), or
// body itself.
func inMemory(body io.Reader) io.Reader {
	if t := reflect.TypeOf(body); t == nopCloserType || t == nopCloserWriterToType {
		if r, ok := reflect.ValueOf(body).Field(0).Interface().(io.Reader); ok {
			return r
		}
	}
	return body
}

// roundTrip is the state of one call to RoundTrip.
type roundTrip struct {
	t    *Transport
	c    *config
	req  *http.Request
	safe bool
	body *replayBody // nil unless the body is buffered for replay

	prev time.Duration // the wait slept before the current attempt
	turn Turn          // the Pacer's turn of the current attempt; nil without a Pacer
	// kept is the last response, its body read into memory, while the
	// next attempt waits for the Pacer; keptClass is its class.
	kept      *http.Response
	keptClass Class
	retried   Class // the outcome the current attempt retries; Undecided for the first

	// For the hooks: what they report of the call so far. Times are
	// measured only when a hook is set (timed).
	timed  bool
	start  time.Time     // when RoundTrip began
	waited time.Duration // time spent between attempts: backoff, server waits, pacing
	took   time.Duration // how long the last attempt sent took
	sent   int           // attempts handed to the base transport
	end    Class         // the last outcome's class
	reason StopReason    // why no further attempt was made; StopNone on success
}

func (r *roundTrip) run() (*http.Response, error) {
	req := r.req
	hasBody := req.Body != nil && req.Body != http.NoBody
	if hasBody && req.GetBody == nil && r.c.maxAttempts > 1 {
		r.body = newReplayBody(req.Body, req.ContentLength, r.c.maxBuffered)
		r.body.abortOn(req.Context())
		defer r.body.finish()
	}
	ctx := req.Context()
	for attempt := 1; ; attempt++ {
		if r.t.Pacer != nil {
			if stopped, resp, err := r.awaitTurn(ctx, attempt); stopped {
				return resp, err
			}
		}
		areq, a, err := r.attemptRequest(ctx, attempt)
		if err != nil {
			// GetBody failed: nothing was sent for this attempt.
			r.unpace()
			return nil, r.giveUp(attempt-1, Permanent, nil, err, StopBody)
		}
		o, class := r.send(ctx, areq, a, attempt)
		r.paced(o, class)
		if class == Success {
			if b := r.c.budget; b != nil {
				b.Success(r.retried)
			}
			r.end = Success
			return a.keepAlive(o.Response), nil
		}

		delay, fromServer, stop := r.next(ctx, o, class)
		if stop != StopNone {
			if o.Err != nil {
				a.release()
				return nil, r.giveUp(attempt, class, nil, o.Err, stop)
			}
			r.giveUp(attempt, class, o.Response, nil, stop)
			return a.keepAlive(o.Response), nil
		}
		if h := r.t.OnRetry; h != nil {
			h(r.event(attempt, class, o.Response, o.Err, delay, fromServer, StopNone))
		}
		r.discard(o, class)
		a.release()
		if err := r.timedWait(ctx, delay); err != nil {
			return nil, r.giveUp(attempt, class, nil, err, StopCanceled)
		}
		r.prev = delay
	}
}

// discard disposes of the response of an outcome that is retried:
// drained and closed, so that its connection is reused; with a Pacer,
// kept in memory too, in case the Pacer refuses the retry's wait for the
// deadline (see awaitTurn).
func (r *roundTrip) discard(o Outcome, class Class) {
	switch {
	case o.Response != nil && r.t.Pacer != nil:
		r.kept, r.keptClass = keep(o.Response, drainLimit, drainTimeout), class
	case o.Response != nil:
		drain(o.Response.Body, drainLimit, drainTimeout)
	}
}

// send sends the attempt areq through the base transport and returns its
// outcome and class.
func (r *roundTrip) send(ctx context.Context, areq *http.Request, a attempt, n int) (Outcome, Class) {
	var sent time.Time
	if r.timed {
		sent = r.now()
	}
	r.sent++
	resp, err := r.c.base.RoundTrip(areq)
	if r.timed {
		r.took = r.now().Sub(sent)
	}
	o := Outcome{Request: areq, Response: resp, Err: err, Attempt: n, Wrote: a.trace.state()}
	if err == nil {
		return o, r.classify(o)
	}
	o.Response = nil
	if resp != nil && resp.Body != nil {
		resp.Body.Close() // a RoundTripper that broke its contract
	}
	o.Err = a.cause(ctx, areq.Context(), err)
	class := r.classify(o)
	if r.body != nil {
		if lerr := r.body.mismatch(); lerr != nil {
			// The caller's body contradicts its ContentLength, which no
			// attempt will change.
			o.Err, class = fmt.Errorf("%w (%w)", lerr, o.Err), Permanent
		}
	}
	return o, class
}

// classify asks the Transport's classifier, then the default one.
// A classifier's answer that cannot be acted on safely is taken as
// Permanent: a success without a response (RoundTrip must return one or
// an error), a class this package does not know, or no answer at all.
func (r *roundTrip) classify(o Outcome) Class {
	class := Undecided
	if cl := r.c.classifier; cl != nil {
		class = cl(o)
	}
	if class == Undecided {
		class = DefaultClassifier(o)
	}
	switch {
	case class > Unsent || class == Undecided:
		return Permanent
	case class == Success && o.Response == nil:
		return Permanent
	}
	return class
}

// next decides whether a failed attempt is retried, and after what wait.
func (r *roundTrip) next(ctx context.Context, o Outcome, class Class) (delay time.Duration, fromServer bool, stop StopReason) {
	switch {
	case ctx.Err() != nil:
		return 0, false, StopCanceled
	case class == Permanent: // classify never answers Undecided
		return 0, false, StopPermanent
	case class == Transient && !r.safe:
		return 0, false, StopUnsafe
	case o.Attempt >= r.c.maxAttempts:
		return 0, false, StopAttempts
	case r.body != nil && !r.body.replayable():
		return 0, false, StopBody
	}
	delay = r.c.backoff.Delay(o.Attempt, r.prev, r.random())
	delay = max(delay, 0)
	now := r.now()
	if o.Response != nil {
		// RFC 9110 §10.2.3: Retry-After says how long the client ought to
		// wait; the backoff may choose longer, never shorter.
		if sw, ok := ServerWait(o.Response.Header, now, r.t.RateLimitReset); ok {
			if sw > r.c.maxRetryAfter {
				return 0, false, StopServerWait
			}
			if sw > delay {
				delay, fromServer = sw, true
			}
		}
	}
	if dl, ok := ctx.Deadline(); ok && delay > dl.Sub(now) {
		return 0, false, StopDeadline
	}
	if b := r.c.budget; b != nil && !b.AllowRetry(class) {
		return 0, false, StopBudget
	}
	if r.body != nil && !r.body.retire() {
		// The last attempt's writer, which net/http lets run on, took the
		// body past MaxBufferedBody since the check above. (The budget's
		// token is spent: refusing the retry after cutting the writer off
		// would break the response returned instead.)
		return 0, false, StopBody
	}
	r.retried = class
	return delay, fromServer, StopNone
}

// attemptRequest builds the request of one attempt: a shallow clone of the
// caller's with its own context, body and, where needed, headers and trace.
// The attempt returned must be released unless its response is returned
// (see attempt.keepAlive).
func (r *roundTrip) attemptRequest(ctx context.Context, n int) (*http.Request, attempt, error) {
	t, req := r.t, r.req
	var a attempt
	ctx = context.WithValue(ctx, attemptKey{}, n)
	// An unsafe request without a body needs a context of its own for
	// the trace to end, should the base begin to send it again by itself:
	// net/http replays such a request without GetBody, and one with a body
	// only with GetBody, which its attempts do not carry.
	stoppable := !r.safe && (req.Body == nil || req.Body == http.NoBody)
	if t.AttemptTimeout > 0 || stoppable {
		var cancel context.CancelCauseFunc
		ctx, cancel = context.WithCancelCause(ctx)
		a.cancel = cancel
		if t.AttemptTimeout > 0 {
			// A timer rather than a deadline, so that it can be stopped
			// when the response is returned: the timeout bounds the
			// attempt, not the caller's reading of the body.
			a.timer = time.AfterFunc(t.AttemptTimeout, func() { cancel(ErrAttemptTimeout) })
		}
	}
	if !r.safe {
		// Only a request that is unsafe to replay needs to know whether
		// it was written, and to stop the base from sending it again on
		// its own: an idempotent one is retried either way.
		a.trace = newWriteTrace(a.cancel)
		ctx = httptrace.WithClientTrace(ctx, &a.trace.hooks)
	}
	areq := req.WithContext(ctx)
	if !r.safe {
		// net/http's HTTP/2 code replays a request it can rewind after a
		// PROTOCOL_ERROR reset, which the server may have processed.
		// Without GetBody, an unsafe request with a body is sent by this
		// package's rules alone; one without a body, which net/http
		// replays without GetBody, is stopped by the trace.
		areq.GetBody = nil
	}
	if t.AttemptHeader != "" {
		areq.Header = req.Header.Clone()
		if areq.Header == nil {
			areq.Header = make(http.Header)
		}
		areq.Header.Set(t.AttemptHeader, strconv.Itoa(n))
	}
	switch {
	case r.body != nil:
		body, err := r.body.reader(true)
		if err != nil {
			a.release()
			return nil, a, err
		}
		areq.Body, areq.GetBody = body, nil
		if r.safe {
			areq.GetBody = r.body.getBody
		}
	case n > 1 && req.GetBody != nil && req.Body != nil && req.Body != http.NoBody:
		body, err := req.GetBody()
		if err != nil {
			a.release()
			return nil, a, fmt.Errorf("retry: GetBody: %w", err)
		}
		areq.Body = body
	}
	return areq, a, nil
}

// attempt holds what one attempt needs released: its context's cancel and
// timeout, and its write trace. All are nil when the attempt has no
// timeout and is safe to replay.
type attempt struct {
	cancel context.CancelCauseFunc
	timer  *time.Timer
	trace  *writeTrace
}

// release ends the attempt's context and timer.
func (a attempt) release() {
	if a.timer != nil {
		a.timer.Stop()
	}
	if a.cancel != nil {
		a.cancel(errAttemptDone)
	}
}

// errAttemptDone is the cause of an attempt's context once the Transport
// is done with the attempt.
var errAttemptDone = errors.New("retry: attempt done")

// cause returns the error an attempt's base transport returned, or, when
// the attempt's own context (not the caller's) ended it, that context's
// cause: net/http returns the cause over HTTP/1.1 but the bare
// context.Canceled or DeadlineExceeded over HTTP/2, and an attempt's error
// should not depend on the protocol.
func (a attempt) cause(parent, actx context.Context, err error) error {
	if a.cancel == nil || actx.Err() == nil || parent.Err() != nil {
		return err
	}
	if cause := context.Cause(actx); !errors.Is(err, cause) {
		return cause
	}
	return err
}

// keepAlive returns resp. The attempt's timeout stops here: it bounded the
// wait for the response, not the caller's reading of it. Its context is
// released when the body is closed rather than now, so the caller can still
// read the body.
func (a attempt) keepAlive(resp *http.Response) *http.Response {
	if a.timer != nil {
		a.timer.Stop()
	}
	if a.cancel == nil {
		return resp
	}
	if resp == nil || resp.Body == nil || resp.Body == http.NoBody {
		a.release()
		return resp
	}
	resp.Body = &cancelOnClose{ReadCloser: resp.Body, cancel: a.cancel}
	return resp
}

// cancelOnClose releases an attempt's context when its body is closed.
type cancelOnClose struct {
	io.ReadCloser
	cancel context.CancelCauseFunc
}

func (b *cancelOnClose) Close() error {
	err := b.ReadCloser.Close()
	b.cancel(errAttemptDone)
	return err
}

// errReplayStopped is the cause of an attempt's context when the base
// transport began to send an unsafe request again by itself: net/http's
// HTTP/2 client replays a request without a body after a stream reset,
// PROTOCOL_ERROR included, after which the server may have processed it.
var errReplayStopped = errors.New("retry: the base transport began to send the request again by itself after a stream reset; " +
	"stopped, since the request is not safe to replay and the server may have processed it")

// Progress bits of a writeTrace.
const (
	traceGetConn      uint32 = 1 << iota // the base asked for a connection
	traceGotConn                         // a connection was handed to the request
	traceWroteHeaders                    // the headers were written
	traceWroteRequest                    // the whole request was written, without error
)

// writeTrace records, from httptrace, how much of a request the base
// transport may have written, and stops it from sending the request a
// second time. Its hooks run on the base transport's goroutines, which may
// outlive RoundTrip, hence the atomics.
//
// Nothing was written is proven only by a base that asked for a connection
// (GetConn: it reports progress) and never got one. Once a connection is
// handed over, the request may be on the wire whatever else the trace says:
// net/http's HTTP/2 client reports WroteHeaders only after the HEADERS
// frame was flushed, and RoundTrip may return on the context while that
// flush is still under way.
type writeTrace struct {
	v     atomic.Uint32
	stop  context.CancelCauseFunc // ends the attempt's context; nil when nothing can replay it
	hooks httptrace.ClientTrace   // in the same allocation
}

func newWriteTrace(stop context.CancelCauseFunc) *writeTrace {
	w := &writeTrace{stop: stop}
	w.hooks = httptrace.ClientTrace{
		GetConn: func(string) { w.v.Or(traceGetConn) },
		GotConn: func(httptrace.GotConnInfo) {
			// A connection for a request whose whole body was written
			// already is a replay by the base itself (HTTP/1.1 replays
			// only requests that wrote nothing, which report an error).
			// The hook runs before the request is handed to that
			// connection, so the request's context is done before a
			// byte of it is written.
			if w.v.Or(traceGotConn)&traceWroteRequest != 0 && w.stop != nil {
				w.stop(errReplayStopped)
			}
		},
		WroteHeaders: func() { w.v.Or(traceWroteHeaders) },
		WroteRequest: func(info httptrace.WroteRequestInfo) {
			if info.Err == nil {
				w.v.Or(traceWroteRequest)
			}
		},
	}
	return w
}

// state reports how much of the request was written; WriteUnknown when it
// may have been written but the trace cannot say how much.
func (w *writeTrace) state() WriteState {
	if w == nil {
		return WriteUnknown
	}
	v := w.v.Load()
	switch {
	case v&traceWroteRequest != 0:
		return WroteRequest
	case v&traceWroteHeaders != 0:
		return WroteHeaders
	case v&traceGotConn != 0:
		return WriteUnknown
	case v&traceGetConn != 0:
		return WroteNothing
	}
	return WriteUnknown
}

func (r *roundTrip) now() time.Time {
	if r.t.now != nil {
		return r.t.now()
	}
	return time.Now()
}

func (r *roundTrip) random() float64 {
	if r.t.rand != nil {
		return r.t.rand()
	}
	return rand.Float64()
}

func (r *roundTrip) wait(ctx context.Context, d time.Duration) error {
	if r.t.sleep != nil {
		return r.t.sleep(ctx, d)
	}
	return sleep(ctx, d)
}

// timedWait is wait, adding the time waited to r.waited when a hook wants
// it.
func (r *roundTrip) timedWait(ctx context.Context, d time.Duration) error {
	if !r.timed {
		return r.wait(ctx, d)
	}
	start := r.now()
	err := r.wait(ctx, d)
	r.waited += r.now().Sub(start)
	return err
}

// summary is what the OnDone hook is told of the call that returns resp
// and err.
func (r *roundTrip) summary(resp *http.Response, err error) Summary {
	s := Summary{Request: r.req, Attempts: r.sent, Wait: r.waited, Class: r.end, Reason: r.reason, Err: err}
	if r.timed {
		s.Elapsed = r.now().Sub(r.start)
	}
	if resp != nil {
		s.StatusCode = resp.StatusCode
	}
	return s
}

// sleep waits for d or until ctx is done. A zero d creates no timer.
func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-timer.C:
		return nil
	}
}

func (r *roundTrip) event(attempt int, class Class, resp *http.Response, err error, delay time.Duration, fromServer bool, stop StopReason) Event {
	e := Event{Request: r.req, Attempt: attempt, Class: class, Err: err, Delay: delay, FromServer: fromServer, Reason: stop}
	if attempt == r.sent {
		e.Duration = r.took // the attempt that failed is the last one sent
	}
	if resp != nil {
		e.StatusCode = resp.StatusCode
	}
	return e
}

// giveUp reports a final failure to the OnGiveUp hook and, when it ended
// on an error, returns the error RoundTrip returns.
func (r *roundTrip) giveUp(attempts int, class Class, resp *http.Response, err error, stop StopReason) error {
	r.end, r.reason = class, stop
	if h := r.t.OnGiveUp; h != nil {
		h(r.event(attempts, class, resp, err, 0, false, stop))
	}
	if err == nil {
		return nil
	}
	return &Error{Attempts: attempts, Reason: stop, Err: err}
}

func closeRequestBody(req *http.Request) {
	if req.Body != nil {
		req.Body.Close()
	}
}
