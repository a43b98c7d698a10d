package retry

import (
	"math"
	"slices"
	"sync"
	"time"

	"github.com/backoff-jitter/retry/internal/keytable"
)

// The recent latencies of each key, from which a [Hedge] with a
// Percentile takes its delay.
const (
	// latencyWindow is how many of a key's latest answers are kept: enough
	// for a 95th percentile to rest on three of them, few enough to follow
	// a host that slows down within a minute of traffic.
	latencyWindow = 64
	// latencyMinSamples is how many answers a key must have given before
	// its percentile replaces Hedge.Delay: fewer say little of a tail.
	latencyMinSamples = 16
	// latencyRecompute is how many new answers make the kept percentile
	// stale: sorting the window on every call would cost more than the
	// call's other work.
	latencyRecompute = 8
	// maxLatencyKeys bounds the windows kept while unused: a crawler's or
	// a per-tenant client's hosts must not grow them for the life of the
	// process. A window is half a kilobyte.
	maxLatencyKeys = 1024
)

// latencies is the latency window of each key (RequestKey): of every
// attempt that returned, answered or failed, and of every copy cancelled
// (the time it ran, a bound below its latency). Its windows are kept in a
// bounded table, the longest unused forgotten first. It is safe for
// concurrent use.
type latencies struct {
	table keytable.Table[latencyRing]
}

func newLatencies(now func() time.Time) *latencies {
	l := new(latencies)
	l.table.Max, l.table.Now = maxLatencyKeys, now
	l.table.New = func(string) *latencyRing { return new(latencyRing) }
	return l
}

// latencyRing is one key's latest latencies and the percentile last
// computed from them.
type latencyRing struct {
	mu      sync.Mutex
	samples [latencyWindow]time.Duration
	n       int // answers recorded in all; the next goes to samples[n%latencyWindow]

	pct    float64       // the percentile kept, of the window at keptAt
	kept   time.Duration // its value
	keptAt int           // n when it was computed; 0: never
}

// record adds the latency d of an answer from key.
func (l *latencies) record(key string, d time.Duration) {
	e := l.table.Use(key)
	defer l.table.Done(e)
	r := e.Value
	r.mu.Lock()
	defer r.mu.Unlock()
	r.samples[r.n%latencyWindow] = max(d, 0)
	r.n++
}

// percentile returns the p-th percentile (0 < p < 100) of key's recent
// latencies, and false while the key has given fewer than
// latencyMinSamples answers.
func (l *latencies) percentile(key string, p float64) (time.Duration, bool) {
	e := l.table.Peek(key)
	if e == nil {
		return 0, false
	}
	r := e.Value
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.n < latencyMinSamples {
		return 0, false
	}
	if r.keptAt == 0 || r.pct != p || r.n-r.keptAt >= latencyRecompute {
		r.kept, r.pct, r.keptAt = r.compute(p), p, r.n
	}
	return r.kept, true
}

// compute returns the p-th percentile of the window by the nearest-rank
// method: the smallest latency at least p percent of the window reach.
// r.mu must be held.
func (r *latencyRing) compute(p float64) time.Duration {
	k := min(r.n, latencyWindow)
	sorted := r.samples // a copy, on the stack
	s := sorted[:k]
	slices.Sort(s)
	rank := int(math.Ceil(p / 100 * float64(k)))
	return s[min(max(rank, 1), k)-1]
}
