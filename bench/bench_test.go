package bench

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/backoff-jitter/retry"
	"github.com/backoff-jitter/retry/pace"
	"github.com/hashicorp/go-cleanhttp"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// BenchmarkLoopback sends each scenario through each library over
// loopback, one keep-alive server per sub-benchmark. conns/op counts the
// connections the server accepted per operation after a first, untimed
// one: 0 means every attempt reused the connection.
func BenchmarkLoopback(b *testing.B) {
	for _, s := range Scenarios {
		for _, lib := range Libs {
			b.Run("scenario="+s.Name+"/lib="+lib.Name, func(b *testing.B) {
				srv := NewServer()
				defer srv.Close()
				base := cleanhttp.DefaultPooledTransport()
				defer base.CloseIdleConnections()
				run(b, lib, s, base, srv.URL, func() (int64, int64) {
					return srv.NewConns.Load(), srv.BodyBytes.Load()
				})
			})
		}
	}
}

// BenchmarkInMemory sends each scenario through each library over an
// in-memory base transport, which isolates the libraries' own cost.
func BenchmarkInMemory(b *testing.B) {
	for _, s := range Scenarios {
		for _, lib := range Libs {
			b.Run("scenario="+s.Name+"/lib="+lib.Name, func(b *testing.B) {
				base := new(Memory)
				run(b, lib, s, base, "http://127.0.0.1", func() (int64, int64) {
					return -1, base.BodyBytes.Load()
				})
			})
		}
	}
}

// BenchmarkS3Copy tells what S3 costs retry beyond copying the body aside:
// over loopback, the bare transport sending S3's body as is (lib=bare),
// through a reader that only copies it as retry does (lib=copy), and
// retry's Transport (lib=retry).
func BenchmarkS3Copy(b *testing.B) {
	s := Scenarios[2]
	for _, lib := range []string{"bare", "copy", "retry"} {
		b.Run("scenario="+s.Name+"/lib="+lib, func(b *testing.B) {
			srv := NewServer()
			defer srv.Close()
			base := cleanhttp.DefaultPooledTransport()
			defer base.CloseIdleConnections()
			var rt http.RoundTripper = base
			if lib == "retry" {
				rt = WrapRetry(base)
			}
			url := srv.URL + s.Path
			b.ReportAllocs()
			for b.Loop() {
				var body io.Reader = Opaque{bytes.NewReader(payload1M)}
				if lib == "copy" {
					body = &Copying{R: bytes.NewReader(payload1M)}
				}
				req, err := http.NewRequestWithContext(context.Background(), "POST", url, body)
				if err != nil {
					b.Fatal(err)
				}
				resp, err := rt.RoundTrip(req)
				if err != nil {
					b.Fatal(err)
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					b.Fatalf("status %d", resp.StatusCode)
				}
			}
		})
	}
}

// run times b.N operations of s through lib over base. counters returns
// the server's new connections (-1 if it has none) and body bytes so far.
func run(b *testing.B, lib Lib, s Scenario, base http.RoundTripper, url string, counters func() (conns, body int64)) {
	rt := lib.Wrap(base)
	bare := lib.Name == "bare"
	if err := Do(rt, bare, s, url); err != nil { // opens the connection
		b.Fatal(err)
	}
	conns0, body0 := counters()
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if err := Do(rt, bare, s, url); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	conns, body := counters()
	if conns0 >= 0 {
		b.ReportMetric(float64(conns-conns0)/float64(b.N), "conns/op")
	}
	if err := CheckBodies(s, b.N, body-body0); err != nil {
		b.Fatal(err)
	}
}

// TestScenarios runs each benchmark's body a few times, so that go test
// catches a broken benchmark cheaply, and checks what the benchmarks
// assume: every library answers every scenario with a 200, the server sees
// every body byte, and retry and the bare transport reuse one connection.
func TestScenarios(t *testing.T) {
	const ops = 3
	for _, s := range Scenarios {
		for _, lib := range Libs {
			t.Run(s.Name+"/"+lib.Name, func(t *testing.T) {
				srv := NewServer()
				defer srv.Close()
				base := cleanhttp.DefaultPooledTransport()
				defer base.CloseIdleConnections()
				rt := lib.Wrap(base)
				for i := range ops {
					if err := Do(rt, lib.Name == "bare", s, srv.URL); err != nil {
						t.Fatalf("loopback op %d: %v", i, err)
					}
				}
				if err := CheckBodies(s, ops, srv.BodyBytes.Load()); err != nil {
					t.Error(err)
				}
				if n := srv.NewConns.Load(); (lib.Name == "bare" || lib.Name == "retry") && n != 1 {
					t.Errorf("%d connections for %d requests; want 1", n, ops)
				}

				mem := new(Memory)
				rt = lib.Wrap(mem)
				for i := range ops {
					if err := Do(rt, lib.Name == "bare", s, "http://127.0.0.1"); err != nil {
						t.Fatalf("in-memory op %d: %v", i, err)
					}
				}
				if err := CheckBodies(s, ops, mem.BodyBytes.Load()); err != nil {
					t.Error(err)
				}
			})
		}
	}
}

