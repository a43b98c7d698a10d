package otelretry

import (
	"bytes"
	"context"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/backoff-jitter/retry"
	"github.com/backoff-jitter/retry/breaker"
	"github.com/backoff-jitter/retry/pace"
	"github.com/backoff-jitter/retry/retrytest"
)

// collected reads reader's metrics into name -> attribute set -> value:
// a counter's sum, a gauge's value, a histogram's count.
func collected(t *testing.T, reader sdkmetric.Reader) map[string]map[string]float64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	out := map[string]map[string]float64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			points := map[string]float64{}
			key := func(s attribute.Set) string { return s.Encoded(attribute.DefaultEncoder()) }
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				for _, p := range d.DataPoints {
					points[key(p.Attributes)] = float64(p.Value)
				}
			case metricdata.Gauge[int64]:
				for _, p := range d.DataPoints {
					points[key(p.Attributes)] = float64(p.Value)
				}
			case metricdata.Gauge[float64]:
				for _, p := range d.DataPoints {
					points[key(p.Attributes)] = p.Value
				}
			case metricdata.Histogram[float64]:
				for _, p := range d.DataPoints {
					points[key(p.Attributes)] = float64(p.Count)
				}
			}
			out[m.Name] = points
		}
	}
	return out
}

// A call that is throttled (Retry-After: 1) and then fails twice with a
// 500 records its four attempts, three retries by class, their waits
// (one from the server), and a give-up by reason; the budget and the
// Pacer's engaged keys (after a limit's refusals) are observed; a
// breaker's changes are counted.
func TestMetrics(t *testing.T) {
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1) == 1 {
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusTooManyRequests)
			return
		}
		w.WriteHeader(http.StatusInternalServerError)
	}))
	defer srv.Close()
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer mp.Shutdown(context.Background())
	budget := &retry.TokenBucket{}
	clk := retrytest.NewClock(time.Now())
	pacer := &pace.Pacer{Clock: clk}
	m, err := NewMetrics(MetricsOptions{MeterProvider: mp, Budget: budget, Pacer: pacer})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	rt := retry.New(nil, append(m.Options(), retry.WithBudget(budget), retry.WithPacer(pacer),
		retry.WithClock(clk), retry.WithRandom(func() float64 { return 0.5 }))...)
	defer rt.CloseIdleConnections()
	req, _ := http.NewRequest("GET", srv.URL, nil)
	resp, err := rt.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	// A limit's refusals engage the host's key: one success, then six
	// refusals at once.
	var turns []retry.Turn
	for range 7 {
		turn, err := pacer.Wait(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		turns = append(turns, turn)
	}
	turns[0].Done(retry.Feedback{Class: retry.Success})
	for _, turn := range turns[1:] {
		turn.Done(retry.Feedback{Class: retry.Throttled})
	}

	br := &breaker.Breaker{Failures: 1, OnStateChange: m.BreakerStateChange(nil)}
	turn, _ := br.Allow(req)
	turn.Done(retry.Feedback{Class: retry.Transient})

	got := collected(t, reader)
	want := map[string]map[string]float64{
		MetricAttempts: {"": 4},
		MetricRetries:  {"retry.class=throttled": 1, "retry.class=transient": 2},
		MetricWait: {
			"retry.class=throttled,retry.wait.from_server=true":  1,
			"retry.class=transient,retry.wait.from_server=false": 2,
		},
		MetricGiveUps:   {"retry.reason=attempts_exhausted": 1},
		MetricBudget:    {"": float64(budget.Tokens())},
		MetricBreaker:   {"retry.breaker.from=closed,retry.breaker.to=open": 1},
		MetricPacerKeys: {"": 1}, // the refusals engaged the host
	}
	for name, points := range want {
		for attrs, v := range points {
			if got[name][attrs] != v {
				t.Errorf("%s{%s} = %v; want %v (all: %v)", name, attrs, got[name][attrs], v, got[name])
			}
		}
	}
	if len(got[MetricPacerRate]) != 1 {
		t.Errorf("pacer rates %v; want the host's", got[MetricPacerRate])
	}
	if budget.Tokens() >= 500 {
		t.Errorf("the budget spent nothing: %d", budget.Tokens())
	}
}

