// Command schedule prints the delays a retry.Backoff chooses, to help pick a
// curve, a cap and a jitter before using them.
//
// With no flags it prints how long each curve waits in total for a number of
// retries, beside the figures of the "Retry Strategies for Transient
// Failures" table (seed 002). With flags it prints one curve's schedule:
//
//	go run ./examples/schedule -curve exponential -base 100ms -cap 20s -jitter full
//	go run ./examples/schedule -curve decorrelated -base 1s -cap 10s -samples 5 -seed 7
//
// Run it with -h for every flag.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/backoff-jitter/retry"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// Limits on the flags, so that a typo cannot print a million lines.
const (
	maxRetries = 10000
	maxSamples = 1000
)

// config is what the flags ask for.
type config struct {
	compare    bool
	curve      string
	jitter     string
	ratio      float64
	base       time.Duration
	cap        time.Duration
	multiplier float64
	degree     float64
	retries    int
	samples    int
	seed       uint64
}

// run is the whole program: it returns the exit status, 2 for bad flags.
func run(args []string, stdout, stderr io.Writer) int {
	cfg, err := parseFlags(args, stderr)
	switch {
	case errors.Is(err, flag.ErrHelp):
		return 0
	case err != nil:
		fmt.Fprintf(stderr, "schedule: %v\nRun schedule -h for usage.\n", err)
		return 2
	}
	if cfg.compare {
		err = writeComparison(stdout)
	} else {
		err = writeSchedule(stdout, cfg)
	}
	if err != nil {
		fmt.Fprintf(stderr, "schedule: %v\n", err)
		return 1
	}
	return 0
}

const usageText = `Usage: schedule [flags]

Schedule prints the delays a retry backoff curve chooses before each retry,
and the running total, so that you can see how long a request may take
before it gives up.

With no flags it compares the total delays of every curve (base 1s, no cap)
for 1, 3, 5, 10 and 20 retries with the figures of seed 002's table.

With flags it prints the schedule of one curve. Without -samples each row
shows the shortest and the longest delay the jitter allows; with -samples N
it draws N random schedules (the same ones for the same -seed).

Examples:
  schedule -curve exponential -base 100ms -cap 20s -jitter full
  schedule -curve fibonacci -base 1s -cap 1m -retries 12
  schedule -curve polynomial -degree 2 -base 500ms -jitter spread -ratio 0.2
  schedule -curve decorrelated -base 1s -cap 10s -samples 5 -seed 7

Flags:
`

