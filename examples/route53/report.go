package main

import (
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
)

// summarize prints the totals of a run: the calls, the attempts and why
// they were retried, the waits, and what the server saw.
func summarize(out io.Writer, r *result) {
	var attempts, retried int
	causes := map[string]int{}
	perCall := map[int]int{}           // retries -> calls
	waits := map[int][]time.Duration{} // retry number -> waits before it
	for _, c := range r.calls {
		if errors.Is(c.err, errNotMade) {
			continue
		}
		attempts += c.attempts()
		perCall[len(c.retries)]++
		for _, n := range c.retries {
			retried++
			causes[n.why]++
			waits[n.attempt] = append(waits[n.attempt], n.delay)
		}
	}
	failed, notMade := r.failed(), r.notMade()
	fmt.Fprintf(out, "\nSummary\n")
	fmt.Fprintf(out, "  calls:    %d by %d goroutines in %.1fs: %d succeeded, %d failed",
		len(r.calls), r.workers, r.elapsed.Seconds(), len(r.calls)-failed, failed-notMade)
	if stops := r.stops(); len(stops) > 0 {
		fmt.Fprintf(out, " (%s)", counts(stops))
	}
	if notMade > 0 {
		fmt.Fprintf(out, ", %d not made", notMade)
	}
	fmt.Fprintf(out, "\n  attempts: %d: %d first tries and %d retries (%s)\n",
		attempts, len(r.calls)-notMade, retried, counts(causes))
	var hist []string
	for _, k := range slices.Sorted(maps.Keys(perCall)) {
		hist = append(hist, fmt.Sprintf("%d×%d", perCall[k], k))
	}
	fmt.Fprintf(out, "  retries per call (calls×retries): %s\n", strings.Join(hist, ", "))
	fmt.Fprintf(out, "  waits before retry n, min–max (mean): jittered, doubling to the cap:\n")
	for _, n := range slices.Sorted(maps.Keys(waits)) {
		lo, hi, mean := stats(waits[n])
		fmt.Fprintf(out, "    retry %d: %.2f–%.2fs (%.2fs) over %d call%s\n", n, lo.Seconds(), hi.Seconds(), mean.Seconds(), len(waits[n]), plural(len(waits[n])))
	}

	if r.budget != nil {
		fmt.Fprintf(out, "  budget:   at least %d of its %d tokens left throughout\n", r.lowTokens.Load(), r.budgetFull)
	} else {
		fmt.Fprintf(out, "  budget:   the SDK's retry quota (not observed)\n")
	}
	s := serverStats(r.log)
	fmt.Fprintf(out, "  server:   %d requests: %d admitted, at most %d in any 1s window; %d refused (%s)\n",
		len(r.log), s.admitted, s.maxInWindow, len(r.log)-s.admitted, counts(s.refused))
	fmt.Fprintf(out, "            closest two attempts of one call: %.2fs apart; %d replays, %d of them signed anew,\n",
		s.closestGap.Seconds(), s.replays, s.resigned)
	fmt.Fprintf(out, "            the oldest %.1fs after its X-Amz-Date (a signature lasts %v); %d signatures refused\n",
		s.oldestReplay.Seconds(), signatureLifetime, s.badSignatures)
	fmt.Fprintf(out, "  pacer:    %s\n", pacerSummary(r))
	perSecond(out, r)
}

// pacerSummary says whether the Pacer was on and what rate it learned.
func pacerSummary(r *result) string {
	if r.pacer == nil {
		return "off"
	}
	rate, ok := r.learned, r.engaged
	if !ok {
		return fmt.Sprintf("on, never engaged for %s: nothing throttled", accessKey)
	}
	msg := fmt.Sprintf("on, learned %.2f requests/s for %s", rate, accessKey)
	lowest := math.Inf(1)
	for _, s := range r.rates {
		if s.engaged {
			lowest = min(lowest, s.rate)
		}
	}
	if !math.IsInf(lowest, 1) {
		msg += fmt.Sprintf(" (as low as %.2f during the calls)", lowest)
	}
	return msg
}

