package otelretry_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/backoff-jitter/retry"
	"github.com/backoff-jitter/retry/otelretry"
	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// The call's span outside the Transport, the attempts' spans inside it:
// the second attempt's span says it is a resend, and the call's span has
// an event for the retry.
func Example() {
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1) == 1 {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	defer srv.Close()
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	defer tp.Shutdown(context.Background())

	withTP := otelhttp.WithTracerProvider(tp)
	rt := retry.New(otelretry.Attempts(nil, withTP),
		retry.WithOnRetry(otelretry.RecordRetry(nil)),
		retry.WithBackoff(retry.Constant{Base: time.Millisecond}))
	defer rt.CloseIdleConnections()
	client := &http.Client{Transport: otelhttp.NewTransport(rt, withTP)}
	resp, err := client.Get(srv.URL)
	if err != nil {
		fmt.Println(err)
		return
	}
	resp.Body.Close()

	var lines []string
	for _, s := range exp.GetSpans() {
		resend := "-"
		for _, a := range s.Attributes {
			if a.Key == otelretry.ResendCount {
				resend = a.Value.String()
			}
		}
		role := "attempt"
		if !s.Parent.IsValid() {
			role = "call"
		}
		lines = append(lines, fmt.Sprintf("%s span: resend count %s, %d events", role, resend, len(s.Events)))
	}
	slices.Sort(lines) // spans end in no fixed order
	fmt.Println(strings.Join(lines, "\n"))
	// Output:
	// attempt span: resend count -, 0 events
	// attempt span: resend count 1, 0 events
	// call span: resend count -, 1 events
}
