// Pacing measures what the adaptive Pacer saves against a rate-limited
// server: N clients each make K requests through one shared Transport, and
// the server refuses with 429 (no Retry-After) whatever exceeds its rate.
// It compares full jitter alone with full jitter plus the Pacer (CUBIC and
// AIMD) and with a fixed limiter set to the server's rate (or -known times
// it), side by side in one run, and reports attempts per request,
// completion time against the ideal (requests ÷ rate; with -burst the
// bucket's first N+1 come on top, so a run can beat it), and the
// requests' p50 and p99 times.
//
//	go run ./pacing                 # an in-process token-bucket server
//	go run ./pacing -server nginx   # a real nginx limit_req (installed from Debian if absent)
//	go run ./pacing -rounds 1 -svg pacing.svg -series series.csv
//	go run ./pacing -server nginx -burst 10   # limit_req burst=10 nodelay: a bucket of 11
//	go run ./pacing -window 1s -rate 20 -clients 8 -requests 15   # 20 accepted at the start of each second
//
// With -api route53 the requests are Route 53 ListHostedZones calls made
// by the AWS SDK for Go v2, and the server refuses as Route 53 does: 400
// with a Throttling error document. The strategies are then retry's
// Transport with the settings of examples/route53 (alone, with the Pacer,
// and with the known-rate limiter) and the SDK's own retry modes, standard
// and adaptive (its client-side CUBIC rate limiter), without the Transport:
//
//	go run ./pacing -api route53 -server nginx -rate 5 -clients 10 -requests 50 -rounds 1
//
// The server records when each attempt arrived and how it was answered:
// -series writes the attempts accepted and refused per interval of every
// run, and -svg draws those of each strategy's first run as a chart.
//
// Every run has a time limit, and with -deadline every request a
// deadline; traffic goes to 127.0.0.1 only.
package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	mrand "math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	sdkretry "github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/route53"

	"github.com/backoff-jitter/retry"
	"github.com/backoff-jitter/retry/awsretry"
	"github.com/backoff-jitter/retry/bench/internal/chart"
	"github.com/backoff-jitter/retry/bench/internal/nginx"
	"github.com/backoff-jitter/retry/pace"
	"github.com/hashicorp/go-cleanhttp"
	"golang.org/x/time/rate"
)

// config is the command line.
type config struct {
	api      string // get or route53
	only     string // comma-separated strategy names, or "" for all
	server   string
	clients  int
	requests int
	rate     float64
	rounds   int
	csv      string
	series   string        // CSV of attempts per interval, or ""
	svg      string        // chart of the first round, or ""
	interval time.Duration // width of the intervals of series and svg
	install  bool
	limit    time.Duration
	shed     float64       // with the fake server, the share refused at random, whatever the load
	burst    int           // the server's burst: requests it accepts at once over the rate
	window   time.Duration // with the fake server, a fixed window limiter's window; 0: a token bucket
	deadline time.Duration // of each request; 0: only the run's limit
	// known is the share of the server's rate the known-rate limiter is
	// set to; 0 means 1.
	known float64
}

