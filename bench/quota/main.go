// Command quota measures how retry keeps within a quota a server
// publishes: a loopback server allows -limit requests per -window, counted
// per fixed window or over a sliding one, and says on every answer how
// many remain and when that changes (X-RateLimit-* fields, the IETF's
// RateLimit field, or GitHub's fields in whole seconds); past the quota
// it answers 429. Clients make -calls
// calls in all through retry with its defaults: G goroutines in each of K
// clients, each client a Transport, connection pool and Pacer of its own,
// as K processes would have. K = 1 in memory (the Transport's own Pacer)
// and K = 1 and 4 sharing a redispace.Pacer over a redis-server of the
// program's own on loopback (-install installs it when absent).
//
// It reports, per run: the 429s, the most of them within any one window's
// span, attempts per call, the share of the quota used over the run and
// the time against the ideal (calls at the quota's own pace, -calls ×
// -window ÷ -limit). The defaults make 36 runs, each 15 s at the ideal
// pace (docs/performance.md says how long the whole takes):
//
//	cd bench && go run ./quota
//	go run ./quota -windows fixed -families x-ratelimit -goroutines 64 -stores memory
package main

import (
	"context"
	"flag"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gofri/go-github-ratelimit/v2/github_ratelimit"
	"github.com/hashicorp/go-cleanhttp"
	"github.com/redis/go-redis/v9"

	"github.com/backoff-jitter/retry"
	"github.com/backoff-jitter/retry/bench"
	"github.com/backoff-jitter/retry/bench/internal/redisproc"
	"github.com/backoff-jitter/retry/redispace"
)

// Run is one run's setting.
type Run struct {
	Window     Window
	Family     Family
	Lib        string // "retry", or "gofri" (gofri/go-github-ratelimit, no retries)
	Store      string // "memory" or "redis"
	Clients    int    // K
	Goroutines int    // G, in each client
	Calls      int
	Limit      int
	Span       time.Duration
}

// Result is what a run measured.
type Result struct {
	Run
	Refused, MostPerSpan, Attempts, Failed int
	Elapsed                                time.Duration
}

// Ideal returns the time of the calls at the quota's own pace.
func (r Run) Ideal() time.Duration {
	return time.Duration(float64(r.Calls) / float64(r.Limit) * float64(r.Span))
}

func main() {
	calls := flag.Int("calls", 150, "calls in all, per run")
	limit := flag.Int("limit", 50, "requests allowed per window")
	window := flag.Duration("window", 5*time.Second, "the quota's window")
	windows := flag.String("windows", "fixed,sliding", "comma-separated: fixed, sliding")
	families := flag.String("families", "x-ratelimit,ietf", "comma-separated: x-ratelimit, ietf, github (whole seconds, as GitHub sends)")
	libs := flag.String("libs", "retry", "comma-separated: retry, gofri (gofri/go-github-ratelimit v2 over no retries, in memory only)")
	goroutines := flag.String("goroutines", "1,8,64", "comma-separated goroutines per client")
	stores := flag.String("stores", "memory,redis,redis4", "comma-separated: memory (K = 1), redis (K = 1), redis4 (K = 4)")
	install := flag.Bool("install", true, "install redis-server with apt-get when absent")
	flag.Parse()
	if *calls < 1 || *limit < 1 || *window <= 0 {
		fmt.Fprintln(os.Stderr, "quota: -calls, -limit and -window must be positive")
		os.Exit(2)
	}
	gs, err := ints(*goroutines)
	if err != nil {
		fatal(err)
	}
	var rs *redisproc.Server
	if strings.Contains(*stores, "redis") {
		if rs, err = redisproc.Start(*install); err != nil {
			fatal(err)
		}
		defer rs.Stop()
	}
	const row = "%-8s %-12s %-6s %-7s %2v %3v %6v %5v %12v %14v %11v %11v %7v\n"
	fmt.Printf(row, "window", "fields", "lib", "store", "K", "G", "calls", "429s", "most/window", "attempts/call", "quota used", "time/ideal", "failed")
	n := 0
	for _, w := range strings.Split(*windows, ",") {
		for _, f := range strings.Split(*families, ",") {
			for _, st := range strings.Split(*stores, ",") {
				for _, g := range gs {
					for _, lib := range strings.Split(*libs, ",") {
						if lib == "gofri" && st != "memory" {
							continue
						}
						run := Run{Window: Window(w), Family: Family(f), Lib: lib, Store: st, Clients: 1, Goroutines: g,
							Calls: *calls, Limit: *limit, Span: *window}
						if st == "redis4" {
							run.Store, run.Clients = "redis", 4
						}
						n++
						res, err := measure(run, rs, fmt.Sprintf("quota-bench-%d-%d:", time.Now().UnixNano(), n))
						if err != nil {
							fatal(err)
						}
						fmt.Printf(row, res.Window, res.Family, res.Lib, res.Store, res.Clients, res.Goroutines, res.Calls, res.Refused, res.MostPerSpan,
							fmt.Sprintf("%.2f", float64(res.Attempts)/float64(res.Calls)),
							fmt.Sprintf("%.1f%%", 100*float64(res.Ideal())/float64(res.Elapsed)),
							fmt.Sprintf("%.2f", float64(res.Elapsed)/float64(res.Ideal())), res.Failed)
					}
				}
			}
		}
	}
}

