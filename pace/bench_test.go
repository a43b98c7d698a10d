package pace

import (
	"context"
	"net/http"
	"testing"

	"github.com/backoff-jitter/retry"
)

// BenchmarkIdleTurn is the cost of a Pacer on a key that has not engaged
// (the path of nearly every request): Wait, then Done with a success.
func BenchmarkIdleTurn(b *testing.B) {
	req, err := http.NewRequest(http.MethodGet, "http://api.example/", nil)
	if err != nil {
		b.Fatal(err)
	}
	ok := retry.Feedback{Class: retry.Success}
	ctx := context.Background()
	run := func(b *testing.B, p *Pacer) {
		t, err := p.Wait(ctx, req)
		if err != nil {
			b.Fatal(err)
		}
		t.Done(ok) // ends slow start
		b.ReportAllocs()
		b.ResetTimer()
	}
	b.Run("serial", func(b *testing.B) {
		p := &Pacer{}
		run(b, p)
		for b.Loop() {
			t, _ := p.Wait(ctx, req)
			t.Done(ok)
		}
	})
	b.Run("parallel", func(b *testing.B) {
		p := &Pacer{}
		run(b, p)
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				t, _ := p.Wait(ctx, req)
				t.Done(ok)
			}
		})
	})
}
