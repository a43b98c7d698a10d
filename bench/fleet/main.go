// Fleet measures pacing across processes: K separate processes (real
// ones, each this program started again with -child) share one rate limit
// (a real nginx limit_req, 429 over the limit), 100 clients × 3 requests
// split evenly among them. Each strategy paces the fleet one way: "local"
// gives every process a pace.Pacer of its own, as K processes have today;
// "shared" gives them one redispace.Pacer over one Redis (a redis-server
// this program starts on loopback). It reports, from nginx's access log,
// attempts per request and the time against the ideal (requests ÷ rate).
//
//	cd bench && go run ./fleet                       # K = 1, 2, 5, 10
//	go run ./fleet -k 10 -svg ../docs/fleet.svg      # and the chart of K = 10
//	go run ./fleet -k 5 -kill 1s                     # Redis killed 1s into each shared run
//
// nginx and redis-server come from Debian's packages (-install installs
// them when absent). Traffic goes to 127.0.0.1 only; every request has a
// deadline and every run a time limit.
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/backoff-jitter/retry"
	"github.com/backoff-jitter/retry/bench"
	"github.com/backoff-jitter/retry/bench/internal/nginx"
	"github.com/backoff-jitter/retry/bench/internal/redisproc"
	"github.com/backoff-jitter/retry/pace"
	"github.com/backoff-jitter/retry/redispace"
	"github.com/hashicorp/go-cleanhttp"
	"github.com/redis/go-redis/v9"
)

// config is the command line of the parent.
type config struct {
	ks         []int
	strategies []string
	clients    int
	requests   int
	rate       float64
	rounds     int
	kill       time.Duration // kill Redis this long into each shared run; 0: never
	svg        string
	series     string
	install    bool
	limit      time.Duration
}

// childConfig is the command line of a child process.
type childConfig struct {
	url, strategy, redisAddr, prefix string
	clients, requests                int
	limit                            time.Duration
}

// childResult is what a child prints when it is done.
type childResult struct {
	Requests  int `json:"requests"`
	Failed    int `json:"failed"`
	Fallbacks int `json:"fallbacks"`
}

func main() {
	child := flag.Bool("child", false, "run as one process of the fleet (internal)")
	var c config
	var cc childConfig
	var ks string
	flag.StringVar(&ks, "k", "1,2,5,10", "numbers of processes to run, comma-separated")
	strategies := flag.String("strategies", "local,shared", "strategies to run, comma-separated: local, shared")
	flag.IntVar(&c.clients, "clients", 100, "concurrent clients in all, split evenly among the processes")
	flag.IntVar(&c.requests, "requests", 3, "requests each client makes, one after another")
	flag.Float64Var(&c.rate, "rate", 100, "nginx's limit, requests per second")
	flag.IntVar(&c.rounds, "rounds", 1, "runs of each strategy and K")
	flag.DurationVar(&c.kill, "kill", 0, "kill Redis this long into each shared run (0: never)")
	flag.StringVar(&c.svg, "svg", "", "write a chart of the attempts per 100ms of the largest K's first runs to this SVG file")
	flag.StringVar(&c.series, "series", "", "write the attempts per 100ms of every run to this CSV file")
	flag.BoolVar(&c.install, "install", true, "install nginx-light and redis-server with apt-get when absent")
	flag.DurationVar(&c.limit, "limit", 60*time.Second, "time limit of one run")
	flag.StringVar(&cc.url, "url", "", "(child) the server")
	flag.StringVar(&cc.strategy, "strategy", "", "(child) local or shared")
	flag.StringVar(&cc.redisAddr, "redis", "", "(child) Redis's address")
	flag.StringVar(&cc.prefix, "prefix", "", "(child) the Redis key prefix of the run")
	flag.Parse()
	if *child {
		cc.clients, cc.requests, cc.limit = c.clients, c.requests, c.limit
		if err := runChild(cc, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, "fleet child:", err)
			os.Exit(1)
		}
		return
	}
	for _, f := range strings.Split(ks, ",") {
		k, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || k < 1 || k > 50 {
			fmt.Fprintf(os.Stderr, "fleet: -k %q: want numbers from 1 to 50\n", ks)
			os.Exit(2)
		}
		c.ks = append(c.ks, k)
	}
	for _, f := range strings.Split(*strategies, ",") {
		switch f = strings.TrimSpace(f); f {
		case "local", "shared":
			c.strategies = append(c.strategies, f)
		default:
			fmt.Fprintf(os.Stderr, "fleet: -strategies %q: want local, shared or both\n", *strategies)
			os.Exit(2)
		}
	}
	if c.clients < 1 || c.requests < 1 || !(c.rate >= 1) || c.rounds < 1 {
		fmt.Fprintln(os.Stderr, "fleet: -clients, -requests, -rate and -rounds must be positive")
		os.Exit(2)
	}
	if err := run(c, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "fleet:", err)
		os.Exit(1)
	}
}