// parseFlags parses and checks args. Flag syntax errors and -h print the
// usage to stderr.
func parseFlags(args []string, stderr io.Writer) (config, error) {
	var cfg config
	fs := flag.NewFlagSet("schedule", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), usageText)
		fs.PrintDefaults()
	}
	fs.BoolVar(&cfg.compare, "compare", false, "print the comparison of all curves (the default with no flags)")
	fs.StringVar(&cfg.curve, "curve", "exponential", "`curve`: exponential, constant, linear, fibonacci, polynomial or decorrelated")
	fs.StringVar(&cfg.jitter, "jitter", "none", "`jitter`: none, full (uniform in [0, d)), equal (in [d/2, d)) or spread (in [d, d+ratio*d)); not for decorrelated")
	fs.Float64Var(&cfg.ratio, "ratio", 0.2, "largest extra fraction of the delay added by -jitter spread")
	fs.DurationVar(&cfg.base, "base", 100*time.Millisecond, "first delay (decorrelated: shortest delay)")
	fs.DurationVar(&cfg.cap, "cap", 20*time.Second, "longest delay, 0 for no cap; not for constant")
	fs.Float64Var(&cfg.multiplier, "multiplier", 2, "growth factor of exponential, at least 1")
	fs.Float64Var(&cfg.degree, "degree", 2, "power of n of polynomial (2 is quadratic, 3 cubic)")
	fs.IntVar(&cfg.retries, "retries", 10, fmt.Sprintf("number of retries, 1 to %d", maxRetries))
	fs.IntVar(&cfg.samples, "samples", 0, fmt.Sprintf("number of random schedules to draw, 0 to %d", maxSamples))
	fs.Uint64Var(&cfg.seed, "seed", 1, "seed of the random numbers of -samples")
	if err := fs.Parse(args); err != nil {
		return cfg, err
	}
	if fs.NArg() > 0 {
		return cfg, fmt.Errorf("unexpected argument %q: every setting is a flag", fs.Arg(0))
	}
	if len(args) == 0 {
		cfg.compare = true
	}
	if cfg.compare {
		if fs.NFlag() > 1 {
			return cfg, errors.New("-compare takes no other flag")
		}
		return cfg, nil
	}

	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if cfg.curve == "" {
		return cfg, errors.New("-curve is empty")
	}
	if !strings.Contains(" exponential constant linear fibonacci polynomial decorrelated ", " "+cfg.curve+" ") {
		return cfg, fmt.Errorf("-curve %q is not one of exponential, constant, linear, fibonacci, polynomial, decorrelated", cfg.curve)
	}
	if cfg.jitter == "" || !strings.Contains(" none full equal spread ", " "+cfg.jitter+" ") {
		return cfg, fmt.Errorf("-jitter %q is not one of none, full, equal, spread", cfg.jitter)
	}
	// A flag the chosen curve ignores is a mistake worth reporting.
	switch {
	case set["ratio"] && cfg.jitter != "spread":
		return cfg, errors.New("-ratio needs -jitter spread")
	case set["multiplier"] && cfg.curve != "exponential":
		return cfg, errors.New("-multiplier needs -curve exponential")
	case set["degree"] && cfg.curve != "polynomial":
		return cfg, errors.New("-degree needs -curve polynomial")
	case set["cap"] && cfg.curve == "constant":
		return cfg, errors.New("-cap does not apply to -curve constant, which has no cap")
	case cfg.jitter != "none" && cfg.curve == "decorrelated":
		return cfg, errors.New("-jitter does not apply to -curve decorrelated, which is its own jitter")
	case set["seed"] && cfg.samples == 0:
		return cfg, errors.New("-seed needs -samples")
	case cfg.retries < 1 || cfg.retries > maxRetries:
		return cfg, fmt.Errorf("-retries %d is not within 1 to %d", cfg.retries, maxRetries)
	case cfg.samples < 0 || cfg.samples > maxSamples:
		return cfg, fmt.Errorf("-samples %d is not within 0 to %d", cfg.samples, maxSamples)
	}
	if _, err := cfg.backoff(); err != nil {
		return cfg, err
	}
	return cfg, nil
}

// validator is implemented by every curve of package retry.
type validator interface {
	retry.Backoff
	Validate() error
}

// backoff returns the curve cfg describes, or its Validate error.
func (cfg config) backoff() (retry.Backoff, error) {
	var j retry.Jitter
	switch cfg.jitter {
	case "full":
		j = retry.FullJitter
	case "equal":
		j = retry.EqualJitter
	case "spread":
		j = retry.Spread(cfg.ratio)
	}
	var b validator
	switch cfg.curve {
	case "constant":
		b = retry.Constant{Base: cfg.base, Jitter: j}
	case "linear":
		b = retry.Linear{Base: cfg.base, Cap: cfg.cap, Jitter: j}
	case "fibonacci":
		b = retry.Fibonacci{Base: cfg.base, Cap: cfg.cap, Jitter: j}
	case "polynomial":
		b = retry.Polynomial{Base: cfg.base, Cap: cfg.cap, Degree: cfg.degree, Jitter: j}
	case "exponential":
		b = retry.Exponential{Base: cfg.base, Cap: cfg.cap, Multiplier: cfg.multiplier, Jitter: j}
	case "decorrelated":
		b = retry.Decorrelated{Base: cfg.base, Cap: cfg.cap}
	default:
		return nil, fmt.Errorf("-curve %q is unknown", cfg.curve)
	}
	if cfg.jitter == "spread" && (math.IsNaN(cfg.ratio) || cfg.ratio < 0 || math.IsInf(cfg.ratio, 0)) {
		// Validate reports this too, but not in the flag's terms.
		return nil, fmt.Errorf("-ratio %v is not a finite number of at least 0", cfg.ratio)
	}
	if err := b.Validate(); err != nil {
		return nil, err
	}
	return b, nil
}