func main() {
	var c config
	flag.StringVar(&c.api, "api", "get", "the requests: get (plain GETs, refused with 429) or route53 (ListHostedZones through the AWS SDK, refused with 400 Throttling)")
	flag.StringVar(&c.only, "only", "", "run only these strategies: names from the table, comma-separated")
	flag.StringVar(&c.server, "server", "fake", "the rate-limited server: fake (in-process token bucket) or nginx (limit_req)")
	flag.IntVar(&c.clients, "clients", 100, "concurrent clients")
	flag.IntVar(&c.requests, "requests", 3, "requests each client makes, one after another")
	flag.Float64Var(&c.rate, "rate", 100, "the server's limit, requests per second (0: none, with -server fake)")
	flag.IntVar(&c.rounds, "rounds", 3, "runs of each strategy (the table shows means per run, failures summed, median times, each median against the first row's with a 95% bootstrap interval from 10 rounds, and request latencies pooled)")
	flag.StringVar(&c.csv, "csv", "", "write one row per run to this CSV file")
	flag.StringVar(&c.series, "series", "", "write the attempts accepted and refused per interval of every run to this CSV file")
	flag.StringVar(&c.svg, "svg", "", "write a chart of the attempts per interval of each strategy's first run to this SVG file")
	flag.DurationVar(&c.interval, "interval", 100*time.Millisecond, "width of the intervals of -series and -svg (whole milliseconds, 10ms to 10s)")
	flag.BoolVar(&c.install, "install", true, "with -server nginx, install nginx-light with apt-get when it is absent")
	flag.DurationVar(&c.limit, "limit", 0, "time limit of one run (0: three times the ideal time, and a minute at least)")
	flag.IntVar(&c.burst, "burst", 0, "the server's burst: how many requests it accepts at once over its rate (nginx's limit_req burst=N nodelay; a token bucket of N+1), 0 to 1000")
	flag.DurationVar(&c.window, "window", 0, "with -server fake, limit with fixed windows of this length instead of a token bucket: rate × window requests accepted in each, counted from the first (an API gateway's per-second or per-minute quota), 0 or 100ms to 1m")
	flag.Float64Var(&c.shed, "shed", 0, "with -server fake, also refuse this share of the requests at random, whatever the load (0 to 0.9): a load balancer shedding, a flaky backend")
	flag.DurationVar(&c.deadline, "deadline", 0, "deadline of each request (0: none but -limit)")
	flag.Float64Var(&c.known, "known", 1, "the Limiter(known) rows' rate, as a share of -rate (0.5 to 1; 0 means 1): below 1, what a client that knew the limit and kept a margin would do")
	flag.Parse()
	if err := c.validate(); err != nil {
		fmt.Fprintln(os.Stderr, "pacing:", err)
		os.Exit(2)
	}
	if err := run(c, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "pacing:", err)
		os.Exit(1)
	}
}

// validate reports the first flag value out of range, or an output file
// whose directory does not exist (better now than after the runs).
func (c config) validate() error {
	switch {
	case c.api != "get" && c.api != "route53":
		return fmt.Errorf("-api %q: want get or route53", c.api)
	case c.server != "fake" && c.server != "nginx":
		return fmt.Errorf("-server %q: want fake or nginx", c.server)
	case c.clients < 1 || c.clients > 2000:
		return fmt.Errorf("-clients %d: want 1 to 2000", c.clients)
	case c.requests < 1 || c.requests > 1000:
		return fmt.Errorf("-requests %d: want 1 to 1000", c.requests)
	case !(c.rate >= 1 && c.rate <= 10000) && !(c.rate == 0 && c.server == "fake"): // 0: no limit
		return fmt.Errorf("-rate %v: want 1 to 10000 (or 0, no limit, with -server fake)", c.rate)
	case c.rounds < 1 || c.rounds > maxRounds:
		return fmt.Errorf("-rounds %d: want 1 to %d", c.rounds, maxRounds)
	case c.limit < 0:
		return fmt.Errorf("-limit %v: want 0 or more", c.limit)
	case c.burst < 0 || c.burst > 1000:
		return fmt.Errorf("-burst %d: want 0 to 1000", c.burst)
	case !(c.shed >= 0 && c.shed <= 0.9):
		return fmt.Errorf("-shed %v: want 0 to 0.9", c.shed)
	case c.shed > 0 && c.server != "fake":
		return errors.New("-shed: only with -server fake")
	case c.window != 0 && (c.window < 100*time.Millisecond || c.window > time.Minute):
		return fmt.Errorf("-window %v: want 0 or 100ms to 1m", c.window)
	case c.window != 0 && (c.server != "fake" || c.burst != 0 || c.rate == 0):
		return errors.New("-window: only with -server fake, a -rate and no -burst")
	case c.window != 0 && c.rate*c.window.Seconds() < 1:
		return fmt.Errorf("-window %v: -rate %v admits less than one request a window", c.window, c.rate)
	case c.known != 0 && !(c.known >= 0.5 && c.known <= 1):
		return fmt.Errorf("-known %v: want 0.5 to 1", c.known)
	case c.deadline < 0:
		return fmt.Errorf("-deadline %v: want 0 or more", c.deadline)
	case c.interval < 10*time.Millisecond || c.interval > 10*time.Second || c.interval%time.Millisecond != 0:
		return fmt.Errorf("-interval %v: want whole milliseconds from 10ms to 10s", c.interval)
	}
	if _, err := c.strategies(); err != nil {
		return err
	}
	for _, f := range []struct{ flag, path string }{{"-csv", c.csv}, {"-series", c.series}, {"-svg", c.svg}} {
		if err := checkOutput(f.path); err != nil {
			return fmt.Errorf("%s %s: %w", f.flag, f.path, err)
		}
	}
	return nil
}