// runChild is one process of the fleet: clients goroutines make requests
// requests each through one Transport, paced as strategy says.
func runChild(c childConfig, out io.Writer) error {
	base := cleanhttp.DefaultPooledTransport()
	base.MaxIdleConnsPerHost = c.clients
	defer base.CloseIdleConnections()
	var fallbacks atomic.Int64
	var pacer retry.Pacer
	var rdb *redis.Client
	switch c.strategy {
	case "local":
		pacer = &pace.Pacer{}
	case "shared":
		rdb = redis.NewClient(&redis.Options{Addr: c.redisAddr, MaxRetries: -1})
		defer rdb.Close()
		pacer = &redispace.Pacer{Client: rdb, Prefix: c.prefix, OnFallback: func(error) { fallbacks.Add(1) }}
	default:
		return fmt.Errorf("-strategy %q: want local or shared", c.strategy)
	}
	if rdb != nil {
		if err := redisproc.Warm(rdb, c.clients); err != nil {
			return err
		}
	}
	rt := retry.New(base, retry.WithPacer(pacer), retry.WithMaxAttempts(100), retry.WithBudget(retry.NoBudget),
		retry.WithBackoff(retry.Exponential{Base: 10 * time.Millisecond, Cap: 2 * time.Second, Jitter: retry.FullJitter}))
	// Ready; the run starts when the parent says so, once every process
	// is: process start-up is not the pacing's to pay.
	fmt.Fprintln(os.Stderr, "ready")
	if _, err := bufio.NewReader(os.Stdin).ReadString('\n'); err != nil {
		return fmt.Errorf("waiting for the start: %w", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.limit)
	defer cancel()
	var failed atomic.Int64
	var wg sync.WaitGroup
	for range c.clients {
		wg.Go(func() {
			for range c.requests {
				if !bench.Get(ctx, rt, c.url) {
					failed.Add(1)
				}
			}
		})
	}
	wg.Wait()
	return json.NewEncoder(out).Encode(childResult{Requests: c.clients * c.requests, Failed: int(failed.Load()), Fallbacks: int(fallbacks.Load())})
}

// result is one run: one strategy, one K.
type result struct {
	strategy  string
	k, round  int
	requests  int
	failed    int
	fallbacks int
	events    []nginx.Event
	elapsed   time.Duration
	killed    bool
}

func (r result) attempts() int { return len(r.events) }

func (r result) refused() int {
	n := 0
	for _, e := range r.events {
		if e.Status == http.StatusTooManyRequests {
			n++
		}
	}
	return n
}

func run(c config, out io.Writer) error {
	srv, err := nginx.Start(c.rate, 0, c.install)
	if err != nil {
		return err
	}
	defer srv.Close()
	rs, err := redisproc.Start(c.install)
	if err != nil {
		return err
	}
	defer func() { rs.Stop() }()
	self, err := os.Executable()
	if err != nil {
		return err
	}
	ideal := time.Duration(float64(c.clients*c.requests) / c.rate * float64(time.Second))
	fmt.Fprintf(out, "%d clients × %d requests, split among K processes, against nginx limited to %.0f requests/s (ideal %v)\n\n",
		c.clients, c.requests, c.rate, ideal)
	var results []result
	runID := time.Now().UnixNano()
	for round := 1; round <= c.rounds; round++ {
		for _, k := range c.ks {
			for _, strategy := range c.strategies {
				time.Sleep(time.Second) // let nginx's limit forget the last run
				if strategy == "shared" && !rs.Alive() {
					if rs, err = redisproc.Start(false); err != nil {
						return err
					}
				}
				runID++
				r, err := runOnce(c, srv, rs, self, k, strategy, fmt.Sprintf("fleet:%d:", runID))
				if err != nil {
					return fmt.Errorf("%s with %d processes: %w", strategy, k, err)
				}
				r.round = round
				results = append(results, r)
			}
		}
	}
	report(out, ideal, results)
	return writeFiles(c, results)
}

// runOnce runs k child processes of one strategy and collects their
// results and nginx's record of the run.
func runOnce(c config, srv *nginx.Server, rs *redisproc.Server, self string, k int, strategy, prefix string) (result, error) {
	mark, err := srv.Mark()
	if err != nil {
		return result{}, err
	}
	per := make([]int, k)
	for i := range c.clients {
		per[i%k]++
	}
	var cmds []*exec.Cmd
	var outs []*strings.Builder
	var gos []io.WriteCloser
	var readies []*readyWriter
	for i := 0; i < k; i++ {
		if per[i] == 0 {
			continue
		}
		cmd := exec.Command(self, "-child", "-url", srv.URL(), "-strategy", strategy, "-redis", rs.Addr, "-prefix", prefix,
			"-clients", strconv.Itoa(per[i]), "-requests", strconv.Itoa(c.requests), "-limit", c.limit.String())
		var b strings.Builder
		cmd.Stdout = &b
		ready := newReadyWriter(os.Stderr)
		cmd.Stderr = ready
		stdin, err := cmd.StdinPipe()
		if err == nil {
			err = cmd.Start()
		}
		if err != nil {
			stopAll(cmds, gos)
			return result{}, err
		}
		cmds, outs, gos, readies = append(cmds, cmd), append(outs, &b), append(gos, stdin), append(readies, ready)
	}
	// Every process warms its connections at once; the run starts when
	// the last is ready.
	for i, ready := range readies {
		select {
		case <-ready.ready:
		case <-time.After(30 * time.Second):
			stopAll(cmds, gos)
			return result{}, fmt.Errorf("process %d did not say it was ready within 30s", i+1)
		}
	}
	start := time.Now()
	for _, g := range gos {
		io.WriteString(g, "go\n")
		g.Close()
	}
	killed := false
	if strategy == "shared" && c.kill > 0 {
		timer := time.AfterFunc(c.kill, rs.Stop)
		defer timer.Stop()
		killed = true
	}
	r := result{strategy: strategy, k: k, killed: killed}
	var errs []error
	for i, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			errs = append(errs, fmt.Errorf("process %d: %w", i+1, err))
			continue
		}
		var cr childResult
		if err := json.Unmarshal([]byte(outs[i].String()), &cr); err != nil {
			errs = append(errs, fmt.Errorf("process %d's result %q: %w", i+1, outs[i].String(), err))
			continue
		}
		r.requests += cr.Requests
		r.failed += cr.Failed
		r.fallbacks += cr.Fallbacks
	}
	r.elapsed = time.Since(start)
	if err := errors.Join(errs...); err != nil {
		return r, err
	}
	r.events, err = srv.Since(mark, start)
	return r, err
}