// describe returns the formula of the curve cfg describes.
func (cfg config) describe() string {
	var f string
	switch cfg.curve {
	case "constant":
		f = fmt.Sprintf("delay(n) = %v", cfg.base)
	case "linear":
		f = fmt.Sprintf("delay(n) = n × %v", cfg.base)
	case "fibonacci":
		f = fmt.Sprintf("delay(n) = fib(n) × %v", cfg.base)
	case "polynomial":
		f = fmt.Sprintf("delay(n) = n^%v × %v", cfg.degree, cfg.base)
	case "exponential":
		m := cfg.multiplier
		if m == 0 {
			m = 2
		}
		f = fmt.Sprintf("delay(n) = %v × %v^(n-1)", cfg.base, m)
	case "decorrelated":
		f = fmt.Sprintf("delay(n) = random between %v and 3 × delay(n-1)", cfg.base)
	}
	if cfg.curve != "constant" {
		if cfg.cap > 0 {
			f += fmt.Sprintf(", capped at %v", cfg.cap)
		} else {
			f += ", no cap"
		}
	}
	switch cfg.jitter {
	case "full":
		f += ", full jitter: uniform in [0, delay)"
	case "equal":
		f += ", equal jitter: uniform in [delay/2, delay)"
	case "spread":
		f += fmt.Sprintf(", spread jitter: uniform in [delay, delay + %v × delay)", cfg.ratio)
	}
	return cfg.curve + ": " + f
}

// belowOne is the largest float64 less than 1: the largest u a Transport
// passes to Delay.
const belowOne = 1 - 0x1p-53

// writeSchedule prints the schedule cfg describes.
func writeSchedule(w io.Writer, cfg config) error {
	b, err := cfg.backoff()
	if err != nil {
		return err
	}
	fmt.Fprintln(w, cfg.describe())
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	if cfg.samples > 0 {
		writeSamples(tw, b, cfg.retries, cfg.samples, rand.New(rand.NewPCG(cfg.seed, 0)).Float64)
	} else {
		writeRange(tw, b, cfg.retries, cfg.jitter == "none" && cfg.curve != "decorrelated")
	}
	return tw.Flush()
}

// writeRange prints, for each retry, the shortest and the longest delay (u = 0
// and u just below 1 at every retry) and their running totals, or just the
// delay and the total when there is no randomness.
func writeRange(w io.Writer, b retry.Backoff, retries int, exact bool) {
	if exact {
		fmt.Fprint(w, "retry\tdelay\ttotal\t\n")
	} else {
		fmt.Fprint(w, "retry\tshortest\tlongest\ttotal shortest\ttotal longest\t\n")
		// The longest delays are reached only as u approaches 1; they are
		// printed rounded to the millisecond, like every random delay.
	}
	lo, hi := path(b, retries, 0), path(b, retries, belowOne)
	var totalLo, totalHi time.Duration
	for i := range retries {
		totalLo, totalHi = addSaturating(totalLo, lo[i]), addSaturating(totalHi, hi[i])
		if exact {
			fmt.Fprintf(w, "%d\t%s\t%s\t\n", i+1, show(lo[i], false), show(totalLo, false))
		} else {
			fmt.Fprintf(w, "%d\t%s\t%s\t%s\t%s\t\n", i+1, show(lo[i], true), show(hi[i], true), show(totalLo, true), show(totalHi, true))
		}
	}
}

// writeSamples prints samples random schedules, one a row, with their totals.
func writeSamples(w io.Writer, b retry.Backoff, retries, samples int, rnd func() float64) {
	fmt.Fprint(w, "sample\t")
	for n := 1; n <= retries; n++ {
		fmt.Fprintf(w, "%d\t", n)
	}
	fmt.Fprint(w, "total\t\n")
	for i := 1; i <= samples; i++ {
		fmt.Fprintf(w, "%d\t", i)
		var prev, total time.Duration
		for n := 1; n <= retries; n++ {
			prev = b.Delay(n, prev, rnd())
			total = addSaturating(total, prev)
			fmt.Fprintf(w, "%s\t", show(prev, true))
		}
		fmt.Fprintf(w, "%s\t\n", show(total, true))
	}
}

// path returns the delays of retries 1 to retries with the same u every time,
// each delay passed as prev to the next, as a Transport does.
func path(b retry.Backoff, retries int, u float64) []time.Duration {
	delays := make([]time.Duration, retries)
	var prev time.Duration
	for i := range delays {
		prev = b.Delay(i+1, prev, u)
		delays[i] = prev
	}
	return delays
}

