package retry

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptrace"
	"strconv"
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
	// DefaultDrainLimit is how much of a discarded response body is read
	// so that its connection can be reused.
	DefaultDrainLimit = 64 << 10
)

// DefaultBackoff is the backoff of a [Transport] whose Backoff is nil:
// capped exponential backoff with full jitter, as the AWS Architecture Blog
// recommends. Before retry n it waits uniform(0, min(20s, 100ms·2^(n-1))).
var DefaultBackoff Backoff = Exponential{Base: 100 * time.Millisecond, Cap: 20 * time.Second, Jitter: FullJitter}

// drainTimeout bounds the time spent draining one discarded response.
const drainTimeout = time.Second

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

	// AttemptTimeout, if positive, bounds each attempt: a slow attempt is
	// cancelled and counts as transient. The context of the attempt whose
	// response is returned lives until that response's body is closed.
	// Zero means attempts are bounded only by the request's context.
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
	// [NoBudget] (which [WithBudget](nil) sets) means no budget. Pass one
	// TokenBucket to several Transports to share it.
	Budget Budget

	// Pacer, if not nil, spaces the attempts to each host at a rate learned
	// from its throttling. Every attempt, the first included, waits for
	// it. Apart from slow start (at most ten unanswered attempts to a new
	// host, for its first round trips), it never delays a host that has
	// neither throttled nor announced its quota spent (RateLimit r=0).
	Pacer *Pacer

	// OnRetry, if not nil, is called before the wait that precedes each retry.
	OnRetry func(Event)

	// OnGiveUp, if not nil, is called when a failed outcome is returned:
	// Event.Reason says why no further attempt was made.
	OnGiveUp func(Event)

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

// WithBudget sets [Transport.Budget]; WithBudget(nil) sets [NoBudget],
// which turns the budget off.
func WithBudget(b Budget) Option {
	return func(t *Transport) {
		if b == nil {
			b = NoBudget
		}
		t.Budget = b
	}
}

// WithPacer sets [Transport.Pacer].
func WithPacer(p *Pacer) Option { return func(t *Transport) { t.Pacer = p } }

// WithOnRetry sets [Transport.OnRetry].
func WithOnRetry(f func(Event)) Option { return func(t *Transport) { t.OnRetry = f } }

// WithOnGiveUp sets [Transport.OnGiveUp].
func WithOnGiveUp(f func(Event)) Option { return func(t *Transport) { t.OnGiveUp = f } }

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
	case t.AttemptHeader != "" && !validHeaderName(t.AttemptHeader):
		return fmt.Errorf("retry: AttemptHeader %q is not a valid header name", t.AttemptHeader)
	}
	if t.Pacer != nil {
		if err := t.Pacer.Validate(); err != nil {
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

// validHeaderName reports whether s is an RFC 9110 token.
func validHeaderName(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case c < 0x80 && c > ' ' && !isSeparator(c):
		default:
			return false
		}
	}
	return s != ""
}

func isSeparator(c byte) bool {
	switch c {
	case '(', ')', '<', '>', '@', ',', ';', ':', '\\', '"', '/', '[', ']', '?', '=', '{', '}':
		return true
	}
	return false
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
	if err != nil {
		closeRequestBody(req)
		return nil, err
	}
	r := roundTrip{t: t, c: c, req: req, safe: ReplaySafe(req)}
	return r.run()
}

// roundTrip is the state of one call to RoundTrip.
type roundTrip struct {
	t    *Transport
	c    *config
	req  *http.Request
	safe bool
	body *replayBody // nil unless the body is buffered for replay

	prev    time.Duration // the wait slept before the current attempt
	pacing  *paceState    // the Pacer's state of the request's key; nil without a Pacer
	paced   uint64        // the pacer's rate generation the attempt was sent at
	slot    bool          // the attempt holds a slot of the Pacer's slow start
	retried Class         // the outcome the current attempt retries; Undecided for the first
}