// measure makes run's calls against a fresh server.
func measure(run Run, rs *redisproc.Server, prefix string) (Result, error) {
	switch {
	case run.Window != Fixed && run.Window != Sliding:
		return Result{}, fmt.Errorf("unknown window %q", run.Window)
	case run.Family != XRateLimit && run.Family != IETF && run.Family != GitHub:
		return Result{}, fmt.Errorf("unknown fields %q", run.Family)
	case run.Lib != "retry" && run.Lib != "gofri":
		return Result{}, fmt.Errorf("unknown lib %q", run.Lib)
	case run.Store != "memory" && run.Store != "redis":
		return Result{}, fmt.Errorf("unknown store %q", run.Store)
	}
	srv := &server{window: run.Window, family: run.Family, limit: run.Limit, span: run.Span}
	ts := httptest.NewServer(srv)
	defer ts.Close()

	var rdb *redis.Client
	if run.Store == "redis" {
		rdb = redis.NewClient(&redis.Options{Addr: rs.Addr, MaxRetries: -1})
		defer rdb.Close()
		if err := redisproc.Warm(rdb, run.Clients*run.Goroutines); err != nil {
			return Result{}, err
		}
	}
	var left atomic.Int64
	left.Store(int64(run.Calls))
	var failed atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for range run.Clients {
		base := cleanhttp.DefaultPooledTransport()
		base.MaxIdleConnsPerHost = run.Goroutines
		defer base.CloseIdleConnections()
		var opts []retry.Option
		if rdb != nil {
			opts = append(opts, retry.WithPacer(&redispace.Pacer{Client: rdb, Prefix: prefix}))
		}
		var rt http.RoundTripper = retry.New(base, opts...)
		if run.Lib == "gofri" {
			rt = github_ratelimit.New(base)
		}
		for range run.Goroutines {
			wg.Go(func() {
				for left.Add(-1) >= 0 {
					if !call(rt, ts.URL) {
						failed.Add(1)
					}
				}
			})
		}
	}
	wg.Wait()
	res := Result{Run: run, Elapsed: time.Since(start), Failed: int(failed.Load())}
	srv.mu.Lock()
	res.Refused, res.Attempts = len(srv.refused), srv.accepted+len(srv.refused)
	srv.mu.Unlock()
	res.MostPerSpan = srv.refusalsPerSpan()
	return res, nil
}

// call makes one call, with a deadline of a minute, and reports whether
// it ended in a 200.
func call(rt http.RoundTripper, url string) bool {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	return bench.Get(ctx, rt, url)
}

func ints(list string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(list, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("%q is not a positive number", f)
		}
		out = append(out, n)
	}
	return out, nil
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "quota:", err)
	os.Exit(1)
}
