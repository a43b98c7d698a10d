package otelretry

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/backoff-jitter/retry"
	"github.com/backoff-jitter/retry/retrytest"
	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// otel(retry(otel(base))): one span for the call, a child span for each
// attempt with http.request.resend_count on every one but the first, and
// a "retry" event on the call's span for each retry.
func TestSpans(t *testing.T) {
	var n atomic.Int32
	var traceparents []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		traceparents = append(traceparents, r.Header.Get("Traceparent"))
		if n.Add(1) < 3 {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		io.WriteString(w, "ok")
	}))
	defer srv.Close()

	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	defer tp.Shutdown(context.Background())
	withTP := otelhttp.WithTracerProvider(tp)
	w3c := otelhttp.WithPropagators(propagation.TraceContext{})

	rt := retry.New(Attempts(nil, withTP, w3c), retry.WithOnRetry(RecordRetry(nil)),
		retry.WithBackoff(retry.Constant{Base: time.Millisecond}))
	defer rt.CloseIdleConnections()
	client := &http.Client{Transport: otelhttp.NewTransport(rt, withTP)}
	resp, err := client.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()

	spans := exp.GetSpans()
	if len(spans) != 4 {
		t.Fatalf("%d spans; want 4 (the call and 3 attempts)", len(spans))
	}
	// The call's span ends last.
	call := spans[len(spans)-1]
	var events int
	for _, e := range call.Events {
		if e.Name == "retry" {
			events++
		}
	}
	if events != 2 {
		t.Errorf("the call's span has %d retry events; want 2", events)
	}
	for i, s := range spans[:3] {
		if s.Parent.SpanID() != call.SpanContext.SpanID() {
			t.Errorf("attempt %d's span is not a child of the call's", i+1)
		}
		count, found := attr(s.Attributes, ResendCount)
		switch {
		case i == 0 && found:
			t.Errorf("the first attempt has %s = %v; want none", ResendCount, count)
		case i > 0 && (!found || count.AsInt64() != int64(i)):
			t.Errorf("attempt %d has %s = %v (%v); want %d", i+1, ResendCount, count, found, i)
		}
	}
	if len(traceparents) != 3 || traceparents[0] == traceparents[1] || traceparents[1] == traceparents[2] {
		t.Errorf("traceparent headers %q; want one per attempt, each its own span", traceparents)
	}
}

func attr(kvs []attribute.KeyValue, k attribute.Key) (attribute.Value, bool) {
	for _, kv := range kvs {
		if kv.Key == k {
			return kv.Value, true
		}
	}
	return attribute.Value{}, false
}

// New records the retries without being told to; a hook of the caller's
// replaces the recording unless it chains RecordRetry.
func TestNewRecordsRetries(t *testing.T) {
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1) == 1 {
			w.WriteHeader(http.StatusTooManyRequests)
		}
	}))
	defer srv.Close()
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	defer tp.Shutdown(context.Background())
	var seen int
	rt := New(nil, retry.WithBackoff(retry.Constant{Base: time.Millisecond}),
		retry.WithOnRetry(RecordRetry(func(retry.Event) { seen++ })))
	defer rt.CloseIdleConnections()
	callInSpan(t, tp, rt, srv.URL)
	if seen != 1 {
		t.Errorf("the chained hook saw %d retries; want 1", seen)
	}
	spans := exp.GetSpans()
	call := spans[len(spans)-1]
	if call.Name != "call" || len(call.Events) != 1 || call.Events[0].Name != "retry" {
		t.Fatalf("the call's span %q has events %v; want one retry", call.Name, call.Events)
	}
	if v, _ := attr(call.Events[0].Attributes, "http.response.status_code"); v.AsInt64() != 429 {
		t.Errorf("the retry event's status is %v; want 429", v)
	}
}

// New records each copy of a hedged attempt as a "hedge" event on the
// call's span; the copy has a span of its own, as every attempt has.
func TestNewRecordsHedges(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Attempt") == "1" {
			<-r.Context().Done() // stalls until the copy's answer cancels it
			return
		}
		io.WriteString(w, "ok")
	}))
	defer srv.Close()
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	defer tp.Shutdown(context.Background())
	rt := retry.New(Attempts(nil, otelhttp.WithTracerProvider(tp)), retry.WithOnHedge(RecordHedge(nil)),
		retry.WithHedge(retry.Hedge{Delay: time.Millisecond}), retry.WithAttemptHeader("X-Attempt"),
		retry.WithClock(retrytest.NewClock(time.Now()))) // the copy goes at once
	defer rt.CloseIdleConnections()
	callInSpan(t, tp, rt, srv.URL)
	spans := exp.GetSpans()
	if len(spans) != 3 {
		t.Fatalf("%d spans; want 3 (the call, the attempt and its copy)", len(spans))
	}
	call := spans[len(spans)-1]
	if len(call.Events) != 1 || call.Events[0].Name != "hedge" {
		t.Fatalf("the call's span has events %v; want one hedge", call.Events)
	}
	if v, _ := attr(call.Events[0].Attributes, "retry.attempt"); v.AsInt64() != 2 {
		t.Errorf("the hedge event's attempt is %v; want 2", v)
	}
}

// callInSpan sends a GET of url through rt inside a span named "call" of
// tp, and ends the span once the response is closed.
func callInSpan(t *testing.T, tp trace.TracerProvider, rt http.RoundTripper, url string) {
	t.Helper()
	ctx, span := tp.Tracer("test").Start(context.Background(), "call")
	defer span.End()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := rt.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
}
