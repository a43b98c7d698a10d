package main

import (
	"bytes"
	"encoding/csv"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// TestRunSmall runs every strategy of each -api once against the
// in-process server, with few clients, and checks that each finished every
// request, that the table names each strategy, and that the series and the
// chart account for every attempt.
func TestRunSmall(t *testing.T) {
	for _, api := range []string{"get", "route53"} {
		t.Run(api, func(t *testing.T) {
			dir := t.TempDir()
			c := config{api: api, server: "fake", clients: 10, requests: 2, rate: 400, rounds: 1, limit: 20 * time.Second,
				interval: 10 * time.Millisecond, series: filepath.Join(dir, "series.csv"), svg: filepath.Join(dir, "pacing.svg")}
			if err := c.validate(); err != nil {
				t.Fatal(err)
			}
			list, err := c.strategies()
			if err != nil {
				t.Fatal(err)
			}
			var out bytes.Buffer
			if err := run(c, &out); err != nil {
				t.Fatalf("run: %v", err)
			}
			for _, s := range list {
				line := ""
				for _, l := range strings.Split(out.String(), "\n") {
					if strings.Contains(l, s.name+" ") {
						line = l
					}
				}
				if line == "" {
					t.Fatalf("no row for %s in:\n%s", s.name, out.String())
				}
				// The "failed" column is the third number on the row.
				if f := strings.Fields(line); len(f) < 4 || f[3] != "0" {
					t.Errorf("%s: requests failed: %q", s.name, line)
				}
			}
			checkSeriesFile(t, c.series, list)
			svg, err := os.ReadFile(c.svg)
			if err != nil {
				t.Fatal(err)
			}
			if want := sharedBy(c); !strings.Contains(string(svg), want) {
				t.Errorf("the chart does not say %q", want)
			}
			if series, err := svgSeries(string(svg)); err != nil {
				t.Error(err)
			} else if len(series) != len(list) {
				t.Errorf("the chart has series %q; want one per strategy", series)
			}
		})
	}
}

// TestOnly runs the strategies -only names, in -only's order, once
// each, and refuses a name -api does not have.
func TestOnly(t *testing.T) {
	c := config{api: "route53", only: "SDK(adaptive), Transport+Pacer(CUBIC),SDK(adaptive)"}
	list, err := c.strategies()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range list {
		names = append(names, s.name)
	}
	if want := []string{"SDK(adaptive)", "Transport+Pacer(CUBIC)"}; !slices.Equal(names, want) {
		t.Errorf("-only %q ran %q; want %q", c.only, names, want)
	}
	c.only = "FullJitter"
	if _, err := c.strategies(); err == nil || !strings.Contains(err.Error(), "FullJitter") {
		t.Errorf("-only FullJitter with -api route53: %v; want an error naming it", err)
	}
}

// checkSeriesFile checks that the -series file parses and has the 20
// requests of every strategy of list accepted, once each.
func checkSeriesFile(t *testing.T, path string, list []strategy) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rows, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	accepted := map[string]int{}
	for _, row := range rows[1:] {
		n, err := strconv.Atoi(row[3])
		if err != nil {
			t.Fatalf("row %q: %v", row, err)
		}
		accepted[row[0]] += n
	}
	for _, s := range list {
		if accepted[s.name] != 20 {
			t.Errorf("%s: %d attempts accepted in the series; want 20", s.name, accepted[s.name])
		}
	}
}

