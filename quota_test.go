package retry

import (
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/backoff-jitter/retry/retrytest"
)

func TestParseQuota(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	h := func(kv ...string) http.Header {
		out := http.Header{}
		for i := 0; i < len(kv); i += 2 {
			out.Add(kv[i], kv[i+1])
		}
		return out
	}
	tests := []struct {
		name   string
		header http.Header
		want   Quota
		ok     bool
	}{
		{"nothing", h(), Quota{}, false},
		{"X-RateLimit, Unix reset and resource", h("X-RateLimit-Limit", "5000", "X-RateLimit-Remaining", "4999", "X-RateLimit-Reset", "1700000600", "X-RateLimit-Resource", "core"),
			Quota{Limit: 5000, Remaining: 4999, Reset: now.Add(10 * time.Minute), Resource: "core"}, true},
		{"X-RateLimit, seconds", h("X-RateLimit-Remaining", "3", "X-RateLimit-Reset", "30"), Quota{Remaining: 3, Reset: now.Add(30 * time.Second)}, true},
		{"X-RateLimit, a fraction", h("X-RateLimit-Remaining", "0", "X-RateLimit-Reset", "1700000001.5"), Quota{Remaining: 0, Reset: now.Add(1500 * time.Millisecond)}, true},
		{"X-RateLimit, reset past", h("X-RateLimit-Remaining", "7", "X-RateLimit-Reset", "1600000000"), Quota{Remaining: 7, Reset: now}, true},
		{"X-RateLimit, no reset", h("X-RateLimit-Remaining", "7"), Quota{}, false},
		{"X-RateLimit, negative", h("X-RateLimit-Remaining", "-1", "X-RateLimit-Reset", "30"), Quota{}, false},
		{"X-RateLimit, above its limit", h("X-RateLimit-Limit", "10", "X-RateLimit-Remaining", "11", "X-RateLimit-Reset", "30"), Quota{}, false},
		{"X-RateLimit, a bad limit", h("X-RateLimit-Limit", "ten", "X-RateLimit-Remaining", "1", "X-RateLimit-Reset", "30"), Quota{}, false},
		{"X-RateLimit, Unix milliseconds", h("X-RateLimit-Remaining", "1", "X-RateLimit-Reset", "1700000030000"), Quota{}, false},
		{"X-RateLimit, over a day", h("X-RateLimit-Remaining", "1", "X-RateLimit-Reset", "86401"), Quota{}, false},
		{"draft fields", h("RateLimit-Limit", "100", "RateLimit-Remaining", "40", "RateLimit-Reset", "20"), Quota{Limit: 100, Remaining: 40, Reset: now.Add(20 * time.Second)}, true},
		{"draft fields win over X-", h("RateLimit-Remaining", "40", "RateLimit-Reset", "20", "X-RateLimit-Remaining", "1", "X-RateLimit-Reset", "1"), Quota{Remaining: 40, Reset: now.Add(20 * time.Second)}, true},
		{"IETF, one policy", h("RateLimit", `"default";r=50;t=30`), Quota{Remaining: 50, Reset: now.Add(30 * time.Second)}, true},
		{"IETF, the tighter policy", h("RateLimit", `"hour";r=1000;t=3600, "minute";r=5;t=40`), Quota{Remaining: 5, Reset: now.Add(40 * time.Second)}, true},
		{"IETF, across lines", h("RateLimit", `"minute";r=5;t=40`, "RateLimit", `"day";r=1;t=80000`), Quota{Remaining: 1, Reset: now.Add(80000 * time.Second)}, true},
		{"IETF, no t", h("RateLimit", `"default";r=50`), Quota{}, false},
		{"IETF, malformed", h("RateLimit", `"default";r=50;t=30, 7`, "X-RateLimit-Remaining", "1", "X-RateLimit-Reset", "1"), Quota{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := ParseQuota(tt.header, now)
			if ok != tt.ok || got.Limit != tt.want.Limit || got.Remaining != tt.want.Remaining ||
				!got.Reset.Equal(tt.want.Reset) || got.Resource != tt.want.Resource {
				t.Errorf("ParseQuota(%v) = %+v, %v; want %+v, %v", tt.header, got, ok, tt.want, tt.ok)
			}
			if ok != got.Published() {
				t.Errorf("Published() = %v with ok %v", got.Published(), ok)
			}
		})
	}
}

