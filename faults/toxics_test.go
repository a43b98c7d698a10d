package faults

import (
	"strings"
	"testing"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/backoff-jitter/retry"
	"github.com/rs/zerolog"
)

// startProxy starts an in-process toxiproxy on loopback in front of
// upstream, with the given toxics (toxiproxy's JSON toxic definitions).
func startProxy(t *testing.T, upstream string, toxics ...string) *toxiproxy.Proxy {
	t.Helper()
	server := toxiproxy.NewServer(toxiproxy.NewMetricsContainer(nil), zerolog.Nop())
	proxy := toxiproxy.NewProxy(server, t.Name(), "127.0.0.1:0", upstream)
	if err := proxy.Start(); err != nil {
		t.Fatalf("starting toxiproxy: %v", err)
	}
	for _, js := range toxics {
		if _, err := proxy.Toxics.AddToxicJson(strings.NewReader(js)); err != nil {
			proxy.Stop()
			t.Fatalf("adding toxic %s: %v", js, err)
		}
	}
	return proxy
}

// Where a fault leaves an unsafe request that failed.
const (
	anyExecutions = iota // the fault may strike before or after the server read it all
	notExecuted          // before the server read the whole request
	executedOnce         // after the server executed it
)

// TestToxics sends every kind of request through a Transport to a
// recording server behind toxiproxy, for each toxic, and checks that safe
// and keyed requests eventually succeed, that no unsafe request is executed
// twice, that every executed body is intact, and that nothing leaks.
//
// Toxicity is the chance that a toxic applies to a connection, and the
// server closes every connection after its response, so each attempt runs
// the dice again: with toxicity 0.3 and 10 attempts a safe request fails
// with probability 0.3^10 ≈ 6e-6.
func TestToxics(t *testing.T) {
	tests := []struct {
		name   string
		toxics []string
		opts   []retry.Option
		// intermittent: the toxic fails some attempts; otherwise it must
		// fail none.
		intermittent bool
		unsafe       int // what an unsafe request that failed saw
		keepAlive    bool
	}{
		{
			name:         "reset_peer before forwarding",
			toxics:       []string{`{"type":"reset_peer","stream":"upstream","toxicity":0.3,"attributes":{"timeout":0}}`},
			intermittent: true,
			unsafe:       notExecuted,
		},
		{
			name:         "reset_peer after forwarding",
			toxics:       []string{`{"type":"reset_peer","stream":"downstream","toxicity":0.3,"attributes":{"timeout":0}}`},
			intermittent: true,
			unsafe:       executedOnce,
		},
		{
			name:         "timeout before forwarding",
			toxics:       []string{`{"type":"timeout","stream":"upstream","toxicity":0.3,"attributes":{"timeout":0}}`},
			opts:         []retry.Option{retry.WithAttemptTimeout(150 * time.Millisecond)},
			intermittent: true,
			unsafe:       notExecuted,
		},
		{
			name:         "timeout after forwarding",
			toxics:       []string{`{"type":"timeout","stream":"downstream","toxicity":0.3,"attributes":{"timeout":100}}`},
			intermittent: true,
			unsafe:       executedOnce,
		},
		{
			name:         "latency with jitter",
			toxics:       []string{`{"type":"latency","stream":"upstream","toxicity":1,"attributes":{"latency":50,"jitter":45}}`},
			opts:         []retry.Option{retry.WithAttemptTimeout(80 * time.Millisecond)},
			intermittent: true,
			unsafe:       anyExecutions,
		},
		{
			name:         "bandwidth",
			toxics:       []string{`{"type":"bandwidth","stream":"upstream","toxicity":0.3,"attributes":{"rate":16}}`},
			opts:         []retry.Option{retry.WithAttemptTimeout(150 * time.Millisecond)},
			intermittent: true,
			unsafe:       anyExecutions,
		},
		{
			name: "slicer",
			toxics: []string{
				`{"type":"slicer","stream":"upstream","toxicity":1,"attributes":{"average_size":7,"size_variation":3,"delay":10}}`,
				`{"type":"slicer","stream":"downstream","toxicity":1,"attributes":{"average_size":7,"size_variation":3,"delay":10}}`,
			},
			keepAlive: true,
		},
		{
			name:         "limit_data of the request",
			toxics:       []string{`{"type":"limit_data","stream":"upstream","toxicity":0.3,"attributes":{"bytes":2000}}`},
			intermittent: true,
			unsafe:       anyExecutions,
		},
		{
			name:         "limit_data of the response",
			toxics:       []string{`{"type":"limit_data","stream":"downstream","toxicity":0.3,"attributes":{"bytes":40}}`},
			intermittent: true,
			unsafe:       executedOnce,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fds := openFDs(t)
			rec := newRecorder(t)
			rec.closeEach = !tt.keepAlive
			proxy := startProxy(t, rec.srv.Listener.Addr().String(), tt.toxics...)
			// No retry budget: these tests ask whether intermittent faults
			// are survived; the soak runs with the default budget.
			l := newLoad("http://"+proxy.Listen, append([]retry.Option{retry.WithBudget(retry.NoBudget)}, tt.opts...)...)
			results := l.run(8, 4, 10*time.Second)
			l.rt.CloseIdleConnections()
			if !rec.waitClosed(5 * time.Second) {
				t.Errorf("connections still open 5s after the last request: %d", rec.open.Load())
			}
			proxy.Stop()
			rec.srv.Close() // waits for the handlers, so every execution is counted

			faults := l.retries.Load() + l.gaveUps.Load()
			unsafeFailed, unsafeExecuted := checkResults(t, rec, results, tt.intermittent, tt.unsafe)
			if tt.intermittent && faults == 0 {
				t.Errorf("no attempt failed: the toxic injected nothing")
			}
			if !tt.intermittent && faults != 0 {
				t.Errorf("%d attempts failed; the toxic must not fail any", faults)
			}
			t.Logf("%s: %d requests, %d failed attempts, %d connections, %d bodies cut short; %d unsafe requests failed, %d of them executed (once)",
				tt.name, len(results), faults, rec.conns.Load(), rec.truncated, unsafeFailed, unsafeExecuted)
			checkNoLeaks(t, fds)
		})
	}
}