// show formats a delay for reading: rounded to the millisecond when round is
// set (random delays have nanoseconds nobody reads), and the largest
// time.Duration, where delays with no cap saturate, by name.
func show(d time.Duration, round bool) string {
	if round && d >= time.Millisecond {
		d = d.Round(time.Millisecond) // saturates at the largest Duration
	}
	if d == math.MaxInt64 {
		return "max (292 years)"
	}
	return d.String()
}

// addSaturating returns a+b for a, b >= 0, or the largest time.Duration when
// the sum does not fit: with no cap, delays themselves saturate there.
func addSaturating(a, b time.Duration) time.Duration {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

// comparisonRetries are the numbers of retries of seed 002's table.
var comparisonRetries = []int{1, 3, 5, 10, 20}

// comparisonCurve is one row of the comparison: a curve of this package and
// seed 002's delay for its retry counter (0 for the first retry).
type comparisonCurve struct {
	name    string
	formula string
	b       retry.Backoff
	seed    func(counter int) int
}

func comparisonCurves() []comparisonCurve {
	const s = time.Second
	return []comparisonCurve{
		{"constant", "1 s", retry.Constant{Base: s}, func(int) int { return 1 }},
		{"linear", "n s", retry.Linear{Base: s}, func(c int) int { return c }},
		{"fibonacci", "fib(n) s", retry.Fibonacci{Base: s}, seedFib},
		{"quadratic", "n² s", retry.Polynomial{Base: s, Degree: 2}, func(c int) int { return c * c }},
		{"exponential", "2^(n-1) s", retry.Exponential{Base: s}, func(c int) int { return 1 << c }},
		{"polynomial", "n³ s", retry.Polynomial{Base: s, Degree: 3}, func(c int) int { return c * c * c }},
	}
}

// seedFib is seed 002's get_fib: fib(0) = 0, fib(1) = 1.
func seedFib(c int) int {
	a, b := 0, 1
	for range c {
		a, b = b, a+b
	}
	return a
}

// total returns the sum of b's delays for retries 1 to retries, with no jitter
// (u = 0).
func total(b retry.Backoff, retries int) time.Duration {
	var sum time.Duration
	for _, d := range path(b, retries, 0) {
		sum = addSaturating(sum, d)
	}
	return sum
}

// seedTotal returns seed 002's total delay in seconds: the sum of its delays
// for counter = 0 to retries-1.
func seedTotal(delay func(int) int, retries int) int {
	sum := 0
	for c := range retries {
		sum += delay(c)
	}
	return sum
}

// writeComparison prints the total delay of each curve for each number of
// retries in comparisonRetries, beside seed 002's figures.
func writeComparison(w io.Writer) error {
	fmt.Fprint(w, `Total delay in seconds for a maximum of 1, 3, 5, 10 and 20 retries
(base 1s, no cap, no jitter). Each cell reads "this package / seed 002".

`)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	// The Writer aligns every cell right; padding the text columns to the
	// same width aligns them left.
	fmt.Fprintf(tw, "%-12s\t%-20s\t", "curve", "delay before retry n")
	for _, r := range comparisonRetries {
		if r == 1 {
			fmt.Fprint(tw, "1 retry\t")
		} else {
			fmt.Fprintf(tw, "%d retries\t", r)
		}
	}
	fmt.Fprint(tw, "\n")
	for _, c := range comparisonCurves() {
		fmt.Fprintf(tw, "%-12s\t%-20s\t", c.name, c.formula)
		for _, r := range comparisonRetries {
			fmt.Fprintf(tw, "%d / %d\t", total(c.b, r)/time.Second, seedTotal(c.seed, r))
		}
		fmt.Fprint(tw, "\n")
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprint(w, `
Retry n = 1 is the first retry. Exponential agrees with seed 002: its delay
2^counter for counter = 0, 1, 2, ... is 2^(n-1) s for retry n = counter + 1.
Seed 002 counts its first retry as retry 0 for the other curves too, so it
waits counter, counter², counter³ and fib(counter) seconds: its first retry
is immediate (0 s; constant waits 1 s), and every later one is one step
behind this package's. For 3 retries its linear total is 0+1+2 = 3 s where
this package's is 1+2+3 = 6 s. Run schedule -h to print one curve's schedule.
`)
	return err
}
