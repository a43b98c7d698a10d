package bench

import (
	"net/http"
	"testing"

	"github.com/backoff-jitter/retry"
	"github.com/backoff-jitter/retry/pace"
)

// BenchmarkParallel sends GETs (S1) and 64 KiB POSTs with GetBody (S2)
// from many goroutines at once through one RoundTripper over the in-memory
// base: the per-request cost under contention, where a lock or an atomic
// shared by every request shows. lib=retry is the Transport with its
// defaults (its budget and its own Pacer, idle: nothing throttles);
// lib=retry+nopacer the same with pacing off; lib=retry+pacer with a
// pace.Pacer of the caller's. Run with -cpu 1,2,8.
func BenchmarkParallel(b *testing.B) {
	libs := []struct {
		name string
		wrap func(http.RoundTripper) http.RoundTripper
	}{
		{"bare", func(base http.RoundTripper) http.RoundTripper { return base }},
		{"retry", func(base http.RoundTripper) http.RoundTripper { return retry.New(base) }},
		{"retry+nopacer", func(base http.RoundTripper) http.RoundTripper {
			return retry.New(base, retry.WithPacer(retry.NoPacer))
		}},
		{"retry+pacer", func(base http.RoundTripper) http.RoundTripper {
			return retry.New(base, retry.WithPacer(&pace.Pacer{}))
		}},
	}
	for _, s := range Scenarios[:2] {
		for _, lib := range libs {
			b.Run("scenario="+s.Name+"/lib="+lib.name, func(b *testing.B) {
				base := new(Memory)
				rt := lib.wrap(base)
				bare := lib.name == "bare"
				if err := Do(rt, bare, s, "http://127.0.0.1"); err != nil {
					b.Fatal(err)
				}
				b.ReportAllocs()
				b.ResetTimer()
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						if err := Do(rt, bare, s, "http://127.0.0.1"); err != nil {
							b.Error(err)
							return
						}
					}
				})
			})
		}
	}
}
