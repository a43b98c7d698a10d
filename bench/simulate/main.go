// Command simulate reproduces the experiment of the AWS Architecture Blog's
// "Exponential Backoff And Jitter" with the backoff curves of package retry:
// N clients race to update one row with optimistic concurrency control over
// a network with latency, retrying failed writes after the sleep chosen by
// each strategy (no backoff, exponential, exponential with full or equal
// jitter, decorrelated jitter). It prints, for each number of clients and
// strategy, the mean number of writes the server received (the work) and
// the mean time until every client has written (the completion time):
//
//	cd bench
//	go run ./simulate -runs 100 -clients 10,50,100
//	go run ./simulate -runs 100 -seed 1 -csv ../docs/simulate/results.csv -svg ../docs/simulate
//
// The model is that of the blog's simulator, aws-samples/aws-arch-backoff-simulator;
// docs/simulate/README.md shows and discusses the results. Run it with -h
// for every flag.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/backoff-jitter/retry/bench/internal/chart"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// Limits on the flags. The work of a run grows with the square of the
// number of clients (see maxEvents), so these keep a typo from asking for
// days of computing; the time limit of a run (-max-time) catches settings,
// such as no cap, whose simulated clock would otherwise run off.
const (
	maxRuns     = 10000
	maxClients  = 1000
	maxWorkers  = 1024
	maxDuration = time.Hour // of -base, -cap, -latency and -latency-sd
	maxMaxTime  = 100000 * time.Hour
)

// config is what the flags ask for.
type config struct {
	runs      int
	clients   []int
	seed      uint64
	csvPath   string
	svgDir    string
	base      time.Duration
	cap       time.Duration
	latency   time.Duration
	latencySD time.Duration
	maxTime   time.Duration
	series    int
	workers   int
}

// run is the whole program: it returns the exit status, 2 for bad flags and
// 1 for a failed simulation or an unwritable file.
func run(args []string, stdout, stderr io.Writer) int {
	cfg, err := parseFlags(args, stderr)
	switch {
	case errors.Is(err, flag.ErrHelp):
		return 0
	case err != nil:
		fmt.Fprintf(stderr, "simulate: %v\nRun simulate -h for usage.\n", err)
		return 2
	}
	if err := simulateAndWrite(cfg, stdout); err != nil {
		fmt.Fprintf(stderr, "simulate: %v\n", err)
		if errors.Is(err, errTimeLimit) {
			fmt.Fprintln(stderr, limitHint(cfg))
		}
		return 1
	}
	return 0
}

// limitHint suggests what to change when a run passes -max-time.
func limitHint(cfg config) string {
	if cfg.cap == 0 {
		return "A -cap of 0 means no cap: the sleeps grow without end. Set a -cap, or raise -max-time."
	}
	return "Raise -max-time, or lower -cap or -latency."
}

// simulateAndWrite runs the experiment cfg describes, prints the table and
// writes the files asked for.
func simulateAndWrite(cfg config, stdout io.Writer) error {
	res, err := cfg.experiment().run()
	if err != nil {
		return err
	}
	if err := writeTable(stdout, cfg, res); err != nil {
		return err
	}
	if cfg.csvPath != "" {
		if err := chart.WriteCSV(cfg.csvPath, csvRows(res)); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "Wrote %s\n", cfg.csvPath)
	}
	if cfg.svgDir != "" {
		names, err := writeCharts(cfg.svgDir, cfg, res)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "Wrote %s\n", strings.Join(names, ", "))
	}
	return nil
}

// experiment returns the experiment cfg describes.
func (cfg config) experiment() experiment {
	x := experiment{
		strategies: strategies(cfg.base, cfg.cap),
		clients:    cfg.clients,
		runs:       cfg.runs,
		seed:       cfg.seed,
		latency:    cfg.latency,
		latencySD:  cfg.latencySD,
		limit:      cfg.maxTime,
		workers:    cfg.workers,
	}
	if cfg.svgDir != "" {
		x.seriesClients = cfg.series
	}
	return x
}

const usageText = `Usage: simulate [flags]

Simulate reproduces the experiment of the AWS Architecture Blog's
"Exponential Backoff And Jitter": N clients each update one row once, with
optimistic concurrency control (read the version, then write conditionally
on it), over a network whose one-way latency is |Normal(mean, sd)|. A client
whose write fails sleeps as its strategy says, then reads again. The
strategies are built from package retry's curves:

  None          no sleep                                   retry.Constant{}
  Exponential   min(cap, base*2^attempt)                   retry.Exponential
  FullJitter    uniform(0, that)                           ... Jitter: retry.FullJitter
  EqualJitter   that/2 + uniform(0, that/2)                ... Jitter: retry.EqualJitter
  Decorrelated  min(cap, uniform(base, 3*previous sleep))  retry.Decorrelated

For each number of clients and strategy it prints the mean, over the runs,
of the writes the server received (calls) and of the time until the last
client's write succeeded, and their ratios to FullJitter's. -csv and -svg
also write them as a CSV file and as charts.

Examples:
  simulate -runs 100 -clients 10,50,100
  simulate -runs 100 -seed 1 -csv ../docs/simulate/results.csv -svg ../docs/simulate
  simulate -clients 50 -latency 50ms -base 20ms -cap 10s

Flags:
`

