package otelretry_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/backoff-jitter/retry"
	"github.com/backoff-jitter/retry/otelretry"
)

// Metrics from the Transport's hooks: a call throttled once and then
// answered records two attempts and one throttled retry. Any
// MeterProvider will do; examples/prometheus exports to Prometheus.
func ExampleMetrics() {
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1) == 1 {
			w.WriteHeader(http.StatusTooManyRequests)
		}
	}))
	defer srv.Close()
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer mp.Shutdown(context.Background())

	metrics, err := otelretry.NewMetrics(otelretry.MetricsOptions{MeterProvider: mp})
	if err != nil {
		fmt.Println(err)
		return
	}
	rt := retry.New(nil, append(metrics.Options(), retry.WithBackoff(retry.Constant{Base: time.Millisecond}))...)
	defer rt.CloseIdleConnections()
	resp, err := (&http.Client{Transport: rt}).Get(srv.URL)
	if err != nil {
		fmt.Println(err)
		return
	}
	resp.Body.Close()

	var rm metricdata.ResourceMetrics
	reader.Collect(context.Background(), &rm)
	for _, m := range rm.ScopeMetrics[0].Metrics {
		if sum, ok := m.Data.(metricdata.Sum[int64]); ok {
			for _, p := range sum.DataPoints {
				class, _ := p.Attributes.Value(otelretry.AttrClass)
				fmt.Println(m.Name, class.AsString(), p.Value)
			}
		}
	}
	// Output:
	// retry.client.attempts  2
	// retry.client.retries throttled 1
}