// stopAll ends the processes started: closing its stdin before "go"
// makes a process exit.
func stopAll(cmds []*exec.Cmd, stdins []io.WriteCloser) {
	for i, cmd := range cmds {
		stdins[i].Close()
		cmd.Process.Kill()
		cmd.Wait()
	}
}

// readyWriter is a child's stderr: it holds back the child's first line,
// closes ready when that line is "ready", and passes everything else on
// to w (a child that fails before it is ready has its error shown, and
// ready is never closed).
type readyWriter struct {
	w     io.Writer
	ready chan struct{}
	mu    sync.Mutex
	first []byte // the first line so far
	seen  bool
}

func newReadyWriter(w io.Writer) *readyWriter {
	return &readyWriter{w: w, ready: make(chan struct{})}
}

func (r *readyWriter) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.seen {
		return r.w.Write(p)
	}
	r.first = append(r.first, p...)
	i := bytes.IndexByte(r.first, '\n')
	if i < 0 {
		return len(p), nil
	}
	line, rest := r.first[:i], r.first[i+1:]
	r.seen, r.first = true, nil
	if string(line) == "ready" {
		close(r.ready)
	} else {
		rest = append(append(line, '\n'), rest...)
	}
	if _, err := r.w.Write(rest); err != nil {
		return 0, err
	}
	return len(p), nil
}

// report prints one row per strategy and K.
func report(out io.Writer, ideal time.Duration, results []result) {
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "K\tstrategy\tround\tattempts/request\trefused\tfailed\ttime\ttime/ideal\tRedis\t")
	for _, r := range results {
		redisNote := "-"
		if r.strategy == "shared" {
			redisNote = "up"
			if r.fallbacks > 0 {
				redisNote = fmt.Sprintf("up, %d fallbacks", r.fallbacks)
			}
			if r.killed {
				redisNote = fmt.Sprintf("killed, %d fallbacks", r.fallbacks)
			}
		}
		fmt.Fprintf(tw, "%d\t%s\t%d\t%.2f\t%d\t%d\t%v\t%.2f\t%s\t\n", r.k, r.strategy, r.round,
			float64(r.attempts())/float64(max(r.requests, 1)), r.refused(), r.failed,
			r.elapsed.Round(time.Millisecond), float64(r.elapsed)/float64(ideal), redisNote)
	}
	tw.Flush()
}
