package redispace

import (
	"context"
	"math"
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
				r := rate(t, rdb, "api.example")
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

// An idle key's second of 32 answers or more refused no more than a
// quarter gives the key its share found not to depend on the rate, as a
// test of shedding would: refusals up to it then engage nothing even
// after a limit begins. A key that met 10 % shedding and then a limit
// cut on every random refusal without it (package pace, AIMD: 77 of 100
// simulated runs slow, against 20).
func TestIdleSecondGivesTheShare(t *testing.T) {
	rdb, _ := startRedis(t)
	ctx := context.Background()
	key := defaultPrefix + "api.example"
	p := &Pacer{Client: rdb, InitialWindow: -1}
	for i := 1; i <= 40; i++ {
		class := retry.Success
		if i%10 == 0 {
			class = retry.Throttled
		}
		answer(t, p, class)
	}
	if s, _ := rdb.HGet(ctx, key, "share").Float64(); s != 0 {
		t.Fatalf("share %v within the key's first second; want none yet", s)
	}
	rdb.HSet(ctx, key, "since", redisNow(t, rdb)-1_100_000) // the second is over
	answer(t, p, retry.Success)
	if s, _ := rdb.HGet(ctx, key, "share").Float64(); math.Abs(s-0.1) > 1e-9 {
		t.Errorf("share %v after a second of 40 answers, 4 refused; want 0.1", s)
	}
	if r := rate(t, rdb, "api.example"); r != 0 {
		t.Errorf("rate %v; want idle", r)
	}
}

// After an outage the key restarts, and its first refusal engages it
// again, after the successes of the server's burst too: the key has been
// throttled before, and a storm's backlog meeting the server as it
// returns is its limit's.
func TestRestartEngagesOnItsFirstThrottle(t *testing.T) {
	rdb, p, _, key := engagedPacer(t)
	ctx := context.Background()
	// Two cuts, the last success two seconds ago, nothing ever accepted.
	rdb.HSet(ctx, key, "cutsOk", 2, "lastOk", redisNow(t, rdb)-2_000_000, "stAfter", 0)
	answer(t, p, retry.Success)
	if r := rate(t, rdb, "api.example"); r != 0 {
		t.Fatalf("rate %v after the outage's first success; want restarted (idle)", r)
	}
	for range 20 {
		answer(t, p, retry.Success) // the server's burst
	}
	answer(t, p, retry.Throttled)
	if r := rate(t, rdb, "api.example"); r <= 0 {
		t.Error("the first throttle after a restart did not engage the key")
	}
}
