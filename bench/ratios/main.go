// Command ratios reads the output of the bench module's benchmarks (any
// number of runs of each, as go test -count or repeated runs append them)
// and prints, per base and scenario, each library's median against the
// bare transport's and retry's against each peer's, as ratios; then the
// targets of issue 5, each checked against the same medians. With -peakrss
// it also checks the peak memory target from peakrss's CSV.
//
//	go run ./ratios [-peakrss results/peakrss.csv] results/bench.txt
package main

import (
	"bufio"
	"encoding/csv"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
)

// key identifies one benchmark's results: the base (Loopback or
// InMemory), the scenario, the library and the unit.
type key struct{ base, scenario, lib, unit string }

// samples holds every value read, per key.
type samples map[key][]float64

func main() {
	peakrss := flag.String("peakrss", "", "peakrss CSV to check the peak memory target against")
	flag.Parse()
	s := samples{}
	for _, path := range flag.Args() {
		f, err := os.Open(path)
		if err != nil {
			fatal(err)
		}
		err = s.read(f)
		f.Close()
		if err != nil {
			fatal(err)
		}
	}
	if len(s) == 0 {
		fatal(fmt.Errorf("no benchmark results in %v", flag.Args()))
	}
	s.printRatios(os.Stdout)
	fmt.Println()
	ok := s.printTargets(os.Stdout)
	if *peakrss != "" {
		f, err := os.Open(*peakrss)
		if err != nil {
			fatal(err)
		}
		defer f.Close()
		met, err := peakTarget(os.Stdout, f)
		if err != nil {
			fatal(err)
		}
		ok = ok && met
	}
	if !ok {
		fmt.Println("\nsome targets missed")
	}
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "ratios:", err)
	os.Exit(1)
}

// read adds the benchmark lines of r, such as
//
//	BenchmarkLoopback/scenario=S1-GET-1KiB/lib=bare  11229  20547 ns/op  0 conns/op  6093 B/op  70 allocs/op
func (s samples) read(r io.Reader) error {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 4 || !strings.HasPrefix(f[0], "Benchmark") {
			continue
		}
		base, scenario, lib, ok := parseName(f[0])
		if !ok {
			continue
		}
		for i := 2; i+1 < len(f); i += 2 {
			v, err := strconv.ParseFloat(f[i], 64)
			if err != nil {
				return fmt.Errorf("%q: %w", sc.Text(), err)
			}
			k := key{base, scenario, lib, f[i+1]}
			s[k] = append(s[k], v)
		}
	}
	return sc.Err()
}

// parseName splits "BenchmarkLoopback/scenario=S1/lib=bare-2" into
// "Loopback", "S1" and "bare".
func parseName(name string) (base, scenario, lib string, ok bool) {
	parts := strings.Split(strings.TrimPrefix(name, "Benchmark"), "/")
	if len(parts) != 3 {
		return "", "", "", false
	}
	scenario, ok1 := strings.CutPrefix(parts[1], "scenario=")
	lib, ok2 := strings.CutPrefix(parts[2], "lib=")
	if i := strings.LastIndexByte(lib, '-'); i > 0 { // the GOMAXPROCS suffix
		if _, err := strconv.Atoi(lib[i+1:]); err == nil {
			lib = lib[:i]
		}
	}
	return parts[0], scenario, lib, ok1 && ok2
}

// least returns the smallest of k's samples: on a busy machine, the run
// least disturbed by others.
func (s samples) least(k key) float64 {
	if len(s[k]) == 0 {
		return 0
	}
	return slices.Min(s[k])
}

// median returns the median of k's samples, and false if there are none.
func (s samples) median(k key) (float64, bool) {
	v := slices.Clone(s[k])
	if len(v) == 0 {
		return 0, false
	}
	slices.Sort(v)
	if n := len(v); n%2 == 0 {
		return (v[n/2-1] + v[n/2]) / 2, true
	}
	return v[len(v)/2], true
}

