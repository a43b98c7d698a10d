// Command storm replays a retry storm against a loopback server of fixed
// capacity and compares how retry strategies cope.
//
// The server (127.0.0.1 only) serves Rate requests a second from a token
// bucket, at most Concurrency at once, and answers the rest 429 (or 503, or
// 429 with Retry-After: -reject); for the first -outage it fails everything
// with 503. N clients start at once, each needing one success, all sharing
// one round tripper as the goroutines of one process would, and each with a
// deadline. Per strategy it reports the attempts the server saw, attempts
// per success, completion times (p50, p99, max) over all clients, the peak
// load per interval, and the clients that did not finish.
//
// The default run (N = 100, 500, 1000; every strategy) takes under two
// minutes and writes storm.csv, series.csv, storm.txt and one SVG chart
// per N into -out:
//
//	go run ./storm -out results
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

func main() {
	cfg := DefaultConfig(0)
	clients := flag.String("clients", "100,500,1000", "comma-separated numbers of clients, one storm each")
	strategies := flag.String("strategies", "", "comma-separated strategies (default all: "+strings.Join(names(), ",")+")")
	flag.Float64Var(&cfg.Rate, "rate", cfg.Rate, "server capacity, requests a second")
	flag.IntVar(&cfg.Burst, "burst", cfg.Burst, "depth of the server's token bucket")
	flag.IntVar(&cfg.Concurrency, "concurrency", cfg.Concurrency, "requests the server serves at once")
	flag.DurationVar(&cfg.Service, "service", cfg.Service, "time an accepted request takes")
	flag.DurationVar(&cfg.Outage, "outage", cfg.Outage, "time from the start during which every request fails with 503")
	reject := flag.String("reject", string(cfg.Reject), "answer over capacity: 429, 429-retry-after or 503")
	flag.IntVar(&cfg.RetryAfter, "retry-after", cfg.RetryAfter, "Retry-After seconds, with -reject 429-retry-after")
	flag.DurationVar(&cfg.Deadline, "deadline", cfg.Deadline, "each client's deadline from the start")
	flag.DurationVar(&cfg.Interval, "interval", cfg.Interval, "width of the load time series' intervals")
	flag.DurationVar(&cfg.Base, "base", cfg.Base, "base delay of retry's curves")
	flag.DurationVar(&cfg.Cap, "cap", cfg.Cap, "cap of retry's curves")
	timeout := flag.Duration("timeout", 2*time.Minute, "end the whole run after this long, reporting what finished")
	out := flag.String("out", "", "directory for storm.csv, series.csv, storm.txt and the SVG charts (default: print the table only)")
	flag.Parse()

	cfg.Reject = Reject(*reject)
	switch cfg.Reject {
	case Reject429, Reject429RetryAfter, Reject503:
	default:
		fatal(fmt.Errorf("unknown -reject %q", *reject))
	}
	ns, err := parseInts(*clients)
	if err != nil {
		fatal(err)
	}
	strats, err := pick(*strategies)
	if err != nil {
		fatal(err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	if err := run(ctx, cfg, ns, strats, *out, os.Stdout, os.Stderr); err != nil {
		fatal(err)
	}
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "storm:", err)
	os.Exit(1)
}

func names() []string {
	var s []string
	for _, st := range Strategies {
		s = append(s, st.Name)
	}
	return s
}

func parseInts(s string) ([]int, error) {
	var ns []int
	for f := range strings.SplitSeq(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("bad number of clients %q", f)
		}
		ns = append(ns, n)
	}
	return ns, nil
}

func pick(list string) ([]Strategy, error) {
	if list == "" {
		return Strategies, nil
	}
	var out []Strategy
	for name := range strings.SplitSeq(list, ",") {
		s, ok := StrategyNamed(strings.TrimSpace(name))
		if !ok {
			return nil, fmt.Errorf("unknown strategy %q (have %s)", name, strings.Join(names(), ", "))
		}
		out = append(out, s)
	}
	return out, nil
}

// run runs every strategy for every number of clients, prints the tables
// to w and its progress to progress, and writes the files into dir unless
// it is empty.
func run(ctx context.Context, base Config, ns []int, strats []Strategy, dir string, w, progress io.Writer) error {
	var all [][]Result
	began := time.Now()
	for _, n := range ns {
		cfg := base
		cfg.Clients = n
		var rs []Result
		for _, s := range strats {
			r, err := Run(ctx, cfg, s)
			if err != nil {
				return fmt.Errorf("%s, %d clients: %w", s.Name, n, err)
			}
			fmt.Fprintf(progress, "storm: %d clients, %s: %v\n", n, s.Name, r.Wall.Round(10*time.Millisecond))
			rs = append(rs, r)
		}
		all = append(all, rs)
		printTable(w, cfg, rs)
		if dir != "" {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return err
			}
			if err := writeSVG(filepath.Join(dir, fmt.Sprintf("storm-%d.svg", n)), cfg, rs); err != nil {
				return err
			}
		}
	}
	fmt.Fprintf(w, "total time %v\n", time.Since(began).Round(100*time.Millisecond))
	if dir == "" {
		return nil
	}
	if err := writeCSV(filepath.Join(dir, "storm.csv"), base, ns, all); err != nil {
		return err
	}
	if err := writeSeriesCSV(filepath.Join(dir, "series.csv"), base, ns, all); err != nil {
		return err
	}
	var txt strings.Builder
	for i, n := range ns {
		cfg := base
		cfg.Clients = n
		printTable(&txt, cfg, all[i])
	}
	return os.WriteFile(filepath.Join(dir, "storm.txt"), []byte(txt.String()), 0o644)
}
