// Command prometheus exports a retry.Transport's metrics to Prometheus
// through OpenTelemetry (package otelretry's Metrics and the OTel
// Prometheus exporter). It runs calls against a local server that
// throttles and fails some of them, then reads its own /metrics endpoint,
// as Prometheus would scrape it, and prints the retry series:
//
//	cd examples/prometheus && go run .
package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	"go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/backoff-jitter/retry"
	"github.com/backoff-jitter/retry/breaker"
	"github.com/backoff-jitter/retry/otelretry"
	"github.com/backoff-jitter/retry/pace"
)

func main() {
	if err := run(os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

// instrumented returns a Transport whose retries, budget, Pacer and
// breaker are recorded by metrics made from mp. The budget and the Pacer
// are given explicitly, so that the metrics can observe them.
func instrumented(mp metric.MeterProvider) (*retry.Transport, *otelretry.Metrics, error) {
	budget, pacer := &retry.TokenBucket{}, &pace.Pacer{}
	metrics, err := otelretry.NewMetrics(otelretry.MetricsOptions{
		MeterProvider: mp, // nil: otel.GetMeterProvider()
		Budget:        budget,
		Pacer:         pacer,
	})
	if err != nil {
		return nil, nil, err
	}
	rt := retry.New(nil, append(metrics.Options(), retry.WithBudget(budget), retry.WithPacer(pacer),
		retry.WithBreaker(&breaker.Breaker{OnStateChange: metrics.BreakerStateChange(nil)}))...)
	return rt, metrics, nil
}

// run makes 40 calls to a flaky local server through an instrumented
// Transport, and prints the retry series of the /metrics it serves.
func run(out io.Writer) error {
	// The API: every third request is refused with Retry-After: 0 (a
	// retry honours it at once), every seventh fails with a 500.
	var n atomic.Int64
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch i := n.Add(1); {
		case i%3 == 0:
			w.Header().Set("Retry-After", "0")
			w.WriteHeader(http.StatusTooManyRequests)
		case i%7 == 0:
			w.WriteHeader(http.StatusInternalServerError)
		default:
			io.WriteString(w, "ok")
		}
	}))
	defer api.Close()

	// OpenTelemetry's metrics, read by the Prometheus exporter into a
	// registry of their own.
	registry := prometheus.NewRegistry()
	exporter, err := otelprom.New(otelprom.WithRegisterer(registry), otelprom.WithoutScopeInfo())
	if err != nil {
		return err
	}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(exporter))
	defer mp.Shutdown(context.Background())

	rt, metrics, err := instrumented(mp)
	if err != nil {
		return err
	}
	defer metrics.Close()
	defer rt.CloseIdleConnections()
	client := &http.Client{Transport: rt, Timeout: 10 * time.Second}
	for range 40 {
		resp, err := client.Get(api.URL)
		if err != nil {
			return err
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}

	// The endpoint Prometheus scrapes, on loopback, read once.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: promhttp.HandlerFor(registry, promhttp.HandlerOpts{}), ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(ln)
	defer srv.Close()
	resp, err := http.Get("http://" + ln.Addr().String() + "/metrics")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	fmt.Fprintf(out, "40 calls; the API answered %d requests. From /metrics:\n", n.Load())
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "retry_client_") && !strings.Contains(line, "_bucket{") {
			fmt.Fprintln(out, line)
		}
	}
	return sc.Err()
}
