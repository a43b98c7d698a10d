package main

import (
	"bytes"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/backoff-jitter/retry/bench/internal/chart"
)

// event is one attempt the server saw: when it arrived, from the start of
// its run, and the status it was answered with.
type event struct {
	at     time.Duration
	status int
}

// counts are the attempts of one run and those refused with 429.
type counts struct{ attempts, refused int64 }

// countEvents counts the attempts and the refusals among evs.
func countEvents(evs []event) counts {
	c := counts{attempts: int64(len(evs))}
	for _, e := range evs {
		if e.status == http.StatusTooManyRequests {
			c.refused++
		}
	}
	return c
}

// bin is the attempts of one interval: those answered 200 and those
// refused with 429. Any other status (nginx's 499 for a request whose
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
		switch e.status {
		case http.StatusOK:
			bins[k].accepted++
		case http.StatusTooManyRequests:
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

// parseLog parses the complete lines of an nginx access log in the format
// "$msec $status", timing each from startMs (Unix milliseconds). Lines
// that do not parse are skipped, as is an unfinished last line, and so are
// lines timed more than logSlack outside [startMs, endMs]: not of this run.
func parseLog(b []byte, startMs, endMs int64) []event {
	if i := bytes.LastIndexByte(b, '\n'); i >= 0 {
		b = b[:i]
	} else {
		return nil
	}
	var evs []event
	for _, line := range strings.Split(string(b), "\n") {
		ms, status, ok := parseLogLine(line)
		if !ok || ms < startMs-logSlack.Milliseconds() || ms > endMs+logSlack.Milliseconds() {
			continue
		}
		evs = append(evs, event{at: time.Duration(ms-startMs) * time.Millisecond, status: status})
	}
	return evs
}

// logSlack is how far outside its run a line of the access log may be
// timed: nginx's clock is cached per event loop iteration.
const logSlack = time.Second

// parseLogLine parses one line of the access log, "$msec $status" (as
// "1712345678.123 429"): the time in Unix milliseconds and the status.
// Further fields are ignored; ok is false if the two do not parse.
func parseLogLine(line string) (ms int64, status int, ok bool) {
	f := strings.Fields(line)
	if len(f) < 2 {
		return 0, 0, false
	}
	ms, ok = parseMsec(f[0])
	if !ok {
		return 0, 0, false
	}
	status, err := strconv.Atoi(f[1])
	if err != nil || status < 100 || status > 599 {
		return 0, 0, false
	}
	return ms, status, true
}

// parseMsec parses nginx's $msec, seconds with exactly three decimals, to
// milliseconds, without the rounding of a float.
func parseMsec(s string) (int64, bool) {
	sec, frac, found := strings.Cut(s, ".")
	if !found || sec == "" || len(frac) != 3 {
		return 0, false
	}
	// ParseUint allows no sign; 40 bits of seconds are 34,000 years.
	secs, err := strconv.ParseUint(sec, 10, 40)
	if err != nil {
		return 0, false
	}
	millis, err := strconv.ParseUint(frac, 10, 16)
	if err != nil {
		return 0, false
	}
	return int64(secs)*1000 + int64(millis), true
}
