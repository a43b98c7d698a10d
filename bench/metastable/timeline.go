package main

import (
	"sync/atomic"
	"time"
)

// timeline counts what happens in each Interval of a run, from its start.
// The last interval takes whatever comes later.
type timeline struct {
	start    time.Time
	interval time.Duration
	// Per interval: calls arriving; attempts the server saw; calls that
	// arrived then and succeeded within their deadline (goodput, by
	// arrival, so that it compares with the arrivals of the same
	// interval); work done for callers gone; the queue's length, sampled.
	arrivals, attempts, goodput, wasted, queue []atomic.Int64
}

func newTimeline(start time.Time, interval, length time.Duration) *timeline {
	n := int(length/interval) + 1
	return &timeline{
		start: start, interval: interval,
		arrivals: make([]atomic.Int64, n), attempts: make([]atomic.Int64, n),
		goodput: make([]atomic.Int64, n), wasted: make([]atomic.Int64, n),
		queue: make([]atomic.Int64, n),
	}
}

// index returns the interval of time t.
func (tl *timeline) index(t time.Time) int {
	i := int(t.Sub(tl.start) / tl.interval)
	return min(max(i, 0), len(tl.arrivals)-1)
}

// add adds n to series at the current interval.
func (tl *timeline) add(series *[]atomic.Int64, n int64) {
	(*series)[tl.index(time.Now())].Add(n)
}

// values returns a series' counts.
func values(series []atomic.Int64) []int64 {
	out := make([]int64, len(series))
	for i := range series {
		out[i] = series[i].Load()
	}
	return out
}