// checkOutput reports whether a file could be created at path: its
// directory must exist. An empty path (no output) is fine.
func checkOutput(path string) error {
	if path == "" {
		return nil
	}
	dir := filepath.Dir(path)
	fi, err := os.Stat(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("no such directory %s", dir)
	} else if err != nil {
		return err
	}
	if !fi.IsDir() {
		return fmt.Errorf("%s is not a directory", dir)
	}
	return nil
}

// strategy is one way of configuring the shared Transport.
type strategy struct {
	name  string
	pacer func() *pace.Pacer // nil: the Transport's own, unless noPacer
	// noPacer turns the Transport's own Pacer off (retry.NoPacer).
	noPacer bool
	// options, if not nil, are the Transport's only options (with
	// -api route53: awsretry.Options()).
	options func() []retry.Option
	// known spaces the attempts at the server's rate (-rate, times
	// -known), known in advance, with a fixed client-side token bucket
	// under the Transport, for comparison with a Pacer that learns the
	// rate.
	known bool
	// sdk, with -api route53, is the AWS SDK's retry mode, standard or
	// adaptive, used instead of the Transport; "" for the Transport.
	sdk string
}

var strategies = []strategy{
	{name: "FullJitter+NoPacer", noPacer: true},
	{name: "FullJitter"}, // the Transport's own Pacer
	{name: "FullJitter+Pacer(CUBIC)", pacer: func() *pace.Pacer { return &pace.Pacer{Adapt: pace.AdaptCubic} }},
	{name: "FullJitter+Pacer(AIMD)", pacer: func() *pace.Pacer { return &pace.Pacer{Adapt: pace.AdaptAIMD} }},
	{name: "FullJitter+Pacer(slow-start)", pacer: func() *pace.Pacer { return &pace.Pacer{InitialWindow: pace.DefaultInitialWindow} }},
	{name: "FullJitter+Limiter(known)", known: true, noPacer: true},
	// The Transport's defaults but MaxAttempts: its budget, backoff and
	// own Pacer (docs/pacing.md's "a rate limit is finished").
	{name: "Defaults", options: func() []retry.Option { return []retry.Option{retry.WithMaxAttempts(20)} }},
	{name: "Defaults+NoPacer", options: func() []retry.Option {
		return []retry.Option{retry.WithMaxAttempts(20), retry.WithPacer(retry.NoPacer)}
	}},
}

// route53Strategies are those of -api route53. The Transport's rows use
// examples/route53's settings (its Pacer learns no rate from conflicts,
// which ListHostedZones does not meet); the SDK's rows its retryer
// instead, with the same attempts.
var route53Strategies = []strategy{
	{name: "Transport+NoPacer", noPacer: true},
	{name: "Transport"}, // the Transport's own Pacer
	{name: "Transport+Pacer(CUBIC)", pacer: func() *pace.Pacer { return &pace.Pacer{Refusal: awsretry.RateRefusal} }},
	{name: "awsretry.Options", options: awsretry.Options},
	{name: "Transport+Limiter(known)", known: true, noPacer: true},
	{name: "SDK(standard)", sdk: "standard"},
	{name: "SDK(adaptive)", sdk: "adaptive"},
}

// strategies returns the strategies to run: those of c.api in the
// table's order, or, when c.only is set, those it names, in its order.
func (c config) strategies() ([]strategy, error) {
	all := strategies
	if c.api == "route53" {
		all = route53Strategies
	}
	if c.only == "" {
		return all, nil
	}
	var names []string
	for _, s := range all {
		names = append(names, s.name)
	}
	var out []strategy
	for name := range strings.SplitSeq(c.only, ",") {
		i := slices.Index(names, strings.TrimSpace(name))
		if i < 0 {
			return nil, fmt.Errorf("-only: no strategy %q with -api %s (want some of %s)", name, c.api, strings.Join(names, ", "))
		}
		if !slices.ContainsFunc(out, func(s strategy) bool { return s.name == all[i].name }) {
			out = append(out, all[i])
		}
	}
	return out, nil
}

