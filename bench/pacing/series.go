package main

import (
	"net/http"
	"strconv"
	"time"

	"github.com/backoff-jitter/retry/bench/internal/chart"
)

// event is one attempt the server saw: when it arrived, from the start of
// its run, and the status it was answered with.
type event struct {
	at     time.Duration
	status int
}

// counts are the attempts of one run and those refused.
type counts struct{ attempts, refused int64 }

// refusal reports whether status is the server's refusal over its rate:
// 429, or Route 53's 400 with -api route53 (nothing else is answered 400).
func refusal(status int) bool {
	return status == http.StatusTooManyRequests || status == http.StatusBadRequest
}

// countEvents counts the attempts and the refusals among evs.
func countEvents(evs []event) counts {
	c := counts{attempts: int64(len(evs))}
	for _, e := range evs {
		if refusal(e.status) {
			c.refused++
		}
	}
	return c
}

// bin is the attempts of one interval: those answered 200 and those
// refused (see refusal). Any other status (nginx's 499 for a request whose
// client gave up, say) counts in neither.
type bin struct{ accepted, refused int }

// binEvents counts evs per interval of width from the start of the run up
// to the last event: bins[k] covers [k×width, (k+1)×width). An event timed
// before the start (clocks a millisecond apart) counts in the first. No
// events give no bins; width must be positive.
func binEvents(evs []event, width time.Duration) []bin {
	if width <= 0 {
		return nil
	}
	var bins []bin
	for _, e := range evs {
		k := int(max(e.at, 0) / width)
		for len(bins) <= k {
			bins = append(bins, bin{})
		}
		switch {
		case e.status == http.StatusOK:
			bins[k].accepted++
		case refusal(e.status):
			bins[k].refused++
		}
	}
	return bins
}

// seriesRows are the rows of the -series CSV file, header first: one per
// run and interval, every interval from the start of the run to its last
// attempt, empty ones included.
func seriesRows(results []result, width time.Duration) [][]string {
	rows := [][]string{{"strategy", "round", "interval_ms", "accepted", "refused"}}
	for _, r := range results {
		for k, b := range binEvents(r.events, width) {
			rows = append(rows, []string{r.strategy, strconv.Itoa(r.round),
				strconv.FormatInt((time.Duration(k) * width).Milliseconds(), 10),
				strconv.Itoa(b.accepted), strconv.Itoa(b.refused)})
		}
	}
	return rows
}

// writeSeries writes the -series CSV file.
func writeSeries(path string, results []result, width time.Duration) error {
	return chart.WriteCSV(path, seriesRows(results, width))
}
