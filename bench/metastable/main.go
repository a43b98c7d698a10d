// Command metastable measures how retry strategies behave when a server
// is pushed over its capacity by open-loop load: requests keep arriving
// while it is down, and retries, attempt timeouts and work done for
// callers who have gone can keep it overloaded after the trigger is gone
// (a metastable failure).
//
// The server (127.0.0.1 only): 16 workers of 10 ms (1,600 requests a
// second) behind a FIFO queue of 0.25 s of work (400 requests); a full
// queue answers 503 at once, and queued work whose caller has gone is
// still done, and counted as wasted. The load: Poisson arrivals at 70 % of
// capacity, each call with a 1 s deadline and a goroutine of its own,
// through one client per strategy. Two triggers: capacity down to 30 %
// for 10 s, and a 5 s outage that answers 503 to everything. Each
// strategy runs against a fresh server, one after another.
//
// Per run it reports the calls failed, the share of the trigger's
// arrivals that succeeded, attempts per arrival during the trigger and
// after it, the time from the trigger's end until 95 % of each interval's
// arrivals succeed for 2 s ("never": metastable), the work wasted and the
// longest queue. The last line says whether retry with its defaults met
// the goal. A full run takes about 13 minutes, -quick about 7:
//
//	cd bench && go run ./metastable -quick -out results/metastable
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/backoff-jitter/retry/bench/internal/chart"
)

func main() {
	quick := flag.Bool("quick", false, "a shorter warm up and tail: about 7 minutes in all")
	triggers := flag.String("trigger", "drop,outage", "comma-separated triggers: drop, outage")
	only := flag.String("strategies", "", "comma-separated strategies (default all: "+strings.Join(names(), ",")+")")
	seed := flag.Uint64("seed", 1, "seed of the arrivals' times")
	out := flag.String("out", "", "directory for summary.csv, series.csv, metastable.txt and one SVG per trigger")
	flag.Parse()

	strategies, err := pick(*only)
	if err != nil {
		fatal(err)
	}
	var text strings.Builder
	var summaryRows, seriesRows [][]string
	summaryRows = append(summaryRows, []string{"trigger", "strategy", "calls", "failed", "dropped", "good_during", "amp_during", "amp_after", "recovered", "recovery_s", "wasted", "peak_queue", "warm"})
	seriesRows = append(seriesRows, []string{"trigger", "strategy", "t_s", "arrivals", "attempts", "goodput", "wasted", "queue"})
	var missed []string
	judged := false
	for _, name := range strings.Split(*triggers, ",") {
		t := Trigger(strings.TrimSpace(name))
		if t != TriggerDrop && t != TriggerOutage {
			fatal(fmt.Errorf("unknown trigger %q", name))
		}
		cfg := DefaultConfig(t, *quick)
		cfg.Seed = *seed
		var runs []Run
		var ss []Summary
		for _, s := range strategies {
			fmt.Fprintf(os.Stderr, "%s: %s ...\n", t, s.Name)
			r := run(cfg, s)
			runs = append(runs, r)
			sum := summarize(r)
			ss = append(ss, sum)
			summaryRows = append(summaryRows, summaryRow(sum))
			for k := range r.Arrivals {
				seriesRows = append(seriesRows, []string{string(t), s.Name, strconv.FormatFloat((time.Duration(k) * cfg.Interval).Seconds(), 'f', 1, 64),
					itoa(r.Arrivals[k]), itoa(r.Attempts[k]), itoa(r.Goodput[k]), itoa(r.Wasted[k]), itoa(r.Queue[k])})
			}
			time.Sleep(time.Second) // let the closed connections settle
		}
		writeTable(&text, cfg, ss)
		m, ok := goal(ss)
		missed, judged = append(missed, m...), judged || ok
		if *out != "" {
			if err := writeSVG(filepath.Join(*out, "metastable-"+string(t)+".svg"), cfg, runs); err != nil {
				fatal(err)
			}
		}
	}
	fmt.Fprintln(&text)
	fmt.Fprintln(&text, verdict(missed, judged))
	fmt.Print(text.String())
	if *out != "" {
		for _, err := range []error{
			chart.WriteCSV(filepath.Join(*out, "summary.csv"), summaryRows),
			chart.WriteCSV(filepath.Join(*out, "series.csv"), seriesRows),
			os.WriteFile(filepath.Join(*out, "metastable.txt"), []byte(text.String()), 0o644),
		} {
			if err != nil {
				fatal(err)
			}
		}
	}
}

func summaryRow(s Summary) []string {
	f := func(v float64) string { return strconv.FormatFloat(v, 'f', 3, 64) }
	return []string{string(s.Trigger), s.Strategy, itoa(s.Calls), itoa(s.Failed), itoa(s.Dropped),
		f(s.GoodDuring), f(s.AmpDuring), f(s.AmpAfter), strconv.FormatBool(s.Recovered), f(s.Recovery.Seconds()),
		itoa(s.Wasted), itoa(s.PeakQueue), f(s.Warm)}
}

func itoa(v int64) string { return strconv.FormatInt(v, 10) }

func names() []string {
	var ns []string
	for _, s := range Strategies {
		ns = append(ns, s.Name)
	}
	return ns
}

// pick returns the strategies named in list, all of them for "".
func pick(list string) ([]Strategy, error) {
	if list == "" {
		return Strategies, nil
	}
	var out []Strategy
	for _, name := range strings.Split(list, ",") {
		i := slices.IndexFunc(Strategies, func(s Strategy) bool { return s.Name == strings.TrimSpace(name) })
		if i < 0 {
			return nil, fmt.Errorf("unknown strategy %q (have %s)", name, strings.Join(names(), ", "))
		}
		out = append(out, Strategies[i])
	}
	return out, nil
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "metastable:", err)
	os.Exit(1)
}
