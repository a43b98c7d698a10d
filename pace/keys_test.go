package pace

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/backoff-jitter/retry"
	"github.com/backoff-jitter/retry/internal/pacecore"
	"github.com/stretchr/testify/assert"
)

// 50,000 hosts used once leave a bounded table: at most 16 MiB of heap,
// and no more keys than MaxKeys.
func TestKeyTableIsBounded(t *testing.T) {
	const hosts = 50_000
	p := &Pacer{}
	ok := retry.Feedback{Class: retry.Success}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for i := range hosts {
		turn, err := p.Wait(context.Background(), httptest.NewRequest("GET", fmt.Sprintf("http://h%d.example/", i), nil))
		if err != nil {
			t.Fatal(err)
		}
		turn.Done(ok)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	grown := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	t.Logf("%d hosts: %d keys remembered, heap %+.1f MiB", hosts, p.store.Len(), float64(grown)/(1<<20))
	assert.LessOrEqual(t, p.store.Len(), 10_000, "keys remembered")
	assert.Less(t, grown, int64(16<<20), "heap left by %d hosts", hosts)
	runtime.KeepAlive(p)
}

// Under the race detector: many goroutines take turns on a few keys,
// some refused, some giving their turns back, and every turn ends once.
func TestConcurrentTurns(t *testing.T) {
	p := &Pacer{}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 300 {
				req := httptest.NewRequest("GET", fmt.Sprintf("http://h%d.example/", (g+i)%3), nil)
				ctx, cancel := context.WithTimeout(context.Background(), 0)
				if i%5 != 0 {
					ctx, cancel = context.WithCancel(context.Background())
				}
				turn, err := p.Wait(ctx, req)
				cancel()
				if err != nil {
					continue
				}
				switch i % 4 {
				case 0:
					turn.Abandon()
				case 1:
					turn.Done(retry.Feedback{Class: retry.Throttled})
				default:
					turn.Done(retry.Feedback{Class: retry.Success})
				}
			}
		})
	}
	wg.Wait()
}

// A Pacer without a Key counts a request against the Transport's key
// (retry.RequestKey); one with a Key, against its own.
func TestTransportKey(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	defer srv.Close()
	tenant := retry.WithKey(func(*http.Request) string { return "tenant" })
	for _, tc := range []struct {
		pacer *Pacer
		want  string
	}{
		{&Pacer{}, "tenant"},
		{&Pacer{Key: func(*http.Request) string { return "account" }}, "account"},
	} {
		rt := retry.New(nil, retry.WithPacer(tc.pacer), tenant)
		req, _ := http.NewRequest("GET", srv.URL, nil)
		resp, err := rt.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		rt.CloseIdleConnections()
		held := tc.pacer.store.Peek(tc.want, func(*pacecore.State, time.Time) {})
		assert.True(t, held, "key %q", tc.want)
		assert.Equal(t, 1, tc.pacer.store.Len())
	}
}