// The Pacer's rate is reported for at most MaxPacerKeys keys; the count
// of keys it paces is whole.
func TestPacerKeysBounded(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer mp.Shutdown(context.Background())
	clk := retrytest.NewClock(time.Now())
	pacer := &pace.Pacer{Clock: clk}
	m, err := NewMetrics(MetricsOptions{MeterProvider: mp, Pacer: pacer, MaxPacerKeys: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	for _, host := range []string{"a.example", "b.example", "c.example"} {
		req := httptest.NewRequest("GET", "http://"+host+"/", nil)
		for _, c := range []retry.Class{retry.Success, retry.Throttled, retry.Throttled, retry.Throttled, retry.Throttled, retry.Throttled, retry.Throttled, retry.Throttled} {
			turn, err := pacer.Wait(context.Background(), req)
			if err != nil {
				t.Fatal(err)
			}
			turn.Done(retry.Feedback{Class: c})
		}
		if _, engaged := pacer.Rate(host); !engaged {
			t.Fatalf("%s did not engage", host)
		}
	}
	got := collected(t, reader)
	if len(got[MetricPacerRate]) != 2 || got[MetricPacerKeys][""] != 3 {
		t.Errorf("rates %v, keys %v; want 2 rates of 3 keys", got[MetricPacerRate], got[MetricPacerKeys])
	}
}

// A hook records without allocating: the attribute sets are made once.
func TestHooksDoNotAllocate(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer mp.Shutdown(context.Background())
	m, err := NewMetrics(MetricsOptions{MeterProvider: mp})
	if err != nil {
		t.Fatal(err)
	}
	req := httptest.NewRequest("GET", "http://api.example/", nil)
	onRetry, onDone := m.RecordRetry(nil), m.RecordDone(nil)
	e := retry.Event{Request: req, Attempt: 1, Class: retry.Transient, Delay: 50 * time.Millisecond}
	s := retry.Summary{Request: req, Attempts: 4, Class: retry.Transient, Reason: retry.StopAttempts}
	onRetry(e) // the first record of a series makes it
	onDone(s)
	if a := testing.AllocsPerRun(1000, func() { onRetry(e) }); a > 0 {
		t.Errorf("OnRetry: %v allocations", a)
	}
	if a := testing.AllocsPerRun(1000, func() { onDone(s) }); a > 0 {
		t.Errorf("OnDone: %v allocations", a)
	}
}

// A body cut midway and resumed is counted as a resume that spliced the
// rest on.
func TestMetricsResumes(t *testing.T) {
	data := bytes.Repeat([]byte("0123456789"), 500)
	var n atomic.Int32
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("ETag", `"v1"`)
		if n.Add(1) == 1 {
			w.Header().Set("Content-Length", strconv.Itoa(len(data)))
			w.Write(data[:1000])
			w.(http.Flusher).Flush()
			panic(http.ErrAbortHandler) // the connection is cut
		}
		http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(data))
	}))
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.Start()
	defer srv.Close()
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer mp.Shutdown(context.Background())
	m, err := NewMetrics(MetricsOptions{MeterProvider: mp})
	if err != nil {
		t.Fatal(err)
	}
	rt := retry.New(nil, m.Options()...)
	defer rt.CloseIdleConnections()
	req, _ := http.NewRequest("GET", srv.URL, nil)
	resp, err := rt.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("read %d bytes, %v; want the %d of the resource", len(got), err, len(data))
	}
	if v := collected(t, reader)[MetricResumes]["retry.resume.resumed=true"]; v != 1 {
		t.Errorf("%s{resumed} = %v; want 1", MetricResumes, v)
	}
}

func TestNegativeMaxPacerKeys(t *testing.T) {
	_, err := NewMetrics(MetricsOptions{MaxPacerKeys: -1})
	if err == nil || err.Error() != "otelretry: MaxPacerKeys -1 is negative" {
		t.Errorf("NewMetrics = %v", err)
	}
}