func (r *roundTrip) run() (*http.Response, error) {
	req := r.req
	hasBody := req.Body != nil && req.Body != http.NoBody
	if hasBody && req.GetBody == nil && r.c.maxAttempts > 1 {
		r.body = newReplayBody(req.Body, req.ContentLength, r.c.maxBuffered)
		defer r.body.finish()
	}
	ctx := req.Context()
	for attempt := 1; ; attempt++ {
		if r.t.Pacer != nil {
			if err := r.pace(ctx, attempt); err != nil {
				if attempt == 1 && r.body == nil {
					closeRequestBody(req) // nothing was sent: RoundTrip still owns it
				}
				return nil, err
			}
		}
		areq, wrote, cancel, err := r.attemptRequest(ctx, attempt)
		if err != nil {
			// GetBody failed: nothing was sent for this attempt.
			r.unpace()
			return nil, r.giveUp(attempt-1, Permanent, nil, err, StopBody)
		}
		resp, err := r.c.base.RoundTrip(areq)
		o := Outcome{Request: areq, Response: resp, Err: err, Attempt: attempt, Wrote: wrote.state()}
		if err != nil {
			o.Response = nil
			if resp != nil && resp.Body != nil {
				resp.Body.Close() // a RoundTripper that broke its contract
			}
		}
		class := r.classify(o)
		if s := r.pacing; s != nil {
			r.t.Pacer.observeState(s, r.slot, class, o.Response, r.paced, r.now(), r.t.RateLimitReset)
			r.slot = false
		}
		if class == Success {
			if b := r.c.budget; b != nil {
				b.Success(r.retried)
			}
			return keepAlive(o.Response, cancel), nil
		}

		delay, fromServer, stop := r.next(ctx, o, class)
		if stop != StopNone {
			if o.Err != nil {
				release(cancel)
				return nil, r.giveUp(attempt, class, nil, o.Err, stop)
			}
			r.giveUp(attempt, class, o.Response, nil, stop)
			return keepAlive(o.Response, cancel), nil
		}
		if h := r.t.OnRetry; h != nil {
			h(r.event(attempt, class, o.Response, o.Err, delay, fromServer, StopNone))
		}
		if o.Response != nil {
			drain(o.Response.Body, DefaultDrainLimit, drainTimeout)
		}
		release(cancel)
		if err := r.wait(ctx, delay); err != nil {
			return nil, r.giveUp(attempt, class, nil, err, StopCanceled)
		}
		r.prev = delay
	}
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
	r.retried = class
	return delay, fromServer, StopNone
}

// pace waits for the pacer's token before an attempt, after its backoff:
// while the key is in slow start, for a slot of its window; once it has
// engaged, for its turn. A turn made void while the attempt waits for it
// (the rate was cut, the key paused or restarted) is given up for a new
// one. A wait that would end past the context's deadline is not begun,
// and the error returned says so; so does a wait the context ends.
func (r *roundTrip) pace(ctx context.Context, attempt int) error {
	p := r.t.Pacer
	if r.pacing == nil {
		r.pacing = p.state(r.req)
	}
	for {
		slot, err := p.admit(ctx, r.pacing)
		if err != nil {
			return r.giveUp(attempt-1, Undecided, nil, err, StopCanceled)
		}
		r.slot = slot
		if slot {
			break // in slow start: the key has not engaged, no turn to take
		}
		now := r.now()
		d, paced := r.pacing.reserveAt(now)
		r.paced = paced.generation()
		if d <= 0 {
			break
		}
		if dl, ok := ctx.Deadline(); ok && d > dl.Sub(now) {
			paced.cancel()
			err := fmt.Errorf("retry: pacing wait of %v would end past the context's deadline: %w", d, context.DeadlineExceeded)
			return r.giveUp(attempt-1, Undecided, nil, err, StopDeadline)
		}
		if err := r.waitTurn(ctx, d, paced); err != nil {
			paced.cancel()
			return r.giveUp(attempt-1, Undecided, nil, err, StopCanceled)
		}
		if !paced.stale() {
			break
		}
	}
	r.pacing.sent.Add(1) // the sending rate counts attempts sent, not waiting
	return nil
}

// waitTurn waits d for the turn res, or until it is void. Only the
// context's end is an error.
func (r *roundTrip) waitTurn(ctx context.Context, d time.Duration, res *reservation) error {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(res.turns, cancel)
	defer stop()
	if err := r.wait(wctx, d); err != nil && ctx.Err() != nil {
		return err
	}
	return nil
}

// unpace gives back the slow-start slot of an attempt that is not sent.
func (r *roundTrip) unpace() {
	if r.slot {
		r.pacing.release(false)
		r.slot = false
	}
}