// TestHeldResponsesKeepNoBodyCopy checks that retry drops its copy of an
// opaque request body when RoundTrip returns: a caller holding responses
// (streaming them, say) must not hold a megabyte of request body each.
func TestHeldResponsesKeepNoBodyCopy(t *testing.T) {
	srv := NewServer()
	defer srv.Close()
	base := cleanhttp.DefaultPooledTransport()
	defer base.CloseIdleConnections()
	rt := WrapRetry(base)
	s := Scenarios[2] // S3: 1 MiB from an opaque reader, copied for replay
	var held []*http.Response
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for range 8 {
		resp, err := rt.RoundTrip(s.NewRequest(context.Background(), srv.URL))
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, resp)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	grew := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	for _, resp := range held {
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	if grew > 2<<20 {
		t.Errorf("holding 8 responses to 1 MiB uploads holds %d KiB of heap; want under 2048 KiB", grew>>10)
	}
}

// TestCopying checks that the copying reader of BenchmarkS3Copy yields the
// body unchanged and keeps all of it.
func TestCopying(t *testing.T) {
	c := &Copying{R: bytes.NewReader(payload1M)}
	got, err := io.ReadAll(c)
	if err != nil || !bytes.Equal(got, payload1M) {
		t.Fatalf("ReadAll = %d bytes, %v; want the 1 MiB payload", len(got), err)
	}
	if !bytes.Equal(bytes.Join(c.chunks, nil), payload1M) {
		t.Error("the chunks do not hold the body")
	}
}

// BenchmarkColdBurst measures what pacing costs a healthy client: one
// operation is a burst of 100 concurrent GETs to a host the Pacer has not
// seen (a new Transport each time), over connections kept warm, against a
// loopback server that never throttles. pacer=none is retry with pacing
// off, pacer=default the Transport's own Pacer, pacer=slow-start a Pacer
// with slow start's window of 10 (the AWS preset's).
func BenchmarkColdBurst(b *testing.B) {
	srv := NewServer()
	defer srv.Close()
	pacers := []struct {
		name string
		new  func() retry.Pacer
	}{
		{"none", func() retry.Pacer { return retry.NoPacer }},
		{"default", func() retry.Pacer { return nil }},
		{"slow-start", func() retry.Pacer { return &pace.Pacer{InitialWindow: pace.DefaultInitialWindow} }},
	}
	for _, pc := range pacers {
		b.Run("pacer="+pc.name, func(b *testing.B) { coldBurst(b, srv.URL, pc.new) })
	}
}

// BenchmarkColdBurstRTT is BenchmarkColdBurst against a server that
// answers each request 20 ms after it arrives, as a distant host would:
// slow start lets a window's attempts out per round trip, doubling it,
// so the burst takes a round trip more for each halving of the initial
// window. window=off is a Pacer without slow start, the default.
func BenchmarkColdBurstRTT(b *testing.B) {
	const rtt = 20 * time.Millisecond
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(rtt)
		w.Write(okBody)
	}))
	defer srv.Close()
	for _, window := range []int{-1, 2, 4, 10} {
		name := "window=" + strconv.Itoa(window)
		if window < 0 {
			name = "window=off"
		}
		b.Run(name, func(b *testing.B) {
			coldBurst(b, srv.URL, func() retry.Pacer { return &pace.Pacer{InitialWindow: window} })
		})
	}
}

// coldBurst times bursts of 100 concurrent GETs to url, each burst
// through a new retry Transport with the Pacer newPacer makes, over
// connections warmed by a first, untimed burst.
func coldBurst(b *testing.B, url string, newPacer func() retry.Pacer) {
	const burst = 100
	base := cleanhttp.DefaultPooledTransport()
	base.MaxIdleConnsPerHost = burst
	defer base.CloseIdleConnections()
	fire := func() {
		rt := retry.New(base, retry.WithPacer(newPacer()))
		var wg sync.WaitGroup
		for range burst {
			wg.Go(func() {
				req, err := http.NewRequest("GET", url, nil)
				if err != nil {
					b.Error(err)
					return
				}
				resp, err := rt.RoundTrip(req)
				if err != nil {
					b.Error(err)
					return
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			})
		}
		wg.Wait()
	}
	fire()
	b.ResetTimer()
	for b.Loop() {
		fire()
	}
}