// limited is a RoundTripper that waits for a token of a limiter before
// each attempt.
type limited struct {
	base http.RoundTripper
	lim  *rate.Limiter
}

func (l limited) RoundTrip(req *http.Request) (*http.Response, error) {
	if err := l.lim.Wait(req.Context()); err != nil {
		if req.Body != nil {
			req.Body.Close()
		}
		return nil, err
	}
	return l.base.RoundTrip(req)
}

// result is one run of one strategy.
type result struct {
	strategy string
	round    int
	requests int
	attempts int64 // sent by the clients, as the server saw them
	refused  int64 // answered with a refusal (see refusal)
	failed   int   // requests that did not end in a 200
	// latencies are the requests' times, from the call to its answer,
	// waits for turns included.
	latencies []time.Duration
	events    []event // every attempt the server saw, in order of arrival
	elapsed   time.Duration
}

// run runs every strategy c.rounds times against one server, prints the
// table to out and writes the files the flags ask for.
func run(c config, out io.Writer) error {
	srv, err := startServer(c)
	if err != nil {
		return err
	}
	defer srv.close()

	list, err := c.strategies()
	if err != nil {
		return err
	}
	ideal := idealTime(c)
	fmt.Fprintf(out, "%d clients × %d requests against %s limited to %.0f requests/s (ideal %v), %d rounds\n\n",
		c.clients, c.requests, srv.name(), c.rate, ideal.Round(time.Millisecond), c.rounds)
	if c.knownRate() != c.rate {
		fmt.Fprintf(out, "Limiter(known) rows at %.4g requests/s (-known %v)\n\n", c.knownRate(), c.known)
	}

	var results []result
	for round := 1; round <= c.rounds; round++ {
		for _, s := range list {
			time.Sleep(max(refillPause(c.rate, c.burst), c.window))
			r, err := runOnce(c, srv, s)
			if err != nil {
				return fmt.Errorf("%s: %w", s.name, err)
			}
			r.round = round
			results = append(results, r)
		}
	}
	report(out, list, ideal, results)
	return writeFiles(c, srv.name(), results)
}

// writeFiles writes the CSV files and the chart the flags ask for.
func writeFiles(c config, serverName string, results []result) error {
	if c.csv != "" {
		if err := writeCSV(c.csv, results); err != nil {
			return err
		}
	}
	if c.series != "" {
		if err := writeSeries(c.series, results, c.interval); err != nil {
			return err
		}
	}
	if c.svg != "" {
		return writeSVG(c.svg, figureOf(c, serverName, results))
	}
	return nil
}