// parseFlags parses and checks args. Flag syntax errors and -h print the
// usage to stderr.
func parseFlags(args []string, stderr io.Writer) (config, error) {
	cfg := config{clients: defaultClients()}
	fs := flag.NewFlagSet("simulate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), usageText)
		fs.PrintDefaults()
	}
	fs.IntVar(&cfg.runs, "runs", 100, fmt.Sprintf("runs per number of clients and strategy, 1 to %d", maxRuns))
	fs.Func("clients", fmt.Sprintf("comma-separated `numbers` of clients, each 1 to %d (default 10,20,...,190)", maxClients), func(s string) error {
		var err error
		cfg.clients, err = parseClients(s)
		return err
	})
	fs.Uint64Var(&cfg.seed, "seed", 1, "seed of the random numbers: the same seed gives the same results")
	fs.StringVar(&cfg.csvPath, "csv", "", "write the means to this CSV `file` (columns clients,time,calls,algorithm; time in ms)")
	fs.StringVar(&cfg.svgDir, "svg", "", "write the charts (SVG) to this `directory`")
	fs.DurationVar(&cfg.base, "base", 5*time.Millisecond, "base of the backoff: the first exponential sleep is twice it")
	fs.DurationVar(&cfg.cap, "cap", 2*time.Second, "longest sleep; 0 means no cap, as in package retry")
	fs.DurationVar(&cfg.latency, "latency", 10*time.Millisecond, "mean one-way network latency")
	fs.DurationVar(&cfg.latencySD, "latency-sd", 0, "standard deviation of the latency (default a fifth of -latency: 2ms at 10ms)")
	fs.DurationVar(&cfg.maxTime, "max-time", 24*time.Hour, "longest simulated time of one run: a run that takes longer fails")
	fs.IntVar(&cfg.series, "series", 100, "number of clients of the time-series charts of -svg")
	fs.IntVar(&cfg.workers, "workers", runtime.GOMAXPROCS(0), "number of simulations run in parallel (the results do not depend on it)")
	if err := fs.Parse(args); err != nil {
		return cfg, err
	}
	if fs.NArg() > 0 {
		return cfg, fmt.Errorf("unexpected argument %q: every setting is a flag", fs.Arg(0))
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if !set["latency-sd"] {
		cfg.latencySD = cfg.latency / 5
	}
	return cfg, cfg.check(set)
}

// check reports the first flag out of its range, or the Validate error of
// a strategy's curve.
func (cfg config) check(set map[string]bool) error {
	switch {
	case cfg.runs < 1 || cfg.runs > maxRuns:
		return fmt.Errorf("-runs %d is not within 1 to %d", cfg.runs, maxRuns)
	case cfg.base < 0 || cfg.base > maxDuration:
		return fmt.Errorf("-base %v is not within 0 to %v", cfg.base, maxDuration)
	case cfg.cap < 0 || cfg.cap > maxDuration:
		return fmt.Errorf("-cap %v is not within 0 to %v", cfg.cap, maxDuration)
	case cfg.latency < 0 || cfg.latency > maxDuration:
		return fmt.Errorf("-latency %v is not within 0 to %v", cfg.latency, maxDuration)
	case cfg.latencySD < 0 || cfg.latencySD > maxDuration:
		return fmt.Errorf("-latency-sd %v is not within 0 to %v", cfg.latencySD, maxDuration)
	case cfg.maxTime <= 0 || cfg.maxTime > maxMaxTime:
		return fmt.Errorf("-max-time %v is not within 1ns to %v", cfg.maxTime, maxMaxTime)
	case cfg.workers < 1 || cfg.workers > maxWorkers:
		return fmt.Errorf("-workers %d is not within 1 to %d", cfg.workers, maxWorkers)
	case set["series"] && cfg.svgDir == "":
		return errors.New("-series needs -svg: it chooses the time-series charts")
	case cfg.series < 1 || cfg.series > maxClients:
		return fmt.Errorf("-series %d is not within 1 to %d", cfg.series, maxClients)
	}
	// A cap below the base, or a base of 0 (for Decorrelated), is the
	// curves' to report.
	return validateStrategies(strategies(cfg.base, cfg.cap))
}

// defaultClients returns 10, 20, ..., 190.
func defaultClients() []int {
	var out []int
	for n := 10; n <= 190; n += 10 {
		out = append(out, n)
	}
	return out
}

// parseClients parses a comma-separated list of numbers of clients and
// returns it in ascending order.
func parseClients(s string) ([]int, error) {
	var out []int
	for f := range strings.SplitSeq(s, ",") {
		f = strings.TrimSpace(f)
		n, err := strconv.Atoi(f)
		switch {
		case err != nil:
			return nil, fmt.Errorf("%q is not a whole number", f)
		case n < 1 || n > maxClients:
			return nil, fmt.Errorf("%d is not within 1 to %d", n, maxClients)
		case slices.Contains(out, n):
			return nil, fmt.Errorf("%d is listed twice", n)
		}
		out = append(out, n)
	}
	slices.Sort(out)
	return out, nil
}