func TestParseQuotaAllocatesNothing(t *testing.T) {
	now := time.Now()
	hs := []http.Header{
		{},
		{"X-Ratelimit-Remaining": {"4999"}, "X-Ratelimit-Reset": {"1700000600"}, "X-Ratelimit-Limit": {"5000"}},
		{"Ratelimit": {`"default";r=50;t=30`}},
	}
	for _, h := range hs {
		if n := testing.AllocsPerRun(100, func() { ParseQuota(h, now) }); n != 0 {
			t.Errorf("ParseQuota(%v): %v allocations", h, n)
		}
	}
}

func FuzzParseQuota(f *testing.F) {
	f.Add("5000", "4999", "1700000600", `"default";r=50;t=30`)
	f.Add("", "0", "1.5", `"a";r=0;t=0, "b";r=3;t=9`)
	now := time.Unix(1_700_000_000, 0)
	f.Fuzz(func(t *testing.T, limit, remaining, reset, ietf string) {
		for _, h := range []http.Header{
			{"X-Ratelimit-Limit": {limit}, "X-Ratelimit-Remaining": {remaining}, "X-Ratelimit-Reset": {reset}},
			{"Ratelimit": {ietf}},
		} {
			q, ok := ParseQuota(h, now)
			if !ok {
				continue
			}
			if q.Remaining < 0 || q.Limit < 0 || (q.Limit > 0 && q.Remaining > q.Limit) {
				t.Fatalf("ParseQuota(%v) = %+v", h, q)
			}
			if q.Reset.Before(now) || q.Reset.Sub(now) > maxQuotaReset {
				t.Fatalf("ParseQuota(%v): reset %v from now", h, q.Reset.Sub(now))
			}
		}
	})
}

// windowServer is a fixed-window quota on clock: limit requests per
// window, published in one family of fields; past it a 429 with the same
// fields (remaining 0).
type windowServer struct {
	clock   *fakeClock
	limit   int64
	window  time.Duration
	family  string
	mu      sync.Mutex
	start   time.Time
	used    int64
	refused int
}

func (s *windowServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	now := s.clock.Now()
	if s.start.IsZero() || now.Sub(s.start) >= s.window {
		s.start, s.used = now, 0
	}
	ok := s.used < s.limit
	if ok {
		s.used++
	} else {
		s.refused++
	}
	remaining, reset := s.limit-s.used, s.start.Add(s.window)
	s.mu.Unlock()
	secs := int64((reset.Sub(now) + time.Second - 1) / time.Second)
	h := w.Header()
	switch s.family {
	case "X-RateLimit":
		h.Set("X-RateLimit-Limit", strconv.FormatInt(s.limit, 10))
		h.Set("X-RateLimit-Remaining", strconv.FormatInt(remaining, 10))
		h.Set("X-RateLimit-Reset", strconv.FormatInt(reset.Add(time.Second-1).Unix(), 10)) // never early
	case "RateLimit-Remaining":
		h.Set("RateLimit-Limit", strconv.FormatInt(s.limit, 10))
		h.Set("RateLimit-Remaining", strconv.FormatInt(remaining, 10))
		h.Set("RateLimit-Reset", strconv.FormatInt(secs, 10))
	case "RateLimit":
		h.Set("RateLimit", fmt.Sprintf(`"default";r=%d;t=%d`, remaining, secs))
	}
	if !ok {
		w.WriteHeader(http.StatusTooManyRequests)
	}
}

// A client that would spend a window's quota at once spreads it over the
// window instead, and is never refused, whichever family of fields
// publishes the quota, over every protocol: 30 calls in a row against 10
// a window of 10 s take about three windows, on the fake clock.
func TestQuotaSpread(t *testing.T) {
	for _, family := range []string{"X-RateLimit", "RateLimit-Remaining", "RateLimit"} {
		for _, p := range protos {
			t.Run(family+"/"+p.name, func(t *testing.T) {
				clock := retrytest.NewClock(time.Unix(1_800_000_000, 0))
				s := &windowServer{clock: clock, limit: 10, window: 10 * time.Second, family: family}
				srv := p.server(t, s)
				rt := New(p.base(t, srv), WithClock(clock))
				begin := clock.Now()
				for i := range 30 {
					resp, _, err := do(t, rt, mustRequest(t, "GET", srv.URL, nil))
					require.NoError(t, err)
					require.Equal(t, http.StatusOK, resp.StatusCode, "call %d", i+1)
				}
				assert.Zero(t, s.refused, "answers that were 429")
				// The quota's pace is 10 calls in 10 s: 30 s for 30, each
				// window's spread to its reset (read up to a second late
				// where it is published in whole seconds from now).
				took := clock.Now().Sub(begin)
				assert.True(t, took >= 20*time.Second && took <= 36*time.Second, "30 calls took %v; want 20 to 36 s", took)
			})
		}
	}
}
