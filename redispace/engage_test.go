package redispace

import (
	"testing"

	"github.com/backoff-jitter/retry"
)

// answer takes a turn of req's key and reports class on it.
func answer(t *testing.T, p *Pacer, class retry.Class) {
	t.Helper()
	turn, _ := wait(t, p, request(t, "api.example"))
	turn.Done(retry.Feedback{Class: class})
}

// An idle key engages on Page's CUSUM of its answers, a share of 0.5
// refused against 0.25: refusals now and then, or a quarter of the
// answers refused, engage nothing (they are cheaper retried than paced),
// half refused engages within a few dozen answers. Before, a throttle
// engaged a key with eight answers or more, whatever the share, and the
// fleet's rate was cut and tested for shedding for nothing.
func TestModerateRefusalsEngageNothing(t *testing.T) {
	for _, tc := range []struct {
		name     string
		every    int // one answer in every refused
		answers  int
		engageBy int // 0: never
	}{
		{"10%", 10, 400, 0},
		{"25%", 4, 400, 0},
		// +ln 2 - ln 1.5 a pair: from the new key's 2.52 to 4.6 in 8
		// pairs, the first answer a success.
		{"50%", 2, 60, 16},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rdb, _ := startRedis(t)
			p := &Pacer{Client: rdb, InitialWindow: -1}
			for i := 1; i <= tc.answers; i++ {
				class := retry.Success
				if i%tc.every == 0 {
					class = retry.Throttled
				}
				answer(t, p, class)
				r := rate(t, p, "api.example")
				switch {
				case r > 0 && tc.engageBy == 0:
					t.Fatalf("engaged after %d answers, one in %d refused; want idle", i, tc.every)
				case r > 0 && i < tc.engageBy:
					t.Fatalf("engaged after %d answers, one in %d refused; want %d at least", i, tc.every, tc.engageBy)
				case r > 0:
					return
				}
			}
			if tc.engageBy > 0 {
				t.Errorf("idle after %d answers, one in %d refused; want engaged", tc.answers, tc.every)
			}
		})
	}
}
