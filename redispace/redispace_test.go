package redispace

import (
	"context"
	"errors"
	"flag"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/backoff-jitter/retry"
	"github.com/backoff-jitter/retry/internal/pacecore"
	"github.com/backoff-jitter/retry/internal/pacesim"
	"github.com/backoff-jitter/retry/internal/pacesim/storesim"
	"github.com/backoff-jitter/retry/retrytest"
	"github.com/redis/go-redis/v9"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var trace = flag.String("trace", "", "write the whole trace of the scenario of this name to testdata/traces/")

// store is a Pacer as a pacecore.Store, for the simulator.
type store struct{ p *Pacer }

func (s store) Open(key string) pacecore.Handle {
	s.p.once.Do(s.p.init)
	return &handle{p: s.p, key: s.p.prefix() + key}
}

// TestConformance replays golden scenarios through Redis, on the
// simulator's clock, against the traces package pace's memory store
// records: the fleet decides as one process does. (One seed of each
// family but the long shedding runs: every step is a few calls to Redis.)
func TestConformance(t *testing.T) {
	rdb, _ := startRedis(t)
	n := 0
	newKey := func(setup pacesim.Setup) pacesim.Key {
		var now time.Time
		clock := func() time.Time { return now }
		n++
		window := setup.InitialWindow
		if window <= 0 {
			window = -1 // the scenarios' zero is no slow start; redispace's is a window
		}
		p := &Pacer{Client: rdb, Prefix: "conform:" + strings.Repeat("x", n) + ":", InitialWindow: window,
			now: clock, redisNow: clock, sleep: func(context.Context, time.Duration) error { return nil }}
		if setup.AIMD {
			p.Adapt = 1
		}
		return &storesim.Key{Store: store{p}, Name: "api.example", Set: func(t time.Time) { now = t },
			Read: func() pacesim.State {
				snap, err := p.load(context.Background(), p.prefix()+"api.example")
				if err != nil {
					t.Fatal(err)
				}
				st := snap.state(&p.cfg)
				return pacesim.State{Rate: st.Rate(snap.now), Engaged: st.Engaged(), Mode: uint8(st.Mode()), Gen: st.Gen()}
			}}
	}
	pick := func(name string) bool {
		long := strings.HasPrefix(name, "queue/") || strings.HasPrefix(name, "clients40/") || strings.HasPrefix(name, "after-shedding/")
		return !long && (strings.HasSuffix(name, "/seed0") || !strings.Contains(name, "/seed"))
	}
	if os.Getenv(serverEnv) == "" {
		// The embedded Redis is slower: the families of a few hundred
		// steps (CI replays the rest against the real server).
		pick = func(name string) bool {
			for _, f := range []string{"steady/", "outage/", "moves/", "window/a0/q10/", "limit/a0/5+0/"} {
				if strings.HasPrefix(name, f) && (strings.HasSuffix(name, "/seed0") || !strings.Contains(name, "/seed")) {
					return true
				}
			}
			return false
		}
	}
	if testing.Short() {
		pick = func(name string) bool {
			return strings.HasPrefix(name, "limit/a0/5+0") && strings.HasSuffix(name, "/seed0")
		}
	}
	pacesim.Check(t, newKey, pick, false, *trace)
}

func request(t testing.TB, host string) *http.Request {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, "https://"+host+"/", nil)
	if err != nil {
		t.Fatal(err)
	}
	return req
}

