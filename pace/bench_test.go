package pace

import (
	"context"
	"fmt"
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

// BenchmarkNewKeyOverMaxKeys is a new key's attempt while more keys than
// MaxKeys are in use (2,000 against 1,000): the sweeps its arrival may
// start find every key in use.
func BenchmarkNewKeyOverMaxKeys(b *testing.B) {
	p := &Pacer{MaxKeys: 1000, InitialWindow: -1}
	var turns []retry.Turn
	for i := range 2000 {
		req, _ := newHostRequest(fmt.Sprintf("busy%d.example", i))
		turn, err := p.Wait(context.Background(), req)
		if err != nil {
			b.Fatal(err)
		}
		turns = append(turns, turn)
	}
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		req, _ := newHostRequest(fmt.Sprintf("h%d.example", i))
		turn, err := p.Wait(context.Background(), req)
		if err != nil {
			b.Fatal(err)
		}
		turn.Done(okFeedback)
	}
	b.StopTimer()
	for _, turn := range turns {
		turn.Done(okFeedback)
	}
}
