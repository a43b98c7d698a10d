package redispace

import (
	"context"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/backoff-jitter/retry"
)

// fleetRun has workers take turns from p for host's requests, each with a
// deadline of a second, and report what answer says of each, until total
// attempts or d has passed; every interval it calls watch, if not nil. It
// returns the attempts made and the longest wait for a turn (a turn past
// its deadline counts as the whole second).
func fleetRun(t *testing.T, p *Pacer, host string, workers, total int, d time.Duration, answer func() retry.Class, every time.Duration, watch func()) (int, time.Duration) {
	t.Helper()
	req := request(t, host)
	var mu sync.Mutex
	n, longest := 0, time.Duration(0)
	start := time.Now()
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Since(start) < d {
				mu.Lock()
				if n >= total {
					mu.Unlock()
					return
				}
				n++
				mu.Unlock()
				asked := time.Now()
				ctx, cancel := context.WithTimeout(context.Background(), time.Second)
				turn, err := p.Wait(ctx, req)
				cancel()
				mu.Lock()
				longest = max(longest, time.Since(asked))
				mu.Unlock()
				if err != nil {
					// A turn past the deadline: the caller fails, and
					// calls again a little later.
					time.Sleep(10 * time.Millisecond)
					continue
				}
				turn.Done(retry.Feedback{Class: answer()})
			}
		}()
	}
	if watch != nil {
		for time.Since(start) < d {
			time.Sleep(every)
			watch()
		}
	}
	wg.Wait()
	return n, longest
}

// tokenBucket is a server's token bucket: rate tokens a second, burst at
// most, one taken by each request it accepts.
type tokenBucket struct {
	mu                  sync.Mutex
	rate, burst, tokens float64
	last                time.Time
}

func newTokenBucket(rate, burst float64) *tokenBucket {
	return &tokenBucket{rate: rate, burst: burst, tokens: burst, last: time.Now()}
}

// take reports whether the bucket accepts a request now.
func (b *tokenBucket) take() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := time.Now()
	b.tokens = min(b.burst, b.tokens+b.rate*now.Sub(b.last).Seconds())
	b.last = now
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}

// envInt reads an integer setting of an opt-in report from the
// environment: def when unset, and a test failure outside [lo, hi].
func envInt(t *testing.T, name string, def, lo, hi int) int {
	t.Helper()
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < lo || n > hi {
		t.Fatalf("%s=%q: want %d to %d", name, s, lo, hi)
	}
	return n
}
