package faults

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/backoff-jitter/retry"
)

// minFlatRun is the shortest soak whose memory and goroutine counts are
// judged flat.
const minFlatRun = 10 * time.Second

var soakFor = flag.Duration("soak", 3*time.Second, "how long TestSoak sends requests (e.g. -soak=60s)")

// soakServer fails at random: it throttles (503 with a short
// Retry-After-Ms, or a Retry-After longer than the client honours, or 429),
// answers 500 after executing, and resets connections before or after
// executing. Like the recorder it executes a request only when it read the
// whole body, but it counts executions in an array allocated up front,
// indexed by the request's sequence number, so that its own bookkeeping
// does not grow the heap the soak watches.
type soakServer struct {
	srv    *httptest.Server
	base   int64 // idSeq when the soak started
	faults atomic.Int64

	mu         sync.Mutex
	execs      []uint8 // by sequence number - base; saturates
	duplicates int     // unsafe requests executed a second time
	corrupted  int
}

func (s *soakServer) serve(w http.ResponseWriter, r *http.Request) {
	fault := pickSoakFault()
	if fault != "" {
		s.faults.Add(1)
	}
	switch fault {
	case "503 Retry-After-Ms":
		w.Header().Set("Retry-After-Ms", "5")
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	case "503 Retry-After too long":
		w.Header().Set("Retry-After", "1") // > MaxRetryAfter: returned at once
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	case "429":
		w.WriteHeader(http.StatusTooManyRequests)
		return
	case "reset before reading":
		resetConn(w)
		return
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return
	}
	id := r.Header.Get(headerID)
	seq, err := strconv.ParseInt(id[strings.LastIndexByte(id, '-')+1:], 10, 64)
	if err != nil {
		panic("bad request id " + id)
	}
	sum := sha256.Sum256(body)
	unsafe := !retry.ReplaySafe(r)
	s.mu.Lock()
	if i := seq - s.base; i >= 0 && i < int64(len(s.execs)) {
		if s.execs[i] == 1 && unsafe {
			s.duplicates++
		}
		s.execs[i] = min(s.execs[i], 254) + 1
	}
	if hex.EncodeToString(sum[:]) != r.Header.Get(headerSum) {
		s.corrupted++
	}
	s.mu.Unlock()
	switch fault {
	case "500 after executing":
		w.WriteHeader(http.StatusInternalServerError)
		return
	case "reset after executing":
		resetConn(w)
		return
	}
	w.Header().Set("Content-Length", strconv.Itoa(len(responseBody)))
	w.Write(responseBody)
}

// soakFaults is the fault mix, by weight out of 100; the rest are 200s.
var soakFaults = []weighted{
	{10, "503 Retry-After-Ms"},
	{3, "503 Retry-After too long"},
	{8, "429"},
	{8, "500 after executing"},
	{6, "reset after executing"},
	{5, "reset before reading"},
}

func pickSoakFault() string { return pick(soakFaults, "") }

// weighted is a fault and its weight out of 100.
type weighted struct {
	weight int
	name   string
}

// pick returns one of ws at random, by weight, or none when the weights
// left over out of 100 are drawn.
func pick(ws []weighted, none string) string {
	n := rand.IntN(100)
	for _, w := range ws {
		if n < w.weight {
			return w.name
		}
		n -= w.weight
	}
	return none
}

func resetConn(w http.ResponseWriter) {
	conn, _, err := w.(http.Hijacker).Hijack()
	if err != nil {
		return
	}
	if tc, ok := conn.(*net.TCPConn); ok {
		tc.SetLinger(0) // close with RST
	}
	conn.Close()
}