// attemptRequest builds the request of one attempt: a shallow clone of the
// caller's with its own context, body and, where needed, headers and trace.
// The returned cancel releases the attempt's timeout; it must be called
// unless the response is returned with it (see keepAlive).
func (r *roundTrip) attemptRequest(ctx context.Context, attempt int) (*http.Request, *writeTrace, context.CancelFunc, error) {
	t, req := r.t, r.req
	var cancel context.CancelFunc // nil unless the attempt has a timeout
	ctx = context.WithValue(ctx, attemptKey{}, attempt)
	if t.AttemptTimeout > 0 {
		ctx, cancel = context.WithTimeoutCause(ctx, t.AttemptTimeout, ErrAttemptTimeout)
	}
	var wt *writeTrace
	if !r.safe {
		// Only a request that is unsafe to replay needs to know whether
		// it was written: an idempotent one is retried either way.
		wt = new(writeTrace)
		ctx = httptrace.WithClientTrace(ctx, wt.clientTrace())
	}
	areq := req.WithContext(ctx)
	if !r.safe {
		// net/http's HTTP/2 code replays a request it can rewind after a
		// PROTOCOL_ERROR reset, which the server may have processed.
		// Without GetBody, an unsafe request is sent by this package's
		// rules alone: again only when nothing of it was written.
		areq.GetBody = nil
	}
	if t.AttemptHeader != "" {
		areq.Header = req.Header.Clone()
		if areq.Header == nil {
			areq.Header = make(http.Header)
		}
		areq.Header.Set(t.AttemptHeader, strconv.Itoa(attempt))
	}
	switch {
	case r.body != nil:
		body, err := r.body.reader()
		if err != nil {
			release(cancel)
			return nil, nil, nil, err
		}
		areq.Body, areq.GetBody = body, nil
		if r.safe {
			areq.GetBody = r.body.getBody
		}
	case attempt > 1 && req.GetBody != nil && req.Body != nil && req.Body != http.NoBody:
		body, err := req.GetBody()
		if err != nil {
			release(cancel)
			return nil, nil, nil, fmt.Errorf("retry: GetBody: %w", err)
		}
		areq.Body = body
	}
	return areq, wt, cancel, nil
}

// release calls cancel if the attempt had one.
func release(cancel context.CancelFunc) {
	if cancel != nil {
		cancel()
	}
}

// keepAlive returns resp; when the attempt had a timeout of its own, its
// context is released when the body is closed rather than now, so the
// caller can still read the body.
func keepAlive(resp *http.Response, cancel context.CancelFunc) *http.Response {
	if cancel == nil {
		return resp
	}
	if resp == nil || resp.Body == nil || resp.Body == http.NoBody {
		cancel()
		return resp
	}
	resp.Body = &cancelOnClose{ReadCloser: resp.Body, cancel: cancel}
	return resp
}

// cancelOnClose releases an attempt's context when its body is closed.
type cancelOnClose struct {
	io.ReadCloser
	cancel context.CancelFunc
}

func (b *cancelOnClose) Close() error {
	err := b.ReadCloser.Close()
	b.cancel()
	return err
}

// writeTrace records, from httptrace, how much of a request was written.
// Its hooks run on the base transport's write goroutine, which may outlive
// RoundTrip, hence the atomic.
type writeTrace struct {
	v atomic.Uint32
}

func (w *writeTrace) clientTrace() *httptrace.ClientTrace {
	return &httptrace.ClientTrace{
		// GetConn proves the base reports progress: without it, an
		// absent WroteHeaders would prove nothing.
		GetConn:      func(string) { w.v.CompareAndSwap(uint32(WriteUnknown), uint32(WroteNothing)) },
		WroteHeaders: func() { w.v.Store(uint32(WroteHeaders)) },
		WroteRequest: func(info httptrace.WroteRequestInfo) {
			if info.Err == nil {
				w.v.Store(uint32(WroteRequest))
			}
		},
	}
}

func (w *writeTrace) state() WriteState {
	if w == nil {
		return WriteUnknown
	}
	return WriteState(w.v.Load())
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
	e := Event{Request: r.req, Attempt: attempt, Class: class, Err: err, Delay: delay, ServerDelay: fromServer, Reason: stop}
	if resp != nil {
		e.StatusCode = resp.StatusCode
	}
	return e
}

// giveUp reports a final failure to the OnGiveUp hook and, when it ended
// on an error, returns the error RoundTrip returns.
func (r *roundTrip) giveUp(attempts int, class Class, resp *http.Response, err error, stop StopReason) error {
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
