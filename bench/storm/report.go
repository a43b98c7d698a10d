package main

import (
	"fmt"
	"io"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/backoff-jitter/retry/bench/internal/chart"
)

// best returns the lowest attempts per success and the lowest p99
// completion among the results that finished every client.
func best(rs []Result) (perSuccess float64, p99 time.Duration, ok bool) {
	for _, r := range rs {
		if r.Unfinished() > 0 {
			continue
		}
		d, _ := r.Quantile(0.99)
		if !ok || r.PerSuccess() < perSuccess {
			perSuccess = r.PerSuccess()
		}
		if !ok || d < p99 {
			p99 = d
		}
		ok = true
	}
	return perSuccess, p99, ok
}

func fmtQuantile(r Result, q float64) string {
	d, ok := r.Quantile(q)
	if !ok {
		return "unfinished"
	}
	return fmtDur(d)
}

func fmtDur(d time.Duration) string { return fmt.Sprintf("%.2fs", d.Seconds()) }

// printTable writes one storm's results as a text table, with each
// strategy's attempts per success and p99 completion as ratios to the best
// among the strategies that finished every client.
func printTable(w io.Writer, cfg Config, rs []Result) {
	fmt.Fprintf(w, "\n%s\n\n", cfg)
	bestPS, bestP99, haveBest := best(rs)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "strategy\tattempts\tper success\tvs best\tp50\tp99\tvs best\tmax\tunfinished\t(deadline\tgave up)\tpeak/"+cfg.Interval.String()+"\tconns\trefused\treissued\t")
	for _, r := range rs {
		psRatio, p99Ratio := "-", "-"
		if haveBest && r.Successes > 0 {
			psRatio = fmt.Sprintf("%.2fx", r.PerSuccess()/bestPS)
		}
		if d, ok := r.Quantile(0.99); haveBest && ok {
			p99Ratio = fmt.Sprintf("%.2fx", float64(d)/float64(bestP99))
		}
		fmt.Fprintf(tw, "%s\t%d\t%.2f\t%s\t%s\t%s\t%s\t%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t\n",
			r.Strategy, r.Attempts, r.PerSuccess(), psRatio,
			fmtQuantile(r, 0.5), fmtQuantile(r, 0.99), p99Ratio, fmtQuantile(r, 1),
			r.Unfinished(), r.Deadline, r.GaveUp, r.Peak(), r.NewConns, r.Refused, r.Reissued)
	}
	tw.Flush()
}

// seconds returns d in seconds for the CSV, or "" for an unfinished quantile.
func seconds(d time.Duration, ok bool) string {
	if !ok {
		return ""
	}
	return strconv.FormatFloat(d.Seconds(), 'f', 3, 64)
}

// writeCSV writes one row per storm and strategy.
func writeCSV(path string, cfg Config, ns []int, all [][]Result) error {
	rows := [][]string{{"clients", "strategy", "attempts", "successes", "attempts_per_success",
		"p50_s", "p99_s", "max_s", "unfinished", "unfinished_deadline", "unfinished_gave_up", "peak_per_interval", "interval_s",
		"new_conns", "budget_refusals", "reissues", "rate", "outage_s", "reject", "deadline_s"}}
	for i, n := range ns {
		for _, r := range all[i] {
			p50, ok50 := r.Quantile(0.5)
			p99, ok99 := r.Quantile(0.99)
			pmax, okMax := r.Quantile(1)
			rows = append(rows, []string{
				strconv.Itoa(n), r.Strategy,
				strconv.FormatInt(r.Attempts, 10), strconv.FormatInt(r.Successes, 10),
				strconv.FormatFloat(r.PerSuccess(), 'f', 3, 64),
				seconds(p50, ok50), seconds(p99, ok99), seconds(pmax, okMax),
				strconv.Itoa(r.Unfinished()), strconv.Itoa(r.Deadline), strconv.Itoa(r.GaveUp), strconv.FormatInt(r.Peak(), 10),
				strconv.FormatFloat(cfg.Interval.Seconds(), 'f', 3, 64),
				strconv.FormatInt(r.NewConns, 10), strconv.FormatInt(r.Refused, 10), strconv.FormatInt(r.Reissued, 10),
				strconv.FormatFloat(cfg.Rate, 'f', -1, 64), strconv.FormatFloat(cfg.Outage.Seconds(), 'f', 3, 64),
				string(cfg.Reject), strconv.FormatFloat(cfg.Deadline.Seconds(), 'f', 3, 64),
			})
		}
	}
	return chart.WriteCSV(path, rows)
}

// writeSeriesCSV writes the load time series: one row per storm,
// strategy and interval.
func writeSeriesCSV(path string, cfg Config, ns []int, all [][]Result) error {
	rows := [][]string{{"clients", "strategy", "t_s", "attempts", "successes"}}
	for i, n := range ns {
		for _, r := range all[i] {
			for k := range r.Series {
				t := time.Duration(k) * cfg.Interval
				rows = append(rows, []string{strconv.Itoa(n), r.Strategy, strconv.FormatFloat(t.Seconds(), 'f', 3, 64),
					strconv.FormatInt(r.Series[k], 10), strconv.FormatInt(r.OK[k], 10)})
			}
		}
	}
	return chart.WriteCSV(path, rows)
}
