package retry

import (
	"math"
	"slices"
	"sync"
	"time"
)

// The recent latencies of each host, from which a [Hedge] with a
// Percentile takes its delay.
const (
	// latencyWindow is how many of a host's latest answers are kept: enough
	// for a 95th percentile to rest on three of them, few enough to follow
	// a host that slows down within a minute of traffic.
	latencyWindow = 64
	// latencyMinSamples is how many answers a host must have given before
	// its percentile replaces Hedge.Delay: fewer say little of a tail.
	latencyMinSamples = 16
	// latencyRecompute is how many new answers make the kept percentile
	// stale: sorting the window on every call would cost more than the
	// call's other work.
	latencyRecompute = 8
	// maxLatencyHosts bounds the table: a crawler's or a per-tenant
	// client's hosts must not grow it for the life of the process. A new
	// host past the bound replaces an arbitrary one.
	maxLatencyHosts = 1024
)

// latencies is the latency window of each host: of every attempt that
// returned, answered or failed, and of every copy cancelled (the time it
// ran, a bound below its latency). It is safe for concurrent
// use. Its zero value is empty and ready.
type latencies struct {
	mu    sync.Mutex
	hosts map[string]*latencyRing
}

// latencyRing is one host's latest latencies and the percentile last
// computed from them.
type latencyRing struct {
	samples [latencyWindow]time.Duration
	n       int // answers recorded in all; the next goes to samples[n%latencyWindow]

	pct    float64       // the percentile kept, of the window at keptAt
	kept   time.Duration // its value
	keptAt int           // n when it was computed; 0: never
}

// record adds the latency d of an answer from host.
func (l *latencies) record(host string, d time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	r := l.hosts[host]
	if r == nil {
		if l.hosts == nil {
			l.hosts = make(map[string]*latencyRing)
		}
		if len(l.hosts) >= maxLatencyHosts {
			for k := range l.hosts {
				delete(l.hosts, k) // an arbitrary one: map order is random
				break
			}
		}
		r = new(latencyRing)
		l.hosts[host] = r
	}
	r.samples[r.n%latencyWindow] = max(d, 0)
	r.n++
}

// percentile returns the p-th percentile (0 < p < 100) of host's recent
// latencies, and false while the host has given fewer than
// latencyMinSamples answers.
func (l *latencies) percentile(host string, p float64) (time.Duration, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	r := l.hosts[host]
	if r == nil || r.n < latencyMinSamples {
		return 0, false
	}
	if r.keptAt == 0 || r.pct != p || r.n-r.keptAt >= latencyRecompute {
		r.kept, r.pct, r.keptAt = r.compute(p), p, r.n
	}
	return r.kept, true
}

// compute returns the p-th percentile of the window by the nearest-rank
// method: the smallest latency at least p percent of the window reach.
func (r *latencyRing) compute(p float64) time.Duration {
	k := min(r.n, latencyWindow)
	sorted := r.samples // a copy, on the stack
	s := sorted[:k]
	slices.Sort(s)
	rank := int(math.Ceil(p / 100 * float64(k)))
	return s[min(max(rank, 1), k)-1]
}
