package main

import (
	"bytes"
	"context"
	"encoding/xml"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// tiny is a storm small enough for go test: 12 clients, a 50 ms outage,
// 200 requests a second.
func tiny() Config {
	return Config{
		Clients: 12, Rate: 200, Burst: 4, Concurrency: 4, Service: time.Millisecond,
		Outage: 50 * time.Millisecond, Reject: Reject429, RetryAfter: 1,
		Deadline: 2500 * time.Millisecond, Interval: 20 * time.Millisecond,
		Base: 5 * time.Millisecond, Cap: 200 * time.Millisecond,
	}
}

// TestEveryStrategy runs the whole harness on a tiny storm: every
// strategy, the tables, the CSV files and the charts.
func TestEveryStrategy(t *testing.T) {
	cfg := tiny()
	dir := t.TempDir()
	var out bytes.Buffer
	if err := run(context.Background(), cfg, []int{cfg.Clients}, Strategies, dir, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	for _, s := range Strategies {
		if !strings.Contains(out.String(), s.Name) {
			t.Errorf("the table lacks %s:\n%s", s.Name, out.String())
		}
	}
	for _, name := range []string{"storm.csv", "series.csv", "storm.txt", "storm-12.svg"} {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil || len(b) == 0 {
			t.Errorf("%s: %d bytes, %v", name, len(b), err)
		}
	}
	checkXML(t, filepath.Join(dir, "storm-12.svg"))
}

func checkXML(t *testing.T, path string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	d := xml.NewDecoder(f)
	for {
		if _, err := d.Token(); err == io.EOF {
			return
		} else if err != nil {
			t.Fatalf("%s is not well-formed: %v", path, err)
		}
	}
}

// TestBackoffStrategiesFinish checks the accounting of a run: with room to
// spare, every client of a backoff strategy finishes, the server saw every
// attempt, and each finished client got one success.
func TestBackoffStrategiesFinish(t *testing.T) {
	cfg := tiny()
	for _, name := range []string{"no-backoff", "full-jitter", "decorrelated", "full-jitter+budget"} {
		s, _ := StrategyNamed(name)
		r, err := Run(context.Background(), cfg, s)
		if err != nil {
			t.Fatal(err)
		}
		if n := r.Unfinished(); n != 0 {
			t.Errorf("%s: %d clients unfinished", name, n)
		}
		if r.Successes != int64(cfg.Clients) {
			t.Errorf("%s: %d successes; want %d", name, r.Successes, cfg.Clients)
		}
		if r.Attempts <= int64(cfg.Clients) {
			t.Errorf("%s: %d attempts; the outage alone makes more than %d", name, r.Attempts, cfg.Clients)
		}
		var sum int64
		for _, v := range r.Series {
			sum += v
		}
		if sum != r.Attempts || len(r.Series) != len(r.OK) {
			t.Errorf("%s: the series add up to %d; want %d", name, sum, r.Attempts)
		}
		if d, ok := r.Quantile(1); !ok || d < cfg.Outage {
			t.Errorf("%s: the last client finished at %v; want after the %v outage", name, d, cfg.Outage)
		}
	}
}

// TestBudgetInAnOutage checks both budget strategies against a long
// outage with retries 1 ms apart: the budget's 35 retries of the outage's
// bare 503s (14 tokens each, a transient retry's price) are spent in it.
// A client that is refused and does not insist gives up; one that
// insists finishes after the outage.
func TestBudgetInAnOutage(t *testing.T) {
	cfg := tiny()
	cfg.Clients, cfg.Outage, cfg.Base, cfg.Cap = 20, 400*time.Millisecond, time.Millisecond, 2*time.Millisecond

	fail, _ := StrategyNamed("full-jitter+budget/fail")
	r, err := Run(context.Background(), cfg, fail)
	if err != nil {
		t.Fatal(err)
	}
	if r.GaveUp != cfg.Clients || r.Refused != int64(cfg.Clients) || r.Successes != 0 {
		t.Errorf("without reissue: %d gave up, %d refused, %d successes; want %d, %d, 0", r.GaveUp, r.Refused, r.Successes, cfg.Clients, cfg.Clients)
	}
	if want := int64(cfg.Clients + 35); r.Attempts != want {
		t.Errorf("without reissue: %d attempts; want %d: one each and the 35 retries the budget paid for", r.Attempts, want)
	}

	insist, _ := StrategyNamed("full-jitter+budget")
	r, err = Run(context.Background(), cfg, insist)
	if err != nil {
		t.Fatal(err)
	}
	if r.Unfinished() != 0 || r.Refused == 0 || r.Reissued != r.Refused {
		t.Errorf("with reissue: %d unfinished, %d refused, %d reissued; want 0, some, as many", r.Unfinished(), r.Refused, r.Reissued)
	}
}

func TestQuantile(t *testing.T) {
	r := Result{Completion: []time.Duration{1, 2, 3, 4, -1}}
	for _, tt := range []struct {
		q    float64
		want time.Duration
		ok   bool
	}{{0.2, 1, true}, {0.5, 3, true}, {0.8, 4, true}, {0.99, -1, false}, {1, -1, false}} {
		if got, ok := r.Quantile(tt.q); got != tt.want || ok != tt.ok {
			t.Errorf("Quantile(%v) = %v, %v; want %v, %v", tt.q, got, ok, tt.want, tt.ok)
		}
	}
	if r.Unfinished() != 1 || r.Finished() != 4 {
		t.Errorf("Unfinished, Finished = %d, %d; want 1, 4", r.Unfinished(), r.Finished())
	}
}

func TestYScale(t *testing.T) {
	for _, tt := range []struct {
		peaks []int64
		want  float64
	}{
		{[]int64{100, 1200, 900}, 2000},
		{[]int64{4600, 1250, 1000}, 2000}, // the outlier is clipped
		{[]int64{30}, 200},                // never below capacity
	} {
		var rs []Result
		for _, p := range tt.peaks {
			rs = append(rs, Result{Series: []int64{p}})
		}
		if got := yScale(rs, 100); got != tt.want {
			t.Errorf("yScale(%v) = %v; want %v", tt.peaks, got, tt.want)
		}
	}
}