func (s samples) sorted(field func(key) string) []string {
	var out []string
	for k := range s {
		if v := field(k); !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	slices.Sort(out)
	return out
}

var units = []string{"ns/op", "B/op", "allocs/op", "conns/op"}

// comparisons are the ratios printed: numerator and denominator libraries.
var comparisons = [][2]string{
	{"retry", "bare"}, {"retryablehttp", "bare"}, {"failsafe", "bare"},
	{"retry", "retryablehttp"}, {"retry", "failsafe"},
}

func (s samples) printRatios(w io.Writer) {
	for _, base := range s.sorted(func(k key) string { return k.base }) {
		fmt.Fprintf(w, "%s: medians, and ratios of medians\n", base)
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		head := "scenario\tunit\tbare\tretry\tretryablehttp\tfailsafe\t"
		for _, c := range comparisons {
			head += c[0] + "/" + c[1] + "\t"
		}
		fmt.Fprintln(tw, head)
		for _, sc := range s.sorted(func(k key) string { return k.scenario }) {
			for _, unit := range units {
				if _, ok := s.median(key{base, sc, "bare", unit}); !ok {
					continue
				}
				line := sc + "\t" + unit + "\t"
				for _, lib := range []string{"bare", "retry", "retryablehttp", "failsafe"} {
					m, ok := s.median(key{base, sc, lib, unit})
					line += cell(m, ok) + "\t"
				}
				for _, c := range comparisons {
					a, okA := s.median(key{base, sc, c[0], unit})
					b, okB := s.median(key{base, sc, c[1], unit})
					switch {
					case !okA || !okB:
						line += "-\t"
					case b == 0 && a == 0:
						line += "=\t"
					case b == 0:
						line += "inf\t"
					default:
						line += fmt.Sprintf("%.2fx\t", a/b)
					}
				}
				fmt.Fprintln(tw, line)
			}
		}
		tw.Flush()
		fmt.Fprintln(w)
	}
}

func cell(v float64, ok bool) string {
	switch {
	case !ok:
		return "-"
	case v >= 1e6:
		return fmt.Sprintf("%.2fM", v/1e6)
	case v >= 1e4:
		return fmt.Sprintf("%.1fk", v/1e3)
	case v >= 100 || v == float64(int64(v)):
		return strconv.FormatFloat(v, 'f', 0, 64)
	}
	return strconv.FormatFloat(v, 'g', 3, 64)
}

// target is one of issue 5's targets on the loopback benchmarks. m gives
// a median; least, the smallest sample.
type target struct {
	name  string
	check func(m, least func(scenario, lib, unit string) float64) (got string, met bool)
}

// minNote reports the ratio of the smallest samples beside a ratio of
// medians: the time of a run is noisy where the load is.
func minNote(least func(string, string, string) float64, scenario, lib, base string) string {
	return fmt.Sprintf("; of the fastest runs %.3fx", least(scenario, lib, "ns/op")/least(scenario, base, "ns/op"))
}

var targets = []target{
	{"S1: at most +2 allocs/op over bare", func(m, least func(string, string, string) float64) (string, bool) {
		d := m("S1", "retry", "allocs/op") - m("S1", "bare", "allocs/op")
		return fmt.Sprintf("%+.0f", d), d <= 2
	}},
	{"S1: time within 5% of bare", func(m, least func(string, string, string) float64) (string, bool) {
		r := m("S1", "retry", "ns/op") / m("S1", "bare", "ns/op")
		return fmt.Sprintf("%.3fx%s", r, minNote(least, "S1", "retry", "bare")), r <= 1.05
	}},
	{"S2: B/op within 1.05x of bare", func(m, least func(string, string, string) float64) (string, bool) {
		r := m("S2", "retry", "B/op") / m("S2", "bare", "B/op")
		return fmt.Sprintf("%.3fx (retryablehttp %.2fx, failsafe %.2fx)", r,
			m("S2", "retryablehttp", "B/op")/m("S2", "bare", "B/op"), m("S2", "failsafe", "B/op")/m("S2", "bare", "B/op")), r <= 1.05
	}},
	{"S3: at most 1.1 MiB/op more than bare", func(m, least func(string, string, string) float64) (string, bool) {
		d := (m("S3", "retry", "B/op") - m("S3", "bare", "B/op")) / (1 << 20)
		return fmt.Sprintf("%+.3f MiB (retryablehttp %+.2f, failsafe %+.2f)", d,
			(m("S3", "retryablehttp", "B/op")-m("S3", "bare", "B/op"))/(1<<20), (m("S3", "failsafe", "B/op")-m("S3", "bare", "B/op"))/(1<<20)), d <= 1.1
	}},
	{"S3: time within 1.3x of bare", func(m, least func(string, string, string) float64) (string, bool) {
		r := m("S3", "retry", "ns/op") / m("S3", "bare", "ns/op")
		return fmt.Sprintf("%.3fx (retryablehttp %.2fx, failsafe %.2fx)%s", r,
			m("S3", "retryablehttp", "ns/op")/m("S3", "bare", "ns/op"), m("S3", "failsafe", "ns/op")/m("S3", "bare", "ns/op"),
			minNote(least, "S3", "retry", "bare")), r <= 1.3
	}},
	{"S4: faster than retryablehttp", func(m, least func(string, string, string) float64) (string, bool) {
		r := m("S4", "retry", "ns/op") / m("S4", "retryablehttp", "ns/op")
		return fmt.Sprintf("%.3fx of retryablehttp's time%s", r, minNote(least, "S4", "retry", "retryablehttp")), r < 1
	}},
	{"S4: 0 new connections per op", func(m, least func(string, string, string) float64) (string, bool) {
		c := m("S4", "retry", "conns/op")
		return fmt.Sprintf("%g (failsafe %g)", c, m("S4", "failsafe", "conns/op")), c == 0
	}},
}

// printTargets checks the targets against the loopback medians and
// reports whether all were met.
func (s samples) printTargets(w io.Writer) bool {
	scenarios := s.sorted(func(k key) string { return k.scenario })
	find := func(prefix string) string {
		for _, sc := range scenarios {
			if strings.HasPrefix(sc, prefix+"-") {
				return sc
			}
		}
		return ""
	}
	m := func(prefix, lib, unit string) float64 {
		v, _ := s.median(key{"Loopback", find(prefix), lib, unit})
		return v
	}
	least := func(prefix, lib, unit string) float64 {
		return s.least(key{"Loopback", find(prefix), lib, unit})
	}
	all := true
	fmt.Fprintln(w, "targets (loopback, medians of the same run; times also as the ratio of the fastest runs)")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, t := range targets {
		got, met := t.check(m, least)
		fmt.Fprintf(tw, "  %s\t%s\t%s\n", t.name, got, verdict(met))
		all = all && met
	}
	tw.Flush()
	return all
}

func verdict(met bool) string {
	if met {
		return "met"
	}
	return "MISSED"
}

// peakTarget checks, from peakrss's CSV, that retry's median peak RSS is
// at most a quarter of each peer's.
func peakTarget(w io.Writer, r io.Reader) (bool, error) {
	rows, err := csv.NewReader(r).ReadAll()
	if err != nil {
		return false, err
	}
	byLib := map[string][]float64{}
	for _, row := range rows[1:] {
		if len(row) < 3 {
			continue
		}
		v, err := strconv.ParseFloat(row[2], 64)
		if err != nil {
			return false, err
		}
		byLib[row[0]] = append(byLib[row[0]], v)
	}
	med := func(lib string) float64 {
		v := slices.Clone(byLib[lib])
		if len(v) == 0 {
			return 0
		}
		slices.Sort(v)
		return v[len(v)/2]
	}
	ours := med("retry")
	worst := 0.0
	for _, peer := range []string{"retryablehttp", "failsafe"} {
		if p := med(peer); p > 0 {
			worst = max(worst, ours/p)
		}
	}
	met := ours > 0 && worst <= 0.25
	fmt.Fprintf(w, "  peak RSS, 64 MiB opaque body: at most 1/4 of the peers'  %.1f MiB, %.2fx the peers' (retryablehttp %.1f MiB, failsafe %.1f MiB)  %s\n",
		ours/1024, worst, med("retryablehttp")/1024, med("failsafe")/1024, verdict(met))
	return met, nil
}