// checkResults checks the invariants every fault test shares, and returns
// how many unsafe requests failed and how many of those the server had
// executed (once).
func checkResults(t *testing.T, rec *recorder, results []result, intermittent bool, unsafe int) (unsafeFailed, unsafeExecuted int) {
	t.Helper()
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.corrupted) > 0 {
		t.Errorf("corrupted bodies executed: %v", rec.corrupted)
	}
	for _, r := range results {
		n := rec.execs[r.id]
		// Checked once everything is shut down: a RoundTripper may close
		// the body after RoundTrip returns.
		if r.body != nil && r.body.closes.Load() != 1 {
			t.Errorf("%s: the caller's body was closed %d times; want 1", r.id, r.body.closes.Load())
		}
		if r.ok && n == 0 {
			t.Errorf("%s: succeeded but the server never executed it", r.id)
		}
		if !r.ok && r.reason == "" {
			t.Errorf("%s: failed without a reason", r.id)
		}
		if r.kind.safe() {
			if !r.ok {
				t.Errorf("%s: %s failed (%s) after %v; safe requests must survive intermittent faults", r.id, r.kind.name, r.reason, r.elapsed)
			}
			continue
		}
		if !r.ok {
			unsafeFailed++
			if n > 0 {
				unsafeExecuted++
			}
			if !intermittent {
				t.Errorf("%s: %s failed (%s); the toxic must fail nothing", r.id, r.kind.name, r.reason)
			}
		}
		switch {
		case n > 1:
			t.Errorf("%s: unsafe %s executed %d times", r.id, r.kind.name, n)
		case !r.ok && unsafe == notExecuted && n != 0:
			t.Errorf("%s: failed (%s) but was executed %d times; the fault strikes before the server reads it", r.id, r.reason, n)
		case !r.ok && unsafe == executedOnce && n != 1:
			t.Errorf("%s: failed (%s) and was executed %d times; the fault strikes after the server executed it", r.id, r.reason, n)
		}
	}
	return unsafeFailed, unsafeExecuted
}
