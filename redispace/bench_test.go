package redispace

import (
	"context"
	"net/http"
	"regexp"
	"strconv"
	"testing"

	"github.com/backoff-jitter/retry"
	"github.com/redis/go-redis/v9"
)

// BenchmarkAttempt is one attempt through the fleet Pacer, Wait and a
// success's Turn.Done, one after another, against a redis-server of its
// own: on a key nobody throttled (idle), and on one engaged at a rate so
// high that no turn waits (engaged). Besides the time, it reports the
// script calls an attempt makes and the Redis time they take
// (INFO commandstats), which is what one Redis serves a fleet:
//
//	go test ./redispace -run '^$' -bench BenchmarkAttempt -count 6
func BenchmarkAttempt(b *testing.B) {
	for _, engaged := range []bool{false, true} {
		name := "idle"
		if engaged {
			name = "engaged"
		}
		b.Run(name, func(b *testing.B) {
			rdb, _ := startRedis(b)
			p := &Pacer{Client: rdb, InitialWindow: -1, MinRate: 1e9}
			req, err := http.NewRequest(http.MethodGet, "http://api.example/", nil)
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			attempt := func(f retry.Feedback) {
				turn, err := p.Wait(ctx, req)
				if err != nil {
					b.Fatal(err)
				}
				turn.Done(f)
			}
			if engaged {
				// A throttle that says when to come back engages the
				// key at once, at MinRate: turns a nanosecond apart.
				attempt(retry.Feedback{Class: retry.Throttled, Hinted: true})
			}
			attempt(retry.Feedback{Class: retry.Success}) // the scripts loaded
			if err := rdb.ConfigResetStat(ctx).Err(); err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			for range b.N {
				attempt(retry.Feedback{Class: retry.Success})
			}
			b.StopTimer()
			calls, usec := scriptStats(b, rdb)
			b.ReportMetric(float64(calls)/float64(b.N), "calls/attempt")
			b.ReportMetric(float64(usec)/float64(b.N), "redis-µs/attempt")
			if _, on, _ := p.Rate(ctx, "api.example"); on != engaged {
				b.Fatalf("engaged %v at the end; want %v", on, engaged)
			}
		})
	}
}

var cmdstat = regexp.MustCompile(`cmdstat_(?:evalsha|eval):calls=(\d+),usec=(\d+)`)

// scriptStats returns the script calls Redis counted since its stats
// were reset, and the microseconds it spent in them.
func scriptStats(b *testing.B, rdb *redis.Client) (calls, usec int64) {
	b.Helper()
	info, err := rdb.Info(context.Background(), "commandstats").Result()
	if err != nil {
		b.Fatal(err)
	}
	for _, m := range cmdstat.FindAllStringSubmatch(info, -1) {
		c, _ := strconv.ParseInt(m[1], 10, 64)
		u, _ := strconv.ParseInt(m[2], 10, 64)
		calls += c
		usec += u
	}
	return calls, usec
}