// runOnce runs one strategy once: c.clients goroutines each make
// c.requests requests, one after another, through one shared Transport.
func runOnce(c config, srv server, s strategy) (result, error) {
	base := cleanhttp.DefaultPooledTransport()
	base.MaxIdleConnsPerHost = c.clients
	defer base.CloseIdleConnections()
	call := newCaller(c, s, srv.url(), base)

	mark, err := srv.mark()
	if err != nil {
		return result{}, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.timeLimit())
	defer cancel()
	var failed atomic.Int64
	var mu sync.Mutex
	latencies := make([]time.Duration, 0, c.clients*c.requests)
	var wg sync.WaitGroup
	start := time.Now()
	for i := 0; i < c.clients; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < c.requests; j++ {
				rctx, cancel := ctx, context.CancelFunc(func() {})
				if c.deadline > 0 {
					rctx, cancel = context.WithTimeout(ctx, c.deadline)
				}
				t0 := time.Now()
				if !call(rctx) {
					failed.Add(1)
				}
				d := time.Since(t0)
				cancel()
				mu.Lock()
				latencies = append(latencies, d)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	events, err := srv.since(mark, start)
	if err != nil {
		return result{}, err
	}
	n := countEvents(events)
	return result{
		strategy:  s.name,
		requests:  c.clients * c.requests,
		attempts:  n.attempts,
		refused:   n.refused,
		failed:    int(failed.Load()),
		latencies: latencies,
		events:    events,
		elapsed:   elapsed,
	}, nil
}

// newCaller returns the request of c.api, made with strategy s over base,
// which reports whether it succeeded.
func newCaller(c config, s strategy, url string, base http.RoundTripper) func(context.Context) bool {
	var under http.RoundTripper = base
	if s.known {
		under = limited{base: base, lim: newLimiter(c.knownRate(), 1)}
	}
	if c.api == "route53" {
		return route53Caller(s, url, under)
	}
	opts := []retry.Option{
		// Enough attempts for every request to get through even without
		// pacing: the comparison is the work done, not who gives up.
		retry.WithMaxAttempts(100),
		retry.WithBackoff(retry.Exponential{Base: 10 * time.Millisecond, Cap: 2 * time.Second, Jitter: retry.FullJitter}),
		retry.WithBudget(retry.NoBudget),
	}
	opts = append(opts, s.pacing()...)
	if s.options != nil {
		opts = s.options()
	}
	client := &http.Client{Transport: retry.New(under, opts...)}
	return func(ctx context.Context) bool { return get(ctx, client, url) }
}

// pacing returns the Transport's options of s's pacing.
func (s strategy) pacing() []retry.Option {
	switch {
	case s.noPacer:
		return []retry.Option{retry.WithPacer(retry.NoPacer)}
	case s.pacer != nil:
		return []retry.Option{retry.WithPacer(s.pacer())}
	}
	return nil
}

// route53MaxAttempts is the attempts of a call with -api route53, for
// the Transport and the SDK's retryer alike: examples/route53's.
const route53MaxAttempts = 20

// route53Caller returns a ListHostedZones call through a Route 53 client
// of the AWS SDK at url: with strategy s's SDK retry mode over under, or
// with one attempt per SDK call over a Transport with examples/route53's
// retry settings (the Route 53 error codes, its 20 attempts, exponential
// backoff from 400 ms capped at 1.6 s with equal jitter, a budget where a
// throttled retry costs 1) and s's Pacer. Not its MaxRetryAfter (nginx
// sends no Retry-After) nor its per-call deadline (the run has -limit,
// and -deadline). The example is a main package of another module, so
// these are written out again here: change both together.
func route53Caller(s strategy, url string, under http.RoundTripper) func(context.Context) bool {
	var retryer aws.Retryer = aws.NopRetryer{}
	rt := under
	switch s.sdk {
	case "standard":
		retryer = sdkretry.NewStandard(func(o *sdkretry.StandardOptions) { o.MaxAttempts = route53MaxAttempts })
	case "adaptive":
		retryer = sdkretry.NewAdaptiveMode(func(o *sdkretry.AdaptiveModeOptions) {
			o.StandardOptions = append(o.StandardOptions, func(o *sdkretry.StandardOptions) { o.MaxAttempts = route53MaxAttempts })
		})
	default:
		opts := []retry.Option{
			retry.WithClassifier(awsretry.Classify),
			retry.WithMaxAttempts(route53MaxAttempts),
			retry.WithBackoff(retry.Exponential{Base: 400 * time.Millisecond, Cap: 1600 * time.Millisecond, Jitter: retry.EqualJitter}),
			retry.WithBudget(&retry.TokenBucket{ThrottledCost: 1}),
		}
		opts = append(opts, s.pacing()...)
		if s.options != nil {
			opts = s.options()
		}
		rt = retry.New(under, opts...)
	}
	client := route53.New(route53.Options{
		Region:       "us-east-1",
		BaseEndpoint: aws.String(strings.TrimSuffix(url, "/")),
		Credentials:  credentials.NewStaticCredentialsProvider("AKIDBENCHPACING", "secret", ""),
		Retryer:      retryer,
		HTTPClient:   &http.Client{Transport: rt},
	})
	return func(ctx context.Context) bool {
		_, err := client.ListHostedZones(ctx, &route53.ListHostedZonesInput{})
		return err == nil
	}
}

// get makes one request and reports whether it ended in a 200.
func get(ctx context.Context, client *http.Client, url string) bool {
	req, err := http.NewRequestWithContext(ctx, "GET", url, nil)
	if err != nil {
		return false
	}
	resp, err := client.Do(req)
	if err != nil {
		return false
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// idealTime is the least time the requests take at the server's rate; 0
// when it has none.
func idealTime(c config) time.Duration {
	if c.rate <= 0 {
		return 0
	}
	return time.Duration(float64(c.clients*c.requests) / c.rate * float64(time.Second))
}

// knownRate returns the rate of the known-rate limiter: -known times the
// server's.
func (c config) knownRate() float64 {
	return cmp.Or(c.known, 1) * c.rate
}

// timeLimit returns the time limit of one run: -limit, or if 0 three
// times the ideal time and a minute at least (a Route 53 run of 10 × 50
// calls at 5/s takes 100 s at best).
func (c config) timeLimit() time.Duration {
	if c.limit > 0 {
		return c.limit
	}
	return max(time.Minute, 3*idealTime(c))
}

// maxRounds is the most -rounds: runs of tens of milliseconds (random
// shedding) need a hundred for their medians to settle.
const maxRounds = 100

// report prints the table: each strategy's attempts and refusals per run
// (means over its runs), its failures (summed), its median time and that
// median against the first strategy's, with a 95 % bootstrap interval
// from ten rounds on (see medianRatio), and the latencies of all its
// requests (pooled).
func report(out io.Writer, list []strategy, ideal time.Duration, results []result) {
	type agg struct {
		attempts, refused float64
		failed            int
		elapsed           []time.Duration
		latencies         []time.Duration
	}
	byName := map[string]*agg{}
	for _, r := range results {
		a := byName[r.strategy]
		if a == nil {
			a = &agg{}
			byName[r.strategy] = a
		}
		a.attempts += float64(r.attempts) / float64(r.requests)
		a.refused += float64(r.refused)
		a.failed += r.failed
		a.elapsed = append(a.elapsed, r.elapsed)
		a.latencies = append(a.latencies, r.latencies...)
	}
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "strategy\tattempts/request\trefused/run\tfailed\tmedian time\ttime/ideal\ttime/first\tp50 request\tp99 request\t")
	var first []time.Duration
	var mf time.Duration // first's median
	for i, s := range list {
		a := byName[s.name]
		n := float64(len(a.elapsed))
		if i == 0 {
			first, mf = a.elapsed, median(a.elapsed)
		}
		med := median(a.elapsed)
		ratio := "-"
		if ideal > 0 {
			ratio = fmt.Sprintf("%.2f", float64(med)/float64(ideal))
		}
		vsFirst := "-"
		if mf > 0 {
			vsFirst = fmt.Sprintf("%.2f", float64(med)/float64(mf))
		}
		if len(a.elapsed) >= 10 && len(first) >= 10 {
			_, lo, hi := medianRatio(a.elapsed, first, mrand.New(mrand.NewPCG(1, uint64(i))))
			vsFirst += fmt.Sprintf(" [%.2f, %.2f]", lo, hi)
		}
		sort.Slice(a.latencies, func(i, j int) bool { return a.latencies[i] < a.latencies[j] })
		fmt.Fprintf(tw, "%s\t%.2f\t%.0f\t%d\t%v\t%s\t%s\t%v\t%v\t\n", s.name, a.attempts/n, a.refused/n, a.failed,
			med.Round(time.Millisecond), ratio, vsFirst, quantile(a.latencies, 0.5).Round(time.Millisecond),
			quantile(a.latencies, 0.99).Round(time.Millisecond))
	}
	tw.Flush()
}

// refillPause is how long a run waits for the server's bucket to refill
// before it starts: 20 tokens' worth, or the whole bucket's (burst+1) if
// that is more, so that every run begins with a full bucket; none when
// there is no limit.
func refillPause(r float64, burst int) time.Duration {
	if r <= 0 {
		return 0
	}
	return time.Duration(float64(max(20, burst+1)) / r * float64(time.Second))
}

// newLimiter returns a token bucket of r tokens a second with a burst of
// burst; no limit when r is 0.
func newLimiter(r float64, burst int) *rate.Limiter {
	if r > 0 {
		return rate.NewLimiter(rate.Limit(r), burst)
	}
	return rate.NewLimiter(rate.Inf, 1)
}

// median returns quantile's median of the durations (the upper of the
// two middle ones for an even count, as the table has always shown), 0
// if none. It does not change d.
func median(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return quantile(s, 0.5)
}

// bootstrapResamples is how many resamples medianRatio draws.
const bootstrapResamples = 2000

// medianRatio returns the median of a over the median of b, and a 95 %
// percentile bootstrap interval of that ratio: both resampled with
// replacement, bootstrapResamples times, from rnd. Whole runs of tens of
// milliseconds vary by half from one to the next on a shared machine;
// the interval says whether a difference of medians is more than that.
// Zero if either is empty or b's median is 0.
func medianRatio(a, b []time.Duration, rnd *mrand.Rand) (ratio, lo, hi float64) {
	mb := median(b)
	if len(a) == 0 || mb == 0 {
		return 0, 0, 0
	}
	ratios := make([]float64, 0, bootstrapResamples)
	ra, rb := make([]time.Duration, len(a)), make([]time.Duration, len(b))
	for range bootstrapResamples {
		for i := range ra {
			ra[i] = a[rnd.IntN(len(a))]
		}
		for i := range rb {
			rb[i] = b[rnd.IntN(len(b))]
		}
		// The resamples are scratch: sorted in place.
		slices.Sort(ra)
		slices.Sort(rb)
		if m := quantile(rb, 0.5); m > 0 { // a resample of b can be all zeros
			ratios = append(ratios, float64(quantile(ra, 0.5))/float64(m))
		}
	}
	slices.Sort(ratios)
	ratio = float64(median(a)) / float64(mb)
	if len(ratios) == 0 {
		return ratio, 0, 0
	}
	return ratio, ratios[len(ratios)*25/1000], ratios[len(ratios)*975/1000]
}

// quantile returns the q-quantile of the sorted durations, 0 if none.
func quantile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[min(len(sorted)-1, int(q*float64(len(sorted))))]
}

// writeCSV writes one row per run.
func writeCSV(path string, results []result) error {
	return chart.WriteCSV(path, csvRows(results))
}

// csvRows are the rows of the -csv file, header first: one per run, with
// its requests' p50 and p99 times. A run's time is in milliseconds to
// the microsecond: medians pooled over rounds of runs of tens of
// milliseconds need more than whole ones.
func csvRows(results []result) [][]string {
	rows := [][]string{{"strategy", "round", "requests", "attempts", "refused", "failed", "elapsed_ms", "p50_ms", "p99_ms"}}
	for _, r := range results {
		lat := slices.Clone(r.latencies)
		slices.Sort(lat)
		rows = append(rows, []string{r.strategy, strconv.Itoa(r.round), strconv.Itoa(r.requests), strconv.FormatInt(r.attempts, 10),
			strconv.FormatInt(r.refused, 10), strconv.Itoa(r.failed), strconv.FormatFloat(float64(r.elapsed.Microseconds())/1000, 'f', -1, 64),
			strconv.FormatInt(quantile(lat, 0.5).Milliseconds(), 10), strconv.FormatInt(quantile(lat, 0.99).Milliseconds(), 10)})
	}
	return rows
}

// server is the rate-limited server under test. It records every attempt
// it sees, for the whole of its life; mark and since cut one run out of
// that record.
type server interface {
	name() string
	url() string
	// mark returns the position of the end of the record, for since.
	mark() (int64, error)
	// since returns the attempts recorded after mark, timed from start.
	since(mark int64, start time.Time) ([]event, error)
	close()
}

// fakeServer refuses whatever exceeds a token bucket of rate requests per
// second with a burst of one (nginx's limit_req without burst), or of
// -burst plus one (limit_req's burst=N nodelay), with 429,
// or with -api route53 as Route 53 does (400, Throttling).
type fakeServer struct {
	srv  *http.Server
	ln   net.Listener
	lim  allower
	shed float64 // the share refused at random, whatever the load
	// route53 answers as nginx.StartRoute53 does: ListHostedZones'
	// document, and 400 Throttling over the rate.
	route53 bool

	mu   sync.Mutex
	hits []hit // every attempt, in order of arrival
}

// hit is one attempt the fake server answered.
type hit struct {
	at     time.Time
	status int
}

func startServer(c config) (server, error) {
	if c.server == "nginx" {
		start := nginx.Start
		if c.api == "route53" {
			start = nginx.StartRoute53
		}
		n, err := start(c.rate, c.burst, c.install)
		if err != nil {
			return nil, err
		}
		return nginxServer{n, c.burst}, nil
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	f := &fakeServer{ln: ln, shed: c.shed, route53: c.api == "route53"}
	if c.window > 0 {
		f.lim = &fixedWindow{window: c.window, quota: int(c.rate * c.window.Seconds())}
	} else {
		f.lim = newLimiter(c.rate, c.burst+1)
	}
	f.srv = &http.Server{Handler: f, ReadHeaderTimeout: 10 * time.Second}
	go f.srv.Serve(ln)
	return f, nil
}

// ServeHTTP answers 200, or a refusal over the rate (see fakeServer), and
// records the attempt before answering, so that a run's record is
// complete when its last response arrives.
func (f *fakeServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	status, refusal, ok := http.StatusOK, http.StatusTooManyRequests, "ok\n"
	if f.route53 {
		refusal, ok = http.StatusBadRequest, nginx.ListHostedZonesXML
		w.Header().Set("Content-Type", "text/xml")
	}
	if !f.lim.Allow() || f.shed > 0 && mrand.Float64() < f.shed {
		status = refusal
	}
	f.mu.Lock()
	f.hits = append(f.hits, hit{at: time.Now(), status: status})
	f.mu.Unlock()
	switch {
	case status == http.StatusOK:
		io.WriteString(w, ok)
	case f.route53:
		w.WriteHeader(status)
		io.WriteString(w, nginx.ThrottlingXML)
	default:
		w.WriteHeader(status)
	}
}

func (f *fakeServer) name() string {
	var name string
	switch l := f.lim.(type) {
	case *fixedWindow:
		name = fmt.Sprintf("an in-process fixed window limiter (%d every %v)", l.quota, l.window)
	case *rate.Limiter:
		name = "an in-process token bucket"
		if l.Limit() != rate.Inf {
			name += burstName(l.Burst() - 1)
		}
	}
	if f.shed > 0 {
		name += fmt.Sprintf(" that also sheds %.0f%% at random", f.shed*100)
	}
	return name
}

// allower is the fake server's limiter.
type allower interface{ Allow() bool }

// fixedWindow accepts quota requests in each window, the windows counted
// from the first request: all of a window's quota at its start, if asked,
// and nothing more until the next.
type fixedWindow struct {
	window time.Duration
	quota  int

	mu    sync.Mutex
	first time.Time
	at    int64 // the window counted in used
	used  int
}

func (w *fixedWindow) Allow() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	now := time.Now()
	if w.first.IsZero() {
		w.first = now
	}
	if i := int64(now.Sub(w.first) / w.window); i != w.at {
		w.at, w.used = i, 0
	}
	if w.used >= w.quota {
		return false
	}
	w.used++
	return true
}

// burstName describes a server's burst, "" for none.
func burstName(burst int) string {
	if burst == 0 {
		return ""
	}
	return fmt.Sprintf(" (burst %d)", burst)
}
func (f *fakeServer) url() string { return "http://" + f.ln.Addr().String() + "/" }
func (f *fakeServer) close()      { f.srv.Close() }

// mark returns the number of attempts recorded so far.
func (f *fakeServer) mark() (int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return int64(len(f.hits)), nil
}

// since returns the attempts recorded after the first mark of them, timed
// from start.
func (f *fakeServer) since(mark int64, start time.Time) ([]event, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if mark < 0 || mark > int64(len(f.hits)) {
		return nil, fmt.Errorf("mark %d outside the record of %d attempts", mark, len(f.hits))
	}
	var evs []event
	for _, h := range f.hits[mark:] {
		evs = append(evs, event{at: h.at.Sub(start), status: h.status})
	}
	return evs, nil
}

// nginxServer is the server interface over a real nginx with limit_req.
type nginxServer struct {
	*nginx.Server
	burst int
}

func (n nginxServer) name() string         { return "nginx limit_req" + burstName(n.burst) }
func (n nginxServer) url() string          { return n.URL() }
func (n nginxServer) mark() (int64, error) { return n.Mark() }
func (n nginxServer) close()               { n.Close() }
func (n nginxServer) since(mark int64, start time.Time) ([]event, error) {
	evs, err := n.Since(mark, start)
	out := make([]event, len(evs))
	for i, e := range evs {
		out[i] = event{at: e.At, status: e.Status}
	}
	return out, err
}
