package main

import (
	"fmt"
	"io"
	"strings"
	"time"
)

// recoveredShare is the share of an interval's arrivals that must succeed,
// for holdFor, for goodput to count as recovered.
const (
	recoveredShare = 0.95
	holdFor        = 2 * time.Second
)

// Summary is a run's outcome.
type Summary struct {
	Strategy string
	Trigger  Trigger
	// Calls failed, of all arrivals, and those the in-flight bound
	// dropped (a bug's sign).
	Calls, Failed, Dropped int64
	// Attempts per arrival during the trigger and after it, and the share
	// of the trigger's arrivals that succeeded.
	AmpDuring, AmpAfter, GoodDuring float64
	// Warm is the share of the warm up's arrivals that succeeded: below
	// recoveredShare, the machine did not keep up with the load.
	Warm float64
	// Recovery is the time from the trigger's end until goodput holds at
	// recoveredShare for holdFor; Recovered is false (metastable) if it
	// never does before the arrivals end.
	Recovery  time.Duration
	Recovered bool
	// Wasted is the work done for callers gone; PeakQueue the longest
	// queue sampled.
	Wasted, PeakQueue int64
}

// summarize reduces r to its summary.
func summarize(r Run) Summary {
	c := r.Config
	i0 := int(c.Warmup / c.Interval)
	i1 := int((c.Warmup + c.Length) / c.Interval)
	iEnd := int(c.span() / c.Interval)
	s := Summary{
		Strategy: r.Strategy, Trigger: c.Trigger,
		Calls: r.Calls, Failed: r.Failed, Dropped: r.Dropped,
		AmpDuring:  ratio(sum(r.Attempts[i0:i1]), sum(r.Arrivals[i0:i1])),
		AmpAfter:   ratio(sum(r.Attempts[i1:]), sum(r.Arrivals[i1:])),
		GoodDuring: ratio(sum(r.Goodput[i0:i1]), sum(r.Arrivals[i0:i1])),
		Warm:       ratio(sum(r.Goodput[:i0]), sum(r.Arrivals[:i0])),
		Wasted:     sum(r.Wasted),
	}
	for _, q := range r.Queue {
		s.PeakQueue = max(s.PeakQueue, q)
	}
	hold := int(holdFor / c.Interval)
	for b := i1; b+hold <= iEnd; b++ {
		ok := true
		for k := b; k < b+hold && ok; k++ {
			ok = r.Arrivals[k] == 0 || ratio(r.Goodput[k], r.Arrivals[k]) >= recoveredShare
		}
		if ok {
			s.Recovery, s.Recovered = time.Duration(b-i1)*c.Interval, true
			break
		}
	}
	return s
}

func sum(xs []int64) int64 {
	var t int64
	for _, x := range xs {
		t += x
	}
	return t
}

func ratio(a, b int64) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}

// writeTable prints the summaries of one trigger.
func writeTable(w io.Writer, cfg Config, ss []Summary) {
	fmt.Fprintf(w, "\n%s: %s\n", cfg.Trigger, describe(cfg))
	fmt.Fprintf(w, "%-22s %8s %7s %8s %8s %8s %10s %7s %6s\n",
		"strategy", "failed", "good%", "amp-in", "amp-out", "recover", "wasted", "queue", "warm%")
	for _, s := range ss {
		rec := "never"
		if s.Recovered {
			rec = fmt.Sprintf("%.1fs", s.Recovery.Seconds())
		}
		fmt.Fprintf(w, "%-22s %8d %6.1f%% %8.2f %8.2f %8s %10d %7d %5.1f%%\n",
			s.Strategy, s.Failed, 100*s.GoodDuring, s.AmpDuring, s.AmpAfter, rec, s.Wasted, s.PeakQueue, 100*s.Warm)
	}
}

// describe says what a run was.
func describe(c Config) string {
	what := fmt.Sprintf("a %v outage answering 503", c.Length)
	if c.Trigger == TriggerDrop {
		what = fmt.Sprintf("capacity down to %g%% for %v", 100*c.Share, c.Length)
	}
	return fmt.Sprintf("%s after %v; %d workers × %v (%g req/s), queue %d; Poisson arrivals at %g%% of capacity, %v deadlines; %v after",
		what, c.Warmup, c.Workers, c.Service, c.Capacity(), c.Queue, 100*c.Load, c.Deadline, c.After)
}

// goal checks ours with defaults ("retry") against the goal,
// beside no retries, and returns what it missed; judged is false when
// either was not run.
func goal(ss []Summary) (missed []string, judged bool) {
	var base, ours *Summary
	for i := range ss {
		switch ss[i].Strategy {
		case "no-retries":
			base = &ss[i]
		case "retry":
			ours = &ss[i]
		}
	}
	if base == nil || ours == nil {
		return nil, false
	}
	t := ours.Trigger
	if !ours.Recovered {
		missed = append(missed, fmt.Sprintf("%s: metastable (never recovered)", t))
	} else if base.Recovered && ours.Recovery > base.Recovery+time.Second {
		missed = append(missed, fmt.Sprintf("%s: recovered in %.1fs, no retries in %.1fs", t, ours.Recovery.Seconds(), base.Recovery.Seconds()))
	}
	if ours.AmpDuring > 1.2 {
		missed = append(missed, fmt.Sprintf("%s: amplification %.2f during the trigger (goal ≤ 1.2)", t, ours.AmpDuring))
	}
	if ours.AmpAfter > 1.05 {
		missed = append(missed, fmt.Sprintf("%s: amplification %.2f after it (goal ≤ 1.05)", t, ours.AmpAfter))
	}
	if t == TriggerDrop && ours.GoodDuring < base.GoodDuring {
		missed = append(missed, fmt.Sprintf("%s: goodput %.1f%% during the drop, no retries %.1f%%", t, 100*ours.GoodDuring, 100*base.GoodDuring))
	}
	return missed, true
}

// verdict is the run's last line: judged is false when no trigger ran
// both no retries and ours with defaults.
func verdict(missed []string, judged bool) string {
	switch {
	case !judged:
		return "retry with defaults: not judged (run no-retries and retry)"
	case len(missed) == 0:
		return "retry with defaults: recovered, within the goal"
	}
	return "retry with defaults: goal missed: " + strings.Join(missed, "; ")
}
