// Route53 runs the AWS SDK for Go v2's Route 53 client through
// retry.Transport against a fake Route 53 on loopback that, like the real
// one, allows five requests a second per account and answers the rest with
// HTTP 400 Throttling.
//
// The SDK's own retries are off (aws.NopRetryer): the SDK serializes and
// signs each call once, and the Transport, which sits below the signer in
// the SDK's HTTP client, replays the signed request. Ten goroutines
// (-workers) make five calls each (ChangeResourceRecordSets, GetChange,
// ListHostedZones); the program prints every call with its attempts and
// waits, then a summary (the calls, why the failed ones stopped, the
// Throttling answers, whether a Pacer was on and the rate it learned, and
// what the server admitted and refused in each second), and exits with
// status 1 if a call failed. First it sends one invalid change, which fails
// at once with the SDK's typed error, *types.InvalidInput.
//
//	cd examples/route53
//	go run .                           # client.go's settings and its Pacer: every call succeeds
//	go run . -pacer=false              # the settings alone, retries without the Pacer
//	go run . -defaults                 # retry's defaults instead: calls run out of attempts
//	go run . -workers 50               # 250 calls: every call succeeds
//	go run . -workers 50 -pacer=false  # retries alone: the retry budget runs out
//	go run . -sdk adaptive             # no retry.Transport: the SDK's adaptive retry mode
//	go run . -sdk standard             # or its standard mode
//
// -workers takes 1 to 200. The Pacer (newPacer) is on with client.go's
// settings and off with -defaults unless -pacer says otherwise; it is keyed
// by the access key ID in each request's SigV4 Authorization header.
// -sdk runs the SDK's own retryer (aws/retry, with MaxAttempts raised to
// this program's 20 and its other defaults) over a plain net/http
// transport instead of the Transport, for comparison: the same calls,
// their attempts counted by the server.
//
// It needs no network beyond 127.0.0.1 and no AWS account. client.go
// explains the settings; docs/route53.md has the measurements.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/route53"
	"github.com/aws/aws-sdk-go-v2/service/route53/types"
	"github.com/aws/smithy-go"

	"github.com/backoff-jitter/retry"
	"github.com/backoff-jitter/retry/awsretry"
	"github.com/backoff-jitter/retry/pace"
)

// The fake's account: static credentials, as in a test or a CI job.
const (
	accessKey = "AKIAIOSFODNN7EXAMPLE"
	secretKey = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
)

const (
	defaultWorkers = 10
	maxWorkers     = 200
	callsPerWorker = 5
	ratePerSecond  = 5 // Route 53's limit per account
)

func main() {
	o, err := parseOptions(os.Args[1:])
	if errors.Is(err, flag.ErrHelp) {
		os.Exit(0)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "route53:", err)
		os.Exit(2)
	}
	res, err := run(context.Background(), os.Stdout, o)
	if err != nil {
		fmt.Fprintln(os.Stderr, "route53:", err)
		os.Exit(1)
	}
	if res.failed() > 0 {
		os.Exit(1)
	}
}