func TestValidate(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []config{
		{api: "soap", server: "fake", clients: 1, requests: 1, rate: 1, rounds: 1, limit: time.Second, interval: time.Second},
		{api: "get", only: "SDK(adaptive)", server: "fake", clients: 1, requests: 1, rate: 1, rounds: 1, limit: time.Second, interval: time.Second},
		{api: "get", server: "apache", clients: 1, requests: 1, rate: 1, rounds: 1, limit: time.Second},
		{api: "get", server: "fake", clients: 0, requests: 1, rate: 1, rounds: 1, limit: time.Second},
		{api: "get", server: "fake", clients: 1, requests: 1, rate: -1, rounds: 1, limit: time.Second, interval: time.Second},
		{api: "get", server: "nginx", clients: 1, requests: 1, rate: 0, rounds: 1, limit: time.Second, interval: time.Second},
		{api: "get", server: "nginx", clients: 1, requests: 1, rate: 5, rounds: 1, limit: time.Second, interval: time.Second, shed: 0.1},
		{api: "get", server: "fake", clients: 1, requests: 1, rate: 5, rounds: 1, limit: time.Second, interval: time.Second, shed: 0.95},
		{api: "get", server: "fake", clients: 1, requests: 1, rate: 1, rounds: 1, limit: -time.Second, interval: time.Second},
		{api: "get", server: "fake", clients: 1, requests: 1, rate: 1, rounds: 1, limit: time.Second, interval: time.Second, known: 0.3},
		{api: "get", server: "fake", clients: 1, requests: 1, rate: 1, rounds: 1, limit: time.Second, interval: time.Second, burst: -1},
		{api: "get", server: "fake", clients: 1, requests: 1, rate: 1, rounds: 1, limit: time.Second, interval: time.Second, burst: 1001},
		{api: "get", server: "fake", clients: 1, requests: 1, rate: 1, rounds: 1, limit: time.Second, interval: 0},
		{api: "get", server: "fake", clients: 1, requests: 1, rate: 1, rounds: 1, limit: time.Second, interval: time.Millisecond},
		{api: "get", server: "fake", clients: 1, requests: 1, rate: 1, rounds: 1, limit: time.Second, interval: 15500 * time.Microsecond},
		{api: "get", server: "fake", clients: 1, requests: 1, rate: 1, rounds: 1, limit: time.Second, interval: time.Minute},
		{api: "get", server: "fake", clients: 1, requests: 1, rate: 20, rounds: 1, limit: time.Second, interval: time.Second, window: 10 * time.Millisecond},
		{api: "get", server: "fake", clients: 1, requests: 1, rate: 20, rounds: 1, limit: time.Second, interval: time.Second, window: 2 * time.Minute},
		{api: "get", server: "nginx", clients: 1, requests: 1, rate: 20, rounds: 1, limit: time.Second, interval: time.Second, window: time.Second},
		{api: "get", server: "fake", clients: 1, requests: 1, rate: 20, rounds: 1, limit: time.Second, interval: time.Second, window: time.Second, burst: 5},
		{api: "get", server: "fake", clients: 1, requests: 1, rate: 5, rounds: 1, limit: time.Second, interval: time.Second, window: 100 * time.Millisecond},
		{api: "get", server: "fake", clients: 1, requests: 1, rate: 1, rounds: 1, limit: time.Second, interval: time.Second, svg: "/no/such/dir/pacing.svg"},
		{api: "get", server: "fake", clients: 1, requests: 1, rate: 1, rounds: 1, limit: time.Second, interval: time.Second, series: filepath.Join(file, "series.csv")},
	} {
		if err := c.validate(); err == nil {
			t.Errorf("validate(%+v) = nil; want an error", c)
		}
	}
}

// The -csv rows carry each run's p50 and p99 request times, from its own
// latencies, whatever their order.
func TestCSVRows(t *testing.T) {
	var lat []time.Duration
	for i := 100; i >= 1; i-- {
		lat = append(lat, time.Duration(i)*time.Millisecond)
	}
	rows := csvRows([]result{{strategy: "S", round: 2, requests: 100, attempts: 120, refused: 20, elapsed: 3 * time.Second, latencies: lat},
		{strategy: "S", round: 3, requests: 1, attempts: 1, elapsed: 41234567 * time.Nanosecond, latencies: lat[:1]}})
	want := [][]string{
		{"strategy", "round", "requests", "attempts", "refused", "failed", "elapsed_ms", "p50_ms", "p99_ms"},
		{"S", "2", "100", "120", "20", "0", "3000", "51", "100"},
		{"S", "3", "1", "1", "0", "0", "41.234", "100", "100"},
	}
	if !slices.Equal(rows[0], want[0]) || !slices.Equal(rows[1], want[1]) || !slices.Equal(rows[2], want[2]) || len(rows) != 3 {
		t.Errorf("rows %q; want %q", rows, want)
	}
	if lat[0] != 100*time.Millisecond {
		t.Error("csvRows sorted the run's own latencies")
	}
}