// engage engages p's key of req: an accepted answer, then refusals.
func engage(t *testing.T, p *Pacer, req *http.Request) {
	t.Helper()
	answers := []retry.Class{retry.Success, retry.Throttled, retry.Throttled, retry.Throttled, retry.Throttled, retry.Throttled}
	for _, c := range answers {
		turn, err := p.Wait(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		turn.Done(retry.Feedback{Class: c})
	}
}

// A key nobody refused is not paced; refusals that say a limit engage it
// for the whole fleet: a second process's Pacer, on the same Redis, paces
// the key at the rate the first learned.
func TestFleetSharesTheRate(t *testing.T) {
	rdb, _ := startRedis(t)
	a, b := &Pacer{Client: rdb}, &Pacer{Client: rdb}
	req := request(t, "api.example")
	rate, engaged, err := a.Rate(context.Background(), "api.example")
	if err != nil || engaged {
		t.Fatalf("a new key: rate %v, engaged %v, %v", rate, engaged, err)
	}
	turn, err := a.Wait(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if _, paced := turn.(interface{ Paced() bool }); paced && turn.(interface{ Paced() bool }).Paced() {
		t.Error("a new key's turn was paced")
	}
	turn.Done(retry.Feedback{Class: retry.Success})
	engage(t, a, req)
	ra, ea, err := a.Rate(context.Background(), "api.example")
	if err != nil || !ea {
		t.Fatalf("after refusals: engaged %v, %v", ea, err)
	}
	rb, eb, err := b.Rate(context.Background(), "api.example")
	if err != nil || !eb || math.Abs(rb-ra) > ra/100 {
		// (Read a moment later: the rate grows with time.)
		t.Fatalf("the other process reads rate %v (engaged %v, %v); want about %v", rb, eb, err, ra)
	}
	turn, err = b.Wait(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if !turn.(interface{ Paced() bool }).Paced() {
		t.Error("the other process's turn was not paced")
	}
	turn.Done(retry.Feedback{Class: retry.Success})
}

// A wait that would end past the deadline is refused at once, as a
// TurnTooLate, by the fleet's schedule.
func TestTurnPastTheDeadline(t *testing.T) {
	rdb, _ := startRedis(t)
	// The turns are taken without waiting for them: the schedule moves
	// out one interval a turn.
	clock := retrytest.NewClock(time.Now())
	p := &Pacer{Client: rdb, now: clock.Now, redisNow: clock.Now, sleep: clock.Sleep}
	req := request(t, "slow.example")
	engage(t, p, req)
	for range 200 {
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		turn, err := p.Wait(ctx, req)
		cancel()
		var late *retry.TurnTooLate
		if errors.As(err, &late) {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		turn.Done(retry.Feedback{Class: retry.Success})
	}
	t.Error("no turn refused for its deadline")
}

// When Redis is down, every attempt is paced by Fallback, and OnFallback
// hears of it; the Pacer tries Redis again after RetryAfter.
func TestFallback(t *testing.T) {
	rdb, stop := startRedis(t)
	var fallbacks atomic.Int32
	p := &Pacer{Client: rdb, Timeout: 50 * time.Millisecond, RetryAfter: time.Hour, OnFallback: func(error) { fallbacks.Add(1) }}
	req := request(t, "api.example")
	stop()
	for range 3 {
		turn, err := p.Wait(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		turn.Done(retry.Feedback{Class: retry.Success})
	}
	if n := fallbacks.Load(); n < 1 || n > 2 {
		// Once for a refused call; twice if the first ran out of Timeout
		// while dialling (see trip).
		t.Errorf("OnFallback called %d times; want 1 or 2, then the Pacer keeps to Fallback", n)
	}
	if !p.usingFallback() {
		t.Error("not using Fallback after Redis failed")
	}
}

func TestValidate(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}) // never dialled
	defer rdb.Close()
	for _, p := range []*Pacer{{}, {Client: rdb, MinRate: -1}, {Client: rdb, Timeout: -1}, {Client: rdb, Adapt: 9}} {
		if err := p.Validate(); err == nil || !strings.HasPrefix(err.Error(), "redispace: Pacer") {
			t.Errorf("%+v: Validate() = %v", p, err)
		}
	}
	if err := (&Pacer{Client: rdb}).Validate(); err != nil {
		t.Error(err)
	}
}

// A Pacer without a Key counts a request against the Transport's key
// (retry.RequestKey): a tenant's refusals engage the tenant's key.
func TestTransportKey(t *testing.T) {
	rdb, _ := startRedis(t)
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1) > 1 {
			w.WriteHeader(http.StatusTooManyRequests)
		}
	}))
	defer srv.Close()
	p := &Pacer{Client: rdb}
	rt := retry.New(nil, retry.WithPacer(p), retry.WithMaxAttempts(1),
		retry.WithKey(func(*http.Request) string { return "tenant" }))
	defer rt.CloseIdleConnections()
	for range 6 {
		req, _ := http.NewRequest(http.MethodGet, srv.URL, nil)
		resp, err := rt.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	if _, engaged, err := p.Rate(context.Background(), "tenant"); err != nil || !engaged {
		t.Errorf("the tenant's key: engaged %v, %v", engaged, err)
	}
	host := strings.TrimPrefix(srv.URL, "http://")
	if _, engaged, err := p.Rate(context.Background(), host); err != nil || engaged {
		t.Errorf("the host's key: engaged %v, %v", engaged, err)
	}
}
