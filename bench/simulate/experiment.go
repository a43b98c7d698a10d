package main

import (
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"
)

// experiment is a set of runs: every strategy at every client level, runs
// times each.
type experiment struct {
	strategies []strategy
	clients    []int // the client levels, ascending
	runs       int
	seed       uint64
	latency    time.Duration // mean one-way latency
	latencySD  time.Duration
	limit      time.Duration // longest simulated time of one run
	// seriesClients, if not zero, is the client level whose time series
	// of calls is recorded (simulated even if not among clients).
	seriesClients int
	// workers is the number of goroutines running simulations.
	workers int
}

// seriesBin is the width of the bins of the time series of calls.
const seriesBin = 10 * time.Millisecond

// cell is the mean result of one strategy at one client level.
type cell struct {
	strategy string
	clients  int
	runs     int
	calls    float64 // writes reaching the server, mean per run
	timeMS   float64 // completion time in milliseconds, mean per run
	events   int64   // messages delivered, over all runs
}

// series is the time series of calls of one strategy.
type series struct {
	strategy string
	clients  int
	runs     int
	bins     []int64 // writes reaching the server per seriesBin, summed over the runs
}

// results are what an experiment found: cells ordered by client level,
// then in the order of the strategies, and the time series, if asked for,
// in the order of the strategies.
type results struct {
	cells  []cell
	series []series
}

// spec is one strategy at one client level: runs jobs.
type spec struct {
	strategy strategy
	clients  int
	report   bool // a cell of the results (not only a series)
	series   bool // its time series is recorded
}

// specs returns the strategy and client level of every cell, followed by
// the series-only ones when seriesClients is not among the levels.
func (x experiment) specs() []spec {
	var out []spec
	seen := false
	for _, n := range x.clients {
		series := n == x.seriesClients
		seen = seen || series
		for _, s := range x.strategies {
			out = append(out, spec{strategy: s, clients: n, report: true, series: series})
		}
	}
	if x.seriesClients > 0 && !seen {
		for _, s := range x.strategies {
			out = append(out, spec{strategy: s, clients: x.seriesClients, series: true})
		}
	}
	return out
}

// run simulates every run of the experiment on x.workers goroutines. The
// results do not depend on the number of workers: each run draws from its
// own random source, seeded from the seed, the strategy, the client level
// and the run's number, and the sums are of integers. The error, if any, is
// that of the first failing run in the order of the specs.
func (x experiment) run() (results, error) {
	specs := x.specs()
	jobs := len(specs) * x.runs
	outs := make([]outcome, jobs)
	errs := make([]error, jobs)
	acc := make([]seriesAcc, len(specs))
	var next atomic.Int64
	var failed atomic.Bool
	var wg sync.WaitGroup
	for range max(1, min(x.workers, jobs)) {
		wg.Go(func() {
			// Jobs are claimed in order, and a failure stops only the
			// claiming: every job before a failed one still runs, so the
			// first error is the same for any number of workers.
			for !failed.Load() {
				j := int(next.Add(1) - 1)
				if j >= jobs {
					return
				}
				sp, r := specs[j/x.runs], j%x.runs
				outs[j], errs[j] = x.simulate(sp, r)
				if errs[j] != nil {
					failed.Store(true)
				}
				if sp.series {
					acc[j/x.runs].add(outs[j].bins)
					outs[j].bins = nil
				}
			}
		})
	}
	wg.Wait()
	for j, err := range errs {
		if err != nil {
			sp := specs[j/x.runs]
			return results{}, &runError{sp.strategy.name, sp.clients, j%x.runs + 1, err}
		}
	}
	return x.collect(specs, outs, acc), nil
}

// simulate runs spec sp once, as run number r.
func (x experiment) simulate(sp spec, r int) (outcome, error) {
	m := model{
		clients:   sp.clients,
		backoff:   sp.strategy.backoff,
		latency:   x.latency,
		latencySD: x.latencySD,
		limit:     x.limit,
	}
	if sp.series {
		m.binWidth = seriesBin
	}
	return simulate(m, rand.New(rand.NewPCG(x.seed, runSeed(sp.strategy.name, sp.clients, r))))
}

// collect turns the outcomes of every run into means and series.
func (x experiment) collect(specs []spec, outs []outcome, acc []seriesAcc) results {
	var res results
	for i, sp := range specs {
		if sp.series {
			res.series = append(res.series, series{sp.strategy.name, sp.clients, x.runs, acc[i].bins})
		}
		if !sp.report {
			continue
		}
		c := cell{strategy: sp.strategy.name, clients: sp.clients, runs: x.runs}
		var calls int64
		var total time.Duration
		for _, o := range outs[i*x.runs : (i+1)*x.runs] {
			calls += o.calls
			total += o.time
			c.events += o.events
		}
		c.calls = float64(calls) / float64(x.runs)
		c.timeMS = float64(total) / float64(x.runs) / float64(time.Millisecond)
		res.cells = append(res.cells, c)
	}
	return res
}

// seriesAcc sums the time series of the runs of one spec, in any order.
type seriesAcc struct {
	mu   sync.Mutex
	bins []int64
}

// add adds the bins of one run.
func (a *seriesAcc) add(bins []int64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for len(a.bins) < len(bins) {
		a.bins = append(a.bins, 0)
	}
	for i, b := range bins {
		a.bins[i] += b
	}
}

// runSeed returns the second word of the PCG seed of one run, mixing the
// strategy's name, the client level and the run's number, so that every run
// has its own stream whatever the order the runs are simulated in.
func runSeed(strategy string, clients, run int) uint64 {
	h := fnv.New64a()
	h.Write([]byte(strategy))
	return splitmix(splitmix(splitmix(h.Sum64())^uint64(clients)) ^ uint64(run))
}

// splitmix is the finaliser of the SplitMix64 generator: a bijection that
// spreads every input bit over the output.
func splitmix(z uint64) uint64 {
	z += 0x9e3779b97f4a7c15
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// runError is the failure of one run.
type runError struct {
	strategy string
	clients  int
	run      int // from 1
	err      error
}

// Error names the run and says what went wrong.
func (e *runError) Error() string {
	return fmt.Sprintf("%s, %d clients, run %d: %v", e.strategy, e.clients, e.run, e.err)
}

// Unwrap returns the run's error.
func (e *runError) Unwrap() error { return e.err }
