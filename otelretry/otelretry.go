// Package otelretry traces a [retry.Transport] with OpenTelemetry: a span
// for each attempt, child of the call's span, carrying the semantic
// convention's http.request.resend_count, and a span event on the call's
// span for each retry, with its class, status or error, and wait.
//
// The order of the layers matters. The call's span goes outside the
// Transport, each attempt's span inside it, and a transport that adds
// credentials (golang.org/x/oauth2's) inside that, so that every attempt
// fetches a token that is still valid:
//
//	call := otelhttp.NewTransport(otelretry.New(oauth2Transport))
//
// [New] wraps its base for the attempts' spans ([Attempts]); wrap the
// result in otelhttp.NewTransport for the call's span, as above. Outside the
// Transport, the token would be fetched once and replayed on every
// attempt: a retry after the token expired is refused with 401.
//
// [Metrics] records the Transport's retries as OpenTelemetry metrics:
// attempts, retries by class, give-ups by reason, a histogram of the waits
// before retries, hedged copies, the retry budget's tokens, a breaker's
// state changes, and the rate of each key a Pacer paces (for a bounded
// number of keys). Its hooks allocate nothing. examples/prometheus
// exports them to Prometheus.
//
// It is a module of its own, so that package retry keeps its single
// run-time dependency.
package otelretry

import (
	"net/http"

	"github.com/backoff-jitter/retry"
	"github.com/hashicorp/go-cleanhttp"
	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
)

// ResendCount is the attribute key of the semantic conventions for the
// number of times a request was sent again (HTTP spans,
// http.request.resend_count): set on every attempt but the first.
const ResendCount = attribute.Key("http.request.resend_count")

// New returns a [retry.Transport] over [Attempts](base) that records its
// retries and its hedges as events on the call's span ([RecordRetry],
// [RecordHedge]), configured then by opts. An OnRetry or OnHedge among
// opts replaces the recording: chain it with RecordRetry or RecordHedge.
// For otelhttp options of your own (a TracerProvider, say), build the same
// from the parts:
//
//	retry.New(otelretry.Attempts(base, otelOpts...), retry.WithOnRetry(otelretry.RecordRetry(nil)), retry.WithOnHedge(otelretry.RecordHedge(nil)), opts...)
func New(base http.RoundTripper, opts ...retry.Option) *retry.Transport {
	own := []retry.Option{retry.WithOnRetry(RecordRetry(nil)), retry.WithOnHedge(RecordHedge(nil))}
	return retry.New(Attempts(base), append(own, opts...)...)
}

// Attempts returns base (nil means a pooled transport of its own, as
// retry.New(nil) makes) for the attempts of a [retry.Transport]: each gets a span of its own, from
// otelhttp.NewTransport with otelOpts, with [ResendCount] on every attempt
// but the first.
func Attempts(base http.RoundTripper, otelOpts ...otelhttp.Option) http.RoundTripper {
	if base == nil {
		base = cleanhttp.DefaultPooledTransport()
	}
	return otelhttp.NewTransport(resendCount{base}, otelOpts...)
}

// resendCount sets http.request.resend_count on the span of the attempt
// it sends: the Transport puts the attempt's number in its context.
type resendCount struct{ base http.RoundTripper }

func (r resendCount) RoundTrip(req *http.Request) (*http.Response, error) {
	if n := retry.Attempt(req.Context()); n > 1 {
		trace.SpanFromContext(req.Context()).SetAttributes(ResendCount.Int(n - 1))
	}
	return r.base.RoundTrip(req)
}

// CloseIdleConnections closes the idle connections of the base, as
// [retry.Transport.CloseIdleConnections] expects of what it wraps.
func (r resendCount) CloseIdleConnections() {
	if c, ok := r.base.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

// RecordRetry returns an OnRetry hook that adds an event named "retry" to
// the span of the call (the span in the caller's request context), with
// the attempt that failed, its class, its status or error, and the wait
// before the next one; then calls next, if not nil.
func RecordRetry(next func(retry.Event)) func(retry.Event) {
	return func(e retry.Event) {
		if e.Request != nil {
			if span := trace.SpanFromContext(e.Request.Context()); span.IsRecording() {
				attrs := []attribute.KeyValue{
					attribute.Int("retry.attempt", e.Attempt),
					attribute.String("retry.class", e.Class.String()),
					attribute.Int64("retry.delay_ms", e.Delay.Milliseconds()),
					attribute.Bool("retry.delay_from_server", e.FromServer),
				}
				if e.Err != nil {
					attrs = append(attrs, attribute.String("retry.error", e.Err.Error()))
				} else {
					attrs = append(attrs, attribute.Int("http.response.status_code", e.StatusCode))
				}
				span.AddEvent("retry", trace.WithAttributes(attrs...))
			}
		}
		if next != nil {
			next(e)
		}
	}
}

// RecordHedge returns an OnHedge hook that adds an event named "hedge" to
// the span of the call as each copy of a hedged attempt is sent, with the
// copy's attempt number and the delay it waited; then calls next, if not
// nil. The copy's own span is an attempt's like the others.
func RecordHedge(next func(retry.Event)) func(retry.Event) {
	return func(e retry.Event) {
		if e.Request != nil {
			if span := trace.SpanFromContext(e.Request.Context()); span.IsRecording() {
				span.AddEvent("hedge", trace.WithAttributes(
					attribute.Int("retry.attempt", e.Attempt),
					attribute.Int64("retry.delay_ms", e.Delay.Milliseconds()),
				))
			}
		}
		if next != nil {
			next(e)
		}
	}
}