// perSecond prints, for each second of the calls, how many requests the
// server admitted, how many of those it answered PriorRequestNotComplete,
// how many it throttled and, with a Pacer, the Pacer's rate at the end of
// the second.
func perSecond(out io.Writer, r *result) {
	n := int(r.elapsed/time.Second) + 1
	admitted, prior, throttled := make([]int, n), make([]int, n), make([]int, n)
	for _, s := range r.log {
		i := int(s.At.Sub(r.start) / time.Second)
		if i < 0 || i >= n {
			continue
		}
		if s.Admitted() {
			admitted[i]++
		}
		switch s.Code {
		case "Throttling":
			throttled[i]++
		case "PriorRequestNotComplete":
			prior[i]++
		}
	}
	rates := make([]string, n)
	for i := range rates {
		rates[i] = "-"
	}
	for _, s := range r.rates {
		if i := int(s.at / time.Second); i < n && s.engaged {
			rates[i] = fmt.Sprintf("%.1f", s.rate) // the last sample of the second wins
		}
	}
	const perRow = 15
	fmt.Fprintf(out, "  each second of the calls (prior: admitted, answered PriorRequestNotComplete):\n")
	for lo := 0; lo < n; lo += perRow {
		hi := min(lo+perRow, n)
		row := func(name string, cell func(i int) string) {
			fmt.Fprintf(out, "    %-10s", name)
			for i := lo; i < hi; i++ {
				fmt.Fprintf(out, "%7s", cell(i))
			}
			fmt.Fprintln(out)
		}
		row("second", func(i int) string { return strconv.Itoa(i) })
		row("admitted", func(i int) string { return strconv.Itoa(admitted[i]) })
		row("prior", func(i int) string { return strconv.Itoa(prior[i]) })
		row("throttled", func(i int) string { return strconv.Itoa(throttled[i]) })
		if r.pacer != nil {
			row("pacer rate", func(i int) string { return rates[i] })
		}
	}
}

// serverView is what the fake saw of a run.
type serverView struct {
	admitted      int
	refused       map[string]int // error code -> requests
	maxInWindow   int            // most admitted requests in any window of 1s
	closestGap    time.Duration  // least time between two attempts of one call
	replays       int
	resigned      int           // replays signed otherwise than their call's first attempt
	oldestReplay  time.Duration // longest time from X-Amz-Date to a replay's arrival
	badSignatures int
}

func serverStats(log []served) serverView {
	v := serverView{refused: map[string]int{}}
	var admitted []time.Time
	byCall := map[string][]time.Time{}
	firstSig := map[string]string{} // invocation -> its first attempt's signature
	for _, s := range log {
		if s.Attempt == 1 {
			firstSig[s.Invocation] = s.Signature
		}
		if s.Admitted() {
			v.admitted++
			admitted = append(admitted, s.At)
		}
		if s.Code != "" && !s.Admitted() {
			v.refused[s.Code]++
		}
		if s.Status == http.StatusForbidden {
			v.badSignatures++
		}
		if s.Attempt > 1 {
			v.replays++
			v.oldestReplay = max(v.oldestReplay, s.At.Sub(s.SignedAt))
			if sig, ok := firstSig[s.Invocation]; ok && sig != s.Signature {
				v.resigned++
			}
		}
		byCall[s.Invocation] = append(byCall[s.Invocation], s.At)
	}
	v.maxInWindow = maxInWindow(admitted, time.Second)
	v.closestGap = -1
	for _, times := range byCall {
		sort.Slice(times, func(i, j int) bool { return times[i].Before(times[j]) })
		for i := 1; i < len(times); i++ {
			if gap := times[i].Sub(times[i-1]); v.closestGap < 0 || gap < v.closestGap {
				v.closestGap = gap
			}
		}
	}
	return v
}

// maxInWindow returns the largest number of times in any half-open window
// [t, t+window).
func maxInWindow(times []time.Time, window time.Duration) int {
	times = slices.Clone(times)
	sort.Slice(times, func(i, j int) bool { return times[i].Before(times[j]) })
	most, lo := 0, 0
	for hi := range times {
		for times[hi].Sub(times[lo]) >= window {
			lo++
		}
		most = max(most, hi-lo+1)
	}
	return most
}

func stats(ds []time.Duration) (lo, hi, mean time.Duration) {
	lo, hi = slices.Min(ds), slices.Max(ds)
	var sum time.Duration
	for _, d := range ds {
		sum += d
	}
	return lo, hi, sum / time.Duration(len(ds))
}

// counts formats a tally as "12 Throttling, 3 PriorRequestNotComplete",
// largest first.
func counts(m map[string]int) string {
	keys := slices.Collect(maps.Keys(m))
	sort.Slice(keys, func(i, j int) bool {
		if m[keys[i]] != m[keys[j]] {
			return m[keys[i]] > m[keys[j]]
		}
		return keys[i] < keys[j]
	})
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%d %s", m[k], k))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}