// TestSoak runs 200 goroutines through one Transport against soakServer
// for -soak (3s by default; CI runs 20s) and checks that every request is
// accounted for, that no unsafe request is executed twice, that no body is
// corrupted, that the heap in use and the goroutine count stay flat, and
// that nothing leaks at the end.
//
// "Flat": the run is cut into six equal windows, sampled every 100ms; the
// mean of the last window must not exceed the mean of the second by more
// than 20% and by more than an absolute slack (4 MiB of heap, 100
// goroutines: half the workers, the swing of the connections in flight)
// that keeps a 3s run on a busy machine from failing on noise. For
// -soak=60s that is the last 10s against 10–20s. A leak of anything per
// request (over 800 requests a second even under -race) breaks both
// bounds within a second.
func TestSoak(t *testing.T) {
	const workers = 200
	d := *soakFor
	fds := openFDs(t)
	const maxRequests = 2_000_000 // a bound on the count, whatever -soak says
	s := &soakServer{base: idSeq.Load(), execs: make([]uint8, maxRequests+workers+1)}
	s.srv = httptest.NewUnstartedServer(http.HandlerFunc(s.serve))
	s.srv.Config.ErrorLog = discardLog
	s.srv.Start()

	l := newLoad(s.srv.URL,
		retry.WithMaxAttempts(4),
		retry.WithBackoff(retry.Exponential{Base: time.Millisecond, Cap: 50 * time.Millisecond, Jitter: retry.FullJitter}),
		retry.WithMaxRetryAfter(100*time.Millisecond),
	)

	type sample struct {
		at         time.Duration
		heap       uint64
		goroutines int
	}
	var samples []sample
	start := time.Now()
	deadline := start.Add(d)
	stopSampling := make(chan struct{})
	var sampler sync.WaitGroup
	sampler.Go(func() {
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		var ms runtime.MemStats
		for {
			select {
			case <-stopSampling:
				return
			case <-tick.C:
				runtime.ReadMemStats(&ms)
				samples = append(samples, sample{time.Since(start), ms.HeapInuse, runtime.NumGoroutine()})
			}
		}
	})

	// Outcomes are tallied as they come, in counters, not kept: the heap
	// must stay flat.
	var (
		mu        sync.Mutex
		outcomes  = make(map[string]int)
		succeeded int
		made      int
		pending   []*closeCounter // bodies not yet closed when their request ended
		panics    atomic.Int64
		requests  atomic.Int64
	)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			defer func() {
				if p := recover(); p != nil {
					panics.Add(1)
				}
			}()
			for time.Now().Before(deadline) && requests.Add(1) <= maxRequests {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				r := l.do(ctx, kinds[rand.IntN(len(kinds))])
				cancel()
				mu.Lock()
				made++
				switch {
				case r.ok:
					succeeded++
				case r.reason == "":
					t.Errorf("%s failed without a reason", r.id)
				default:
					outcomes[r.reason]++
				}
				if r.body != nil && r.body.closes.Load() != 1 {
					pending = append(pending, r.body)
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	close(stopSampling)
	sampler.Wait()
	l.rt.CloseIdleConnections()
	s.srv.Close()

	// A RoundTripper may close the body after RoundTrip returns: the
	// bodies still open then are checked once everything is shut down.
	for _, b := range pending {
		if n := b.closes.Load(); n != 1 {
			t.Errorf("a caller's body was closed %d times; want 1", n)
		}
	}
	if s.duplicates > 0 {
		t.Errorf("%d unsafe requests executed more than once", s.duplicates)
	}
	if s.corrupted > 0 {
		t.Errorf("%d corrupted bodies executed", s.corrupted)
	}
	if p := panics.Load(); p > 0 {
		t.Errorf("%d goroutines panicked", p)
	}
	if made == 0 {
		t.Fatal("no request was made")
	}
	// No wait of the soak is long (backoffs up to 50 ms, server waits up
	// to 100 ms), so a call refused for its 10 s deadline was refused by
	// the Pacer: its turns lay past the deadline, the key paced far under
	// what the server takes. The server's throttles are random (a fifth
	// of its answers, at any rate), and random throttling is no limit.
	late := 0
	for reason, n := range outcomes {
		if strings.Contains(reason, "deadline too near") {
			late += n
		}
	}
	if late > 0 {
		t.Errorf("%d calls refused for their deadline: the default Pacer held them back", late)
	}

	// Flatness is judged only over a run long enough for it to mean
	// something: over 3 s the windows compared are half a second each, and
	// a collection that happens to fall between them moves the heap by
	// more than the tolerance (seen under -race). CI runs 20 s.
	if d < minFlatRun {
		t.Logf("soak of %v: too short to judge memory and goroutines flat (at least %v)", d, minFlatRun)
	} else {
		checkFlat(t, "heap in use (bytes)", d, len(samples), func(i int) (time.Duration, float64) {
			return samples[i].at, float64(samples[i].heap)
		}, 4<<20)
		checkFlat(t, "goroutines", d, len(samples), func(i int) (time.Duration, float64) {
			return samples[i].at, float64(samples[i].goroutines)
		}, 100)
	}

	var lines []string
	for k, v := range outcomes {
		lines = append(lines, fmt.Sprintf("%s: %d", k, v))
	}
	sort.Strings(lines)
	t.Logf("soak %v: %d requests (%.0f/s), %d succeeded, %d server faults injected, %d attempts retried, %d unsafe duplicates, %d corrupted bodies, %d panics; failures: %s",
		elapsed.Round(time.Millisecond), made, float64(made)/elapsed.Seconds(), succeeded,
		s.faults.Load(), l.retries.Load(), s.duplicates, s.corrupted, panics.Load(), strings.Join(lines, ", "))
	checkNoLeaks(t, fds)
}

// checkFlat fails t when the mean of the last sixth of the n samples (at,
// value) exceeds the mean of the second sixth by more than 20% and by more
// than slack.
func checkFlat(t *testing.T, what string, d time.Duration, n int, sample func(int) (time.Duration, float64), slack float64) {
	t.Helper()
	window := d / 6
	var ref, last []float64
	for i := range n {
		at, v := sample(i)
		switch {
		case at >= window && at < 2*window:
			ref = append(ref, v)
		case at >= d-window && at <= d:
			last = append(last, v)
		}
	}
	if len(ref) == 0 || len(last) == 0 {
		t.Errorf("%s: too few samples (%d) to tell whether it stayed flat", what, n)
		return
	}
	mean := func(xs []float64) float64 {
		sum := 0.0
		for _, x := range xs {
			sum += x
		}
		return sum / float64(len(xs))
	}
	r, l := mean(ref), mean(last)
	t.Logf("%s: mean %.0f in [%v, %v), %.0f in the last %v", what, r, window, 2*window, l, window)
	if l > 1.2*r && l-r > slack {
		t.Errorf("%s grew from a mean of %.0f in [%v, %v) to %.0f in the last %v: more than 20%% and %.0f", what, r, window, 2*window, l, window, slack)
	}
}