func TestMedianRatio(t *testing.T) {
	ms := func(v ...int) []time.Duration {
		d := make([]time.Duration, len(v))
		for i, x := range v {
			d[i] = time.Duration(x) * time.Millisecond
		}
		return d
	}
	rnd := rand.New(rand.NewPCG(1, 2))
	var base, double []time.Duration
	for i := range 40 {
		base = append(base, ms(40+i%7)...)
		double = append(double, ms(2*(40+i%7))...)
	}
	r, lo, hi := medianRatio(base, base, rnd)
	assert.Equal(t, 1.0, r)
	assert.LessOrEqual(t, lo, 1.0)
	assert.GreaterOrEqual(t, hi, 1.0)
	r, lo, hi = medianRatio(double, base, rnd)
	assert.Equal(t, 2.0, r)
	assert.Greater(t, lo, 1.5, "twice as long is no noise")
	assert.Less(t, hi, 2.5)

	r, _, _ = medianRatio(nil, base, rnd)
	assert.Zero(t, r)
	r, _, _ = medianRatio(base, ms(0, 0, 0), rnd)
	assert.Zero(t, r)
	assert.Equal(t, 45*time.Millisecond, median(ms(50, 40, 45)))
	assert.Equal(t, 50*time.Millisecond, median(ms(50, 40)), "the upper middle, as quantile")
}

func TestTimeLimit(t *testing.T) {
	c := config{clients: 10, requests: 50, rate: 5}
	assert.Equal(t, 300*time.Second, c.timeLimit(), "three times the ideal 100 s")
	c.rate = 100
	assert.Equal(t, time.Minute, c.timeLimit(), "a minute at least")
	c.rate = 0
	assert.Equal(t, time.Minute, c.timeLimit(), "no limit, no ideal")
	c.limit = time.Second
	assert.Equal(t, time.Second, c.timeLimit())
}

func TestKnownRate(t *testing.T) {
	c := config{rate: 100}
	assert.Equal(t, 100.0, c.knownRate())
	c.known = 0.94
	assert.InDelta(t, 94, c.knownRate(), 1e-9)
}

// The fake server with -burst accepts that many requests at once over
// its rate (a token bucket of burst+1), and refuses the one after.
func TestFakeServerBurst(t *testing.T) {
	for _, burst := range []int{0, 3} {
		srv, err := startServer(config{server: "fake", rate: 1, burst: burst})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(srv.close)
		if name := srv.name(); !strings.Contains(name, burstName(burst)) {
			t.Errorf("name %q does not say the burst", name)
		}
		client := &http.Client{Transport: &http.Transport{}, Timeout: 10 * time.Second}
		t.Cleanup(client.CloseIdleConnections)
		for i := 0; i < burst+2; i++ {
			resp, err := client.Get(srv.url())
			if err != nil {
				t.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			want := http.StatusOK
			if i == burst+1 {
				want = http.StatusTooManyRequests
			}
			if resp.StatusCode != want {
				t.Errorf("burst %d, request %d: %d; want %d", burst, i+1, resp.StatusCode, want)
			}
		}
	}
}

// The fake server with -window accepts rate × window requests at the
// start of each window, and refuses the rest until the next.
func TestFixedWindow(t *testing.T) {
	w := &fixedWindow{window: 200 * time.Millisecond, quota: 3}
	for i := range 4 {
		if got := w.Allow(); got != (i < 3) {
			t.Fatalf("request %d of the first window: %v", i+1, got)
		}
	}
	w.mu.Lock()
	w.first = w.first.Add(-w.window) // the next window has begun
	w.mu.Unlock()
	for i := range 4 {
		if got := w.Allow(); got != (i < 3) {
			t.Fatalf("request %d of the second window: %v", i+1, got)
		}
	}
	srv, err := startServer(config{server: "fake", rate: 20, window: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.close)
	if name := srv.name(); !strings.Contains(name, "fixed window limiter (20 every 1s)") {
		t.Errorf("name %q does not say the window", name)
	}
}

// Each run starts with a full bucket: the pause between runs refills 20
// tokens, or the whole bucket when the burst is larger.
func TestRefillPause(t *testing.T) {
	assert.Zero(t, refillPause(0, 10), "no limit")
	assert.Equal(t, 200*time.Millisecond, refillPause(100, 0))
	assert.Equal(t, 200*time.Millisecond, refillPause(100, 10))
	assert.Equal(t, 500*time.Millisecond, refillPause(100, 49), "a bucket of 50")
	assert.Equal(t, 4*time.Second, refillPause(5, 5))
}
