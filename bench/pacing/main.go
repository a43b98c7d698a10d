// Pacing measures what the adaptive Pacer saves against a rate-limited
// server: N clients each make K requests through one shared Transport, and
// the server refuses with 429 (no Retry-After) whatever exceeds its rate.
// It compares full jitter alone with full jitter plus the Pacer (CUBIC and
// AIMD), side by side in one run, and reports attempts per request and
// completion time against the ideal (requests ÷ rate).
//
//	go run ./pacing                 # an in-process token-bucket server
//	go run ./pacing -server nginx   # a real nginx limit_req (installed from Debian if absent)
//
// Every request has a deadline and every run a time limit; traffic goes to
// 127.0.0.1 only.
package main

import (
	"context"
	"encoding/csv"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/backoff-jitter/retry"
	"github.com/hashicorp/go-cleanhttp"
	"golang.org/x/time/rate"
)

type config struct {
	server   string
	clients  int
	requests int
	rate     float64
	rounds   int
	csv      string
	install  bool
	limit    time.Duration
}

func main() {
	var c config
	flag.StringVar(&c.server, "server", "fake", "the rate-limited server: fake (in-process token bucket) or nginx (limit_req)")
	flag.IntVar(&c.clients, "clients", 100, "concurrent clients")
	flag.IntVar(&c.requests, "requests", 3, "requests each client makes, one after another")
	flag.Float64Var(&c.rate, "rate", 100, "the server's limit, requests per second")
	flag.IntVar(&c.rounds, "rounds", 3, "runs of each strategy (the table shows their mean)")
	flag.StringVar(&c.csv, "csv", "", "write one row per run to this CSV file")
	flag.BoolVar(&c.install, "install", true, "with -server nginx, install nginx-light with apt-get when it is absent")
	flag.DurationVar(&c.limit, "limit", 60*time.Second, "time limit of one run")
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

func (c config) validate() error {
	switch {
	case c.server != "fake" && c.server != "nginx":
		return fmt.Errorf("-server %q: want fake or nginx", c.server)
	case c.clients < 1 || c.clients > 2000:
		return fmt.Errorf("-clients %d: want 1 to 2000", c.clients)
	case c.requests < 1 || c.requests > 1000:
		return fmt.Errorf("-requests %d: want 1 to 1000", c.requests)
	case !(c.rate >= 1 && c.rate <= 10000):
		return fmt.Errorf("-rate %v: want 1 to 10000", c.rate)
	case c.rounds < 1 || c.rounds > 20:
		return fmt.Errorf("-rounds %d: want 1 to 20", c.rounds)
	case c.limit <= 0:
		return fmt.Errorf("-limit %v: want a positive duration", c.limit)
	}
	return nil
}

// strategy is one way of configuring the shared Transport.
type strategy struct {
	name  string
	pacer func() *retry.Pacer // nil: none
}

var strategies = []strategy{
	{name: "FullJitter"},
	{name: "FullJitter+Pacer(CUBIC)", pacer: func() *retry.Pacer { return &retry.Pacer{Adapt: retry.AdaptCubic} }},
	{name: "FullJitter+Pacer(AIMD)", pacer: func() *retry.Pacer { return &retry.Pacer{Adapt: retry.AdaptAIMD} }},
}

// result is one run of one strategy.
type result struct {
	strategy string
	round    int
	requests int
	attempts int64 // sent by the clients, as the server saw them
	refused  int64 // answered 429
	failed   int   // requests that did not end in a 200
	elapsed  time.Duration
}

func run(c config, out io.Writer) error {
	srv, err := startServer(c)
	if err != nil {
		return err
	}
	defer srv.close()

	ideal := time.Duration(float64(c.clients*c.requests) / c.rate * float64(time.Second))
	fmt.Fprintf(out, "%d clients × %d requests against %s limited to %.0f requests/s (ideal %v), %d rounds\n\n",
		c.clients, c.requests, srv.name(), c.rate, ideal.Round(time.Millisecond), c.rounds)

	var results []result
	for round := 1; round <= c.rounds; round++ {
		for _, s := range strategies {
			// Let the server's bucket refill between runs.
			time.Sleep(time.Duration(float64(time.Second) * 2 / c.rate * 10))
			r, err := runOnce(c, srv, s)
			if err != nil {
				return fmt.Errorf("%s: %w", s.name, err)
			}
			r.round = round
			results = append(results, r)
		}
	}
	report(out, c, ideal, results)
	if c.csv != "" {
		return writeCSV(c.csv, results)
	}
	return nil
}

func runOnce(c config, srv server, s strategy) (result, error) {
	base := cleanhttp.DefaultPooledTransport()
	base.MaxIdleConnsPerHost = c.clients
	defer base.CloseIdleConnections()
	opts := []retry.Option{
		// Enough attempts for every request to get through even without
		// pacing: the comparison is the work done, not who gives up.
		retry.WithMaxAttempts(100),
		retry.WithBackoff(retry.Exponential{Base: 10 * time.Millisecond, Cap: 2 * time.Second, Jitter: retry.FullJitter}),
		retry.WithBudget(nil),
	}
	if s.pacer != nil {
		opts = append(opts, retry.WithPacer(s.pacer()))
	}
	client := &http.Client{Transport: retry.New(base, opts...)}

	before := srv.counts()
	ctx, cancel := context.WithTimeout(context.Background(), c.limit)
	defer cancel()
	var failed atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for i := 0; i < c.clients; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < c.requests; j++ {
				if !get(ctx, client, srv.url()) {
					failed.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	after := srv.counts()
	return result{
		strategy: s.name,
		requests: c.clients * c.requests,
		attempts: after.attempts - before.attempts,
		refused:  after.refused - before.refused,
		failed:   int(failed.Load()),
		elapsed:  elapsed,
	}, nil
}

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

func report(out io.Writer, c config, ideal time.Duration, results []result) {
	type agg struct {
		attempts, refused float64
		failed            int
		elapsed           []time.Duration
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
	}
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "strategy\tattempts/request\trefused/run\tfailed\tmedian time\ttime/ideal\t")
	for _, s := range strategies {
		a := byName[s.name]
		n := float64(len(a.elapsed))
		sort.Slice(a.elapsed, func(i, j int) bool { return a.elapsed[i] < a.elapsed[j] })
		med := a.elapsed[len(a.elapsed)/2]
		fmt.Fprintf(tw, "%s\t%.2f\t%.0f\t%d\t%v\t%.2f\t\n", s.name, a.attempts/n, a.refused/n, a.failed,
			med.Round(time.Millisecond), float64(med)/float64(ideal))
	}
	tw.Flush()
}

func writeCSV(path string, results []result) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := csv.NewWriter(f)
	w.Write([]string{"strategy", "round", "requests", "attempts", "refused", "failed", "elapsed_ms"})
	for _, r := range results {
		w.Write([]string{r.strategy, strconv.Itoa(r.round), strconv.Itoa(r.requests), strconv.FormatInt(r.attempts, 10),
			strconv.FormatInt(r.refused, 10), strconv.Itoa(r.failed), strconv.FormatInt(r.elapsed.Milliseconds(), 10)})
	}
	w.Flush()
	if err := w.Error(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// server is the rate-limited server under test.
type server interface {
	name() string
	url() string
	counts() counts
	close()
}

type counts struct{ attempts, refused int64 }

// fakeServer refuses with 429 whatever exceeds a token bucket of rate
// requests per second with a burst of one: nginx's limit_req without burst.
type fakeServer struct {
	srv               *http.Server
	ln                net.Listener
	lim               *rate.Limiter
	attempts, refused atomic.Int64
}

func startServer(c config) (server, error) {
	if c.server == "nginx" {
		return startNginx(c)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	f := &fakeServer{ln: ln, lim: rate.NewLimiter(rate.Limit(c.rate), 1)}
	f.srv = &http.Server{Handler: f, ReadHeaderTimeout: 10 * time.Second}
	go f.srv.Serve(ln)
	return f, nil
}

func (f *fakeServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.attempts.Add(1)
	if !f.lim.Allow() {
		f.refused.Add(1)
		w.WriteHeader(http.StatusTooManyRequests)
		return
	}
	io.WriteString(w, "ok\n")
}

func (f *fakeServer) name() string   { return "an in-process token bucket" }
func (f *fakeServer) url() string    { return "http://" + f.ln.Addr().String() + "/" }
func (f *fakeServer) counts() counts { return counts{f.attempts.Load(), f.refused.Load()} }
func (f *fakeServer) close()         { f.srv.Close() }

// nginxServer is a real nginx with limit_req, started on loopback with a
// config written to a temporary directory. It counts attempts from its
// access log.
type nginxServer struct {
	dir  string
	addr string
	cmd  *exec.Cmd
}

const nginxConf = `worker_processes 1;
daemon off;
pid {{dir}}/nginx.pid;
error_log {{dir}}/error.log warn;
events { worker_connections 4096; }
http {
	access_log {{dir}}/access.log combined;
	client_body_temp_path {{dir}}/body;
	proxy_temp_path {{dir}}/proxy;
	fastcgi_temp_path {{dir}}/fastcgi;
	uwsgi_temp_path {{dir}}/uwsgi;
	scgi_temp_path {{dir}}/scgi;
	keepalive_requests 100000;
	limit_req_zone $server_name zone=api:1m rate={{rate}}r/s;
	limit_req_status 429;
	server {
		listen {{addr}};
		server_name api;
		root {{dir}}/www;
		location / {
			# A static file, not "return": return runs in the rewrite
			# phase, before limit_req's preaccess phase could refuse.
			limit_req zone=api;
		}
	}
}
`

func startNginx(c config) (server, error) {
	bin, err := exec.LookPath("nginx")
	if err != nil {
		bin = "/usr/sbin/nginx"
	}
	if _, err := os.Stat(bin); err != nil {
		if !c.install {
			return nil, errors.New("nginx is not installed (run with -install or apt-get install nginx-light)")
		}
		if err := installNginx(); err != nil {
			return nil, err
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	addr := ln.Addr().String()
	ln.Close()
	dir, err := os.MkdirTemp("", "pacing-nginx-")
	if err != nil {
		return nil, err
	}
	// nginx's workers run as an unprivileged user: they must read the page.
	if err := os.Chmod(dir, 0o755); err != nil {
		return nil, err
	}
	conf := strings.NewReplacer("{{dir}}", dir, "{{rate}}", strconv.FormatFloat(c.rate, 'f', -1, 64), "{{addr}}", addr).Replace(nginxConf)
	if err := os.MkdirAll(filepath.Join(dir, "www"), 0o755); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, "www", "index.html"), []byte("ok\n"), 0o644); err != nil {
		return nil, err
	}
	confPath := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(confPath, []byte(conf), 0o644); err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, "-c", confPath, "-p", dir)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	n := &nginxServer{dir: dir, addr: addr, cmd: cmd}
	for deadline := time.Now().Add(10 * time.Second); ; {
		if conn, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			conn.Close()
			return n, nil
		}
		if time.Now().After(deadline) {
			n.close()
			return nil, fmt.Errorf("nginx did not listen on %s within 10s", addr)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func installNginx() error {
	for _, args := range [][]string{{"update"}, {"install", "-y", "--no-install-recommends", "nginx-light"}} {
		cmd := exec.Command("apt-get", args...)
		cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("apt-get %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	return nil
}

func (n *nginxServer) name() string { return "nginx limit_req" }
func (n *nginxServer) url() string  { return "http://" + n.addr + "/" }

// counts reads the access log: one line per request, the status in the
// ninth field of the combined format.
func (n *nginxServer) counts() counts {
	b, err := os.ReadFile(filepath.Join(n.dir, "access.log"))
	if err != nil {
		return counts{}
	}
	var c counts
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 9 {
			continue
		}
		c.attempts++
		if f[8] == "429" {
			c.refused++
		}
	}
	return c
}

func (n *nginxServer) close() {
	n.cmd.Process.Signal(os.Interrupt)
	done := make(chan struct{})
	go func() { n.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		n.cmd.Process.Kill()
		<-done
	}
	os.RemoveAll(n.dir)
}