// parseOptions reads the program's flags from args. The Pacer is on unless
// -defaults or -sdk is given and -pacer is not.
func parseOptions(args []string) (options, error) {
	var o options
	fs := flag.NewFlagSet("route53", flag.ContinueOnError)
	fs.IntVar(&o.workers, "workers", defaultWorkers, fmt.Sprintf("goroutines, 1 to %d, each making %d calls", maxWorkers, callsPerWorker))
	fs.BoolVar(&o.defaults, "defaults", false, "use retry's default attempts and backoff instead of the Route 53 settings")
	fs.BoolVar(&o.pacer, "pacer", true, "a pace.Pacer keyed by the account (access key ID) in the Transport; on unless -defaults or -sdk; off, no pacing at all")
	fs.StringVar(&o.sdk, "sdk", "", "standard or adaptive: the AWS SDK's own retry mode instead of retry.Transport")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	pacerSet := false
	fs.Visit(func(f *flag.Flag) { pacerSet = pacerSet || f.Name == "pacer" })
	if !pacerSet && (o.defaults || o.sdk != "") {
		o.pacer = false
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	return o, o.validate()
}

// options are the program's flags.
type options struct {
	workers  int    // goroutines, each making callsPerWorker calls
	defaults bool   // retry's defaults instead of the settings of client.go
	pacer    bool   // a Pacer keyed by account (newPacer) in the Transport
	sdk      string // "standard" or "adaptive": the SDK's retryer instead of the Transport
}

// validate reports options run cannot use.
func (o options) validate() error {
	if o.workers < 1 || o.workers > maxWorkers {
		return fmt.Errorf("-workers %d: want 1 to %d", o.workers, maxWorkers)
	}
	switch o.sdk {
	case "":
	case "standard", "adaptive":
		if o.pacer || o.defaults {
			return fmt.Errorf("-sdk %s: the SDK's retryer replaces the Transport; drop -pacer and -defaults", o.sdk)
		}
	default:
		return fmt.Errorf("-sdk %q: want standard or adaptive", o.sdk)
	}
	return nil
}

// result is what run did, for the tests.
type result struct {
	workers     int
	maxAttempts int     // of the Transport
	invalid     *call   // the invalid change sent first
	calls       []*call // the workers' calls, in the order they started
	log         []served
	start       time.Time     // of the workers' calls
	elapsed     time.Duration // of the workers' calls

	budget     *retry.TokenBucket
	budgetFull int          // the tokens the budget held at the start: its capacity
	lowTokens  atomic.Int64 // the fewest tokens the budget held before a retry

	sdk   string       // the SDK's retry mode, "" for the Transport
	pacer *pace.Pacer  // nil without -pacer
	rates []rateSample // the Pacer's rate for the account during the calls
	// learned is the Pacer's rate for the account when the calls ended;
	// engaged, whether it had engaged.
	learned float64
	engaged bool
}

// rateSample is the Pacer's rate for the account at one moment.
type rateSample struct {
	at      time.Duration // since the start of the calls
	rate    float64       // requests per second; +Inf before it engaged
	engaged bool
}

// learnedRate returns the rate the Pacer paces the account at, and
// whether it has engaged (learned one) at all.
func (r *result) learnedRate() (float64, bool) {
	if r.pacer == nil {
		return math.Inf(1), false
	}
	return r.pacer.Rate(accessKey)
}

// failed counts the calls that failed, made or not.
func (r *result) failed() int {
	n := 0
	for _, c := range r.calls {
		if c.err != nil {
			n++
		}
	}
	return n
}

// stops tallies why the failed calls that were made stopped: the
// Transport's reason for giving up, as OnGiveUp saw it.
func (r *result) stops() map[string]int {
	m := map[string]int{}
	for _, c := range r.calls {
		switch {
		case c.err == nil || errors.Is(c.err, errNotMade):
		case c.gaveUp == nil && r.sdk != "":
			m["the SDK's retryer gave up"]++
		case c.gaveUp == nil:
			m["other"]++
		case c.gaveUp.Reason == retry.StopAttempts:
			m[fmt.Sprintf("ran out of their %d attempts", r.maxAttempts)]++
		default:
			m[c.gaveUp.Reason.String()]++
		}
	}
	return m
}

// notMade counts the calls that could not be made.
func (r *result) notMade() int {
	n := 0
	for _, c := range r.calls {
		if errors.Is(c.err, errNotMade) {
			n++
		}
	}
	return n
}

// call is one SDK call and what the Transport's classifier and hooks saw
// of it. They run on the goroutine making the call, which alone writes it
// until the call returns.
type call struct {
	n      int
	worker int
	op     string
	target string

	invocation string         // amz-sdk-invocation-id, the SDK's ID of the call
	codes      map[int]string // attempt -> AWS error code of its response
	retries    []retryNote
	gaveUp     *retry.Event

	end    time.Duration // when the call returned, since the start of the run
	detail string        // what the call returned
	err    error
}

// retryNote is one failed attempt that was retried.
type retryNote struct {
	attempt int
	why     string // error code, status or error
	delay   time.Duration
}

// errNotMade is the error of a call that was not made: a look at a change
// that failed.
var errNotMade = errors.New("not made: its change failed")

// attempts is how many attempts the call made.
func (c *call) attempts() int {
	if errors.Is(c.err, errNotMade) {
		return 0
	}
	if c.gaveUp != nil {
		return c.gaveUp.Attempt
	}
	return len(c.retries) + 1
}

type callKey struct{}

// callOf returns the call a request belongs to: the SDK passes the
// context of the call down to the request it sends.
func callOf(r *http.Request) *call {
	if r == nil {
		return nil
	}
	c, _ := r.Context().Value(callKey{}).(*call)
	return c
}

// noteCode is a retry.Classifier that records the AWS error code of each
// attempt for the report, and leaves the decision to the next classifier.
func noteCode(o retry.Outcome) retry.Class {
	if c := callOf(o.Request); c != nil {
		c.invocation = o.Request.Header.Get("Amz-Sdk-Invocation-Id")
		if code, ok := awsretry.ErrorCode(o.Response); ok {
			c.codes[o.Attempt] = code
		}
	}
	return retry.Undecided
}

func (c *call) why(e retry.Event) string {
	if code := c.codes[e.Attempt]; code != "" {
		return code
	}
	if e.Err != nil {
		return e.Err.Error()
	}
	return http.StatusText(e.StatusCode)
}

// hooks are the Transport options that fill in each call's record and,
// if budget is not nil, keep the lowest level it reached in low.
func hooks(budget *retry.TokenBucket, low *atomic.Int64) []retry.Option {
	if budget != nil {
		low.Store(int64(budget.Tokens()))
	}
	return []retry.Option{
		retry.WithClassifier(retry.Chain(noteCode, awsretry.Classify)),
		retry.WithOnRetry(func(e retry.Event) {
			if c := callOf(e.Request); c != nil {
				c.retries = append(c.retries, retryNote{attempt: e.Attempt, why: c.why(e), delay: e.Delay})
				if budget == nil {
					return
				}
				if n := int64(budget.Tokens()); n < low.Load() {
					low.Store(n) // hooks of several calls may race: the sample is approximate
				}
			}
		}),
		retry.WithOnGiveUp(func(e retry.Event) {
			if c := callOf(e.Request); c != nil {
				c.gaveUp = &e
			}
		}),
	}
}

// run starts the fake Route 53, sends the invalid change and then the
// workers' calls through the SDK, and prints what happened to out.
func run(ctx context.Context, out io.Writer, o options) (*result, error) {
	if err := o.validate(); err != nil {
		return nil, err
	}
	fake := &fakeRoute53{
		Limit:    ratePerSecond,
		Window:   time.Second,
		Pending:  500 * time.Millisecond,
		Accounts: map[string]string{accessKey: secretKey},
		Zones:    []zone{{"Z1EXAMPLE", "example.com."}, {"Z2EXAMPLE", "example.net."}, {"Z3EXAMPLE", "example.org."}},
	}
	srv := httptest.NewServer(fake)
	defer srv.Close()

	var rt *retry.Transport
	res := &result{workers: o.workers, sdk: o.sdk}
	if o.sdk != "" {
		return runSDK(ctx, out, o, fake, srv.URL, res)
	}
	var pacing []retry.Option
	if o.pacer {
		res.pacer = newPacer()
		pacing = append(pacing, retry.WithPacer(res.pacer))
	} else {
		pacing = append(pacing, retry.WithPacer(retry.NoPacer)) // not even the Transport's own
	}
	if o.defaults {
		res.budget = &retry.TokenBucket{} // the default budget, made explicit to watch it
		res.budgetFull = res.budget.Tokens()
		res.maxAttempts = retry.DefaultMaxAttempts
		rt = retry.New(nil, slices.Concat(hooks(res.budget, &res.lowTokens), pacing,
			[]retry.Option{retry.WithBudget(res.budget), retry.WithAttemptHeader("X-Retry-Attempt")})...)
		fmt.Fprintln(out, "Settings: retry's defaults (4 attempts, Exponential{Base: 100ms, Cap: 20s, Jitter: FullJitter})")
	} else {
		res.budget = newBudget()
		res.budgetFull = res.budget.Tokens()
		res.maxAttempts = maxAttempts
		rt = newTransport(res.budget, credentials.NewStaticCredentialsProvider(accessKey, secretKey, ""), append(hooks(res.budget, &res.lowTokens), pacing...)...)
		fmt.Fprintf(out, "Settings: %d attempts, Exponential{Base: %v, Cap: %v, Jitter: EqualJitter}, MaxRetryAfter %v,\n"+
			"          %v per call, a budget charging %d token per failed throttled retry\n",
			maxAttempts, route53Backoff.Base, route53Backoff.Cap, maxRetryAfter, callTimeout, res.budget.ThrottledCost)
	}
	if res.pacer != nil {
		fmt.Fprintln(out, "          and a Pacer keyed by the access key ID of each request's signature (-pacer)")
	}
	defer rt.CloseIdleConnections()
	client := newClient(srv.URL, accessKey, secretKey, rt)
	return calls(ctx, out, o, fake, srv.URL, client, res, nil)
}

// calls sends the invalid change and then the workers' calls through
// client, and prints what happened to out. fill, if not nil, completes a
// call's record after it returns.
func calls(ctx context.Context, out io.Writer, o options, fake *fakeRoute53, url string, client *route53.Client, res *result, fill func(*call)) (*result, error) {
	p := &printer{out: out, start: time.Now(), fill: fill}

	fmt.Fprintf(out, "Fake Route 53 at %s: %d requests/s per account, changes PENDING for %v\n\n",
		url, fake.Limit, fake.Pending)
	fmt.Fprintln(out, "An invalid change (TTL -1) fails at once, without a retry:")
	res.invalid = p.do(ctx, &call{worker: -1, op: "ChangeResourceRecordSets", target: "Z1EXAMPLE TTL -1"},
		func(ctx context.Context) (string, error) {
			return changeRecord(ctx, client, "Z1EXAMPLE", "bad.example.com.", -1)
		})

	fmt.Fprintf(out, "\n%d goroutines make %d calls. Each line: when the call ended, its number and goroutine,\n"+
		"what it did, what it returned, and each failed attempt with the wait before the next.\n",
		o.workers, o.workers*callsPerWorker)
	res.start = time.Now()
	stopSampling := sampleRate(res)
	var (
		mu  sync.Mutex
		wg  sync.WaitGroup
		seq atomic.Int32
	)
	for w := range o.workers {
		wg.Go(func() {
			for _, c := range worker(ctx, client, p, w, &seq) {
				mu.Lock()
				res.calls = append(res.calls, c)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	res.elapsed = time.Since(res.start)
	stopSampling()
	// What the Pacer learned by the end of the calls: read later, the
	// rate would have grown back along its curve meanwhile.
	res.learned, res.engaged = res.learnedRate()
	res.log = fake.Log()
	summarize(out, res)
	return res, nil
}

// sampleRate records, while the calls run, the Pacer's rate for the
// account every rateSampling, in res.rates, until the function it returns
// is called. Without a Pacer it does nothing.
func sampleRate(res *result) (stop func()) {
	if res.pacer == nil {
		return func() {}
	}
	done, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		tick := time.NewTicker(rateSampling)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case now := <-tick.C:
				rate, ok := res.learnedRate()
				res.rates = append(res.rates, rateSample{at: now.Sub(res.start), rate: rate, engaged: ok})
			}
		}
	}()
	return func() {
		close(done)
		<-stopped
	}
}

// rateSampling is how often sampleRate looks at the Pacer's rate.
const rateSampling = 100 * time.Millisecond

// worker makes the calls of worker w: a change to one zone and a look at
// it, the list of zones, a change to the next zone and a look at it.
func worker(ctx context.Context, client *route53.Client, p *printer, w int, seq *atomic.Int32) []*call {
	zones := []string{"Z1EXAMPLE", "Z2EXAMPLE", "Z3EXAMPLE"}
	var calls []*call
	next := func(op, target string, fn func(context.Context) (string, error)) string {
		c := p.do(ctx, &call{n: int(seq.Add(1)), worker: w, op: op, target: target}, fn)
		calls = append(calls, c)
		if c.err != nil {
			return ""
		}
		return c.detail
	}
	look := func(change string) {
		id, _, _ := strings.Cut(change, " ")
		next("GetChange", id, func(ctx context.Context) (string, error) {
			if id == "" {
				return "", errNotMade
			}
			return getChange(ctx, client, id)
		})
	}
	for i, zone := range []string{zones[w%3], zones[(w+1)%3]} {
		name := fmt.Sprintf("w%d.example.com.", w)
		look(next("ChangeResourceRecordSets", zone+" UPSERT "+name, func(ctx context.Context) (string, error) {
			return changeRecord(ctx, client, zone, name, 60)
		}))
		if i == 0 {
			next("ListHostedZones", "", func(ctx context.Context) (string, error) {
				return listZones(ctx, client)
			})
		}
	}
	return calls
}

func changeRecord(ctx context.Context, client *route53.Client, zone, name string, ttl int64) (string, error) {
	out, err := client.ChangeResourceRecordSets(ctx, &route53.ChangeResourceRecordSetsInput{
		HostedZoneId: aws.String(zone),
		ChangeBatch: &types.ChangeBatch{Changes: []types.Change{{
			Action: types.ChangeActionUpsert,
			ResourceRecordSet: &types.ResourceRecordSet{
				Name:            aws.String(name),
				Type:            types.RRTypeA,
				TTL:             aws.Int64(ttl),
				ResourceRecords: []types.ResourceRecord{{Value: aws.String("192.0.2.1")}},
			},
		}}},
	})
	if err != nil {
		return "", err
	}
	return strings.TrimPrefix(aws.ToString(out.ChangeInfo.Id), "/change/") + " " + string(out.ChangeInfo.Status), nil
}

func getChange(ctx context.Context, client *route53.Client, id string) (string, error) {
	out, err := client.GetChange(ctx, &route53.GetChangeInput{Id: aws.String(id)})
	if err != nil {
		return "", err
	}
	return string(out.ChangeInfo.Status), nil
}

func listZones(ctx context.Context, client *route53.Client) (string, error) {
	out, err := client.ListHostedZones(ctx, &route53.ListHostedZonesInput{})
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("%d zones", len(out.HostedZones)), nil
}

// printer prints each call as it ends.
type printer struct {
	mu    sync.Mutex
	out   io.Writer
	start time.Time
	fill  func(*call) // completes a call's record after it returns; nil: nothing to do
}

// do makes the call c with fn, under a deadline of callTimeout, records
// it and prints it.
func (p *printer) do(ctx context.Context, c *call, fn func(context.Context) (string, error)) *call {
	c.codes = make(map[int]string)
	ctx, cancel := context.WithTimeout(context.WithValue(ctx, callKey{}, c), callTimeout)
	defer cancel()
	c.detail, c.err = fn(ctx)
	c.end = time.Since(p.start)
	if p.fill != nil {
		p.fill(c)
	}

	p.mu.Lock()
	defer p.mu.Unlock()
	fmt.Fprintln(p.out, describe(c))
	return c
}

// describe is a call's line: when it ended, what it was, how it ended,
// and each failed attempt with the wait that followed it.
func describe(c *call) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%6.2fs ", c.end.Seconds())
	if c.worker >= 0 {
		fmt.Fprintf(&b, "#%02d w%d ", c.n, c.worker)
	}
	fmt.Fprintf(&b, "%-24s %-34s ", c.op, c.target)
	switch {
	case errors.Is(c.err, errNotMade):
		b.WriteString(c.err.Error())
		return b.String()
	case c.err != nil:
		b.WriteString("FAILED")
	default:
		fmt.Fprintf(&b, "ok %-13s", c.detail)
	}
	fmt.Fprintf(&b, " %d attempt%s", c.attempts(), plural(c.attempts()))
	for i, r := range c.retries {
		sep := "; "
		if i == 0 {
			sep = ": "
		}
		fmt.Fprintf(&b, "%s%s, wait %.2fs", sep, r.why, r.delay.Seconds())
	}
	if c.err != nil {
		fmt.Fprintf(&b, " => %s", errorSummary(c.err))
	}
	return b.String()
}

// errorSummary names the SDK's error by its Go type, AWS code and message.
func errorSummary(err error) string {
	var invalid *types.InvalidInput
	if errors.As(err, &invalid) {
		return fmt.Sprintf("%T %s: %s", invalid, invalid.ErrorCode(), invalid.ErrorMessage())
	}
	var apiErr smithy.APIError
	if errors.As(err, &apiErr) {
		return fmt.Sprintf("%T %s: %s", apiErr, apiErr.ErrorCode(), apiErr.ErrorMessage())
	}
	return err.Error()
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}
