package main

import (
	"context"
	"math/rand/v2"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/backoff-jitter/retry/bench"
)

// Trigger is what pushes the server over: a drop of its capacity, or an
// outage that answers 503 to everything.
type Trigger string

const (
	TriggerDrop   Trigger = "drop"
	TriggerOutage Trigger = "outage"
)

// Config is one run: the server, the load, the trigger and the timeline.
type Config struct {
	Workers  int           // the server's workers
	Service  time.Duration // the time a worker takes per request
	Queue    int           // the most requests queued
	Load     float64       // arrivals as a share of the capacity
	Deadline time.Duration // each call's deadline
	Trigger  Trigger
	Share    float64       // the capacity share left during a drop
	Warmup   time.Duration // from the start to the trigger
	Length   time.Duration // the trigger's
	After    time.Duration // from the trigger's end to the end of arrivals
	Interval time.Duration // the width of the series' intervals
	Seed     uint64        // of the arrivals' times
}

// DefaultConfig is the benchmark's: 16 workers of 10 ms (1,600 requests a
// second), a queue of 0.25 s of work, arrivals at 70 % of capacity with
// 1 s deadlines, a 10 s drop to 30 % or a 5 s outage after 5 s of warm
// up, and 30 s after it. quick shortens the warm up and the time after.
func DefaultConfig(t Trigger, quick bool) Config {
	c := Config{
		Workers: 16, Service: 10 * time.Millisecond, Queue: 400,
		Load: 0.7, Deadline: time.Second,
		Trigger: t, Share: 0.3,
		Warmup: 5 * time.Second, After: 30 * time.Second,
		Interval: 100 * time.Millisecond, Seed: 1,
	}
	c.Length = 10 * time.Second
	if t == TriggerOutage {
		c.Length = 5 * time.Second
	}
	if quick {
		c.Warmup, c.After = 3*time.Second, 12*time.Second
	}
	return c
}

// Capacity returns the server's capacity, requests a second.
func (c Config) Capacity() float64 { return float64(c.Workers) / c.Service.Seconds() }

// span returns the run's arrivals' span: warm up, trigger, after.
func (c Config) span() time.Duration { return c.Warmup + c.Length + c.After }

// maxInFlight bounds the calls in flight: far above what the deadline
// allows at this load (about 1,100), so that it never binds but a broken
// strategy cannot grow without bound.
const maxInFlight = 20_000

// Run is what one strategy's run recorded.
type Run struct {
	Strategy string
	Config   Config
	// The series, per Interval.
	Arrivals, Attempts, Goodput, Wasted, Queue []int64
	Calls, Failed, Dropped                     int64
}

// run sends open-loop Poisson arrivals through the strategy's client to a
// fresh server, with the trigger, and returns what it recorded. Every
// arrival is a call of its own goroutine: a fixed pool of goroutines
// would make the load closed-loop once calls slow down.
func run(cfg Config, s Strategy) Run {
	start := time.Now().Add(50 * time.Millisecond)
	tl := newTimeline(start, cfg.Interval, cfg.span()+cfg.Deadline+time.Second)
	srv := newServer(cfg, tl)
	defer srv.Close()
	base := newBase()
	defer base.CloseIdleConnections()
	rt := s.New(base) // one round tripper for every call, as one process would have

	stopSampling := make(chan struct{})
	var sampling sync.WaitGroup
	sampling.Go(func() { sampleQueue(srv, tl, stopSampling) })

	triggerAt, endAt := start.Add(cfg.Warmup), start.Add(cfg.Warmup+cfg.Length)
	rng := rand.New(rand.NewPCG(cfg.Seed, 0))
	rate := cfg.Load * cfg.Capacity()
	var calls, failed, dropped, inFlight atomic.Int64
	var wg sync.WaitGroup
	next, triggered, ended := start, false, false
	for next.Before(start.Add(cfg.span())) {
		time.Sleep(time.Until(next))
		now := time.Now()
		if !triggered && !now.Before(triggerAt) {
			triggered = true
			srv.trigger(cfg, true)
		}
		if !ended && !now.Before(endAt) {
			ended = true
			srv.trigger(cfg, false)
		}
		// Every arrival due by now goes now: a late wake-up does not thin
		// the load.
		for ; !next.After(now); next = next.Add(time.Duration(rng.ExpFloat64() / rate * float64(time.Second))) {
			calls.Add(1)
			tl.arrivals[tl.index(next)].Add(1)
			if inFlight.Add(1) > maxInFlight {
				inFlight.Add(-1)
				dropped.Add(1)
				failed.Add(1)
				continue
			}
			arrived := next
			wg.Go(func() {
				defer inFlight.Add(-1)
				if call(rt, srv.URL(), cfg.Deadline) {
					tl.goodput[tl.index(arrived)].Add(1)
				} else {
					failed.Add(1)
				}
			})
		}
	}
	if !ended {
		srv.trigger(cfg, false)
	}
	wg.Wait()
	close(stopSampling)
	sampling.Wait()
	return Run{
		Strategy: s.Name, Config: cfg,
		Arrivals: values(tl.arrivals), Attempts: values(tl.attempts), Goodput: values(tl.goodput),
		Wasted: values(tl.wasted), Queue: values(tl.queue),
		Calls: calls.Load(), Failed: failed.Load(), Dropped: dropped.Load(),
	}
}

// trigger begins (on) or ends the trigger.
func (s *server) trigger(cfg Config, on bool) {
	switch cfg.Trigger {
	case TriggerDrop:
		if on {
			s.setShare(cfg.Share)
		} else {
			s.setShare(1)
		}
	case TriggerOutage:
		s.outage.Store(on)
	}
}

// call makes one call with its deadline, and reports whether it
// succeeded: a 200, its body read, within the deadline.
func call(rt http.RoundTripper, url string, deadline time.Duration) bool {
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	return bench.Get(ctx, rt, url) && ctx.Err() == nil
}

// sampleQueue records the queue's length once per interval.
func sampleQueue(s *server, tl *timeline, stop <-chan struct{}) {
	t := time.NewTicker(tl.interval)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case now := <-t.C:
			tl.queue[tl.index(now)].Store(int64(len(s.queue)))
		}
	}
}
