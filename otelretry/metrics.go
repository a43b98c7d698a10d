package otelretry

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/backoff-jitter/retry"
	"github.com/backoff-jitter/retry/breaker"
	"github.com/backoff-jitter/retry/pace"
)

// The instruments' names. OpenTelemetry's semantic conventions have none
// for retries; these follow their rules (a namespace, dots, units in
// UCUM), beside the HTTP client metrics otelhttp records per attempt.
const (
	MetricAttempts    = "retry.client.attempts"
	MetricRetries     = "retry.client.retries"
	MetricGiveUps     = "retry.client.give_ups"
	MetricWait        = "retry.client.wait.duration"
	MetricHedges      = "retry.client.hedges"
	MetricResumes     = "retry.client.resumes"
	MetricBudget      = "retry.client.budget.tokens"
	MetricBreaker     = "retry.client.breaker.transitions"
	MetricPacerRate   = "retry.client.pacer.rate"
	MetricPacerKeys   = "retry.client.pacer.keys"
	meterName         = "github.com/backoff-jitter/retry/otelretry"
	defaultPacerKeys  = 20
	classCount        = int(retry.Unsent) + 1
	reasonCount       = int(retry.StopBreaker) + 1
	breakerStateCount = int(breaker.HalfOpen) + 1
)

// The attributes the instruments carry; each takes a few values, so that
// no instrument's cardinality grows with the traffic. Only the Pacer's
// rate is per key, and for at most MaxPacerKeys keys.
const (
	AttrClass      = attribute.Key("retry.class")
	AttrReason     = attribute.Key("retry.reason")
	AttrFromServer = attribute.Key("retry.wait.from_server")
	AttrFrom       = attribute.Key("retry.breaker.from")
	AttrTo         = attribute.Key("retry.breaker.to")
	AttrKey        = attribute.Key("retry.key")
	AttrResumed    = attribute.Key("retry.resume.resumed")
)

// MetricsOptions configures [NewMetrics].
type MetricsOptions struct {
	// MeterProvider makes the meter; nil means otel.GetMeterProvider().
	MeterProvider metric.MeterProvider
	// Budget, if not nil, is observed as MetricBudget: the tokens left.
	// Give the Transport this bucket (retry.WithBudget).
	Budget *retry.TokenBucket
	// Pacer, if not nil, is observed as MetricPacerRate, the rate of each
	// key it paces, and MetricPacerKeys, how many it paces. Give the
	// Transport this Pacer (retry.WithPacer): its own is not reachable.
	Pacer *pace.Pacer
	// MaxPacerKeys bounds the keys MetricPacerRate reports at once. Zero
	// means 20.
	MaxPacerKeys int
}

// Metrics records a Transport's retries as OpenTelemetry metrics, through
// its hooks ([Metrics.Options]) and, for the budget and the Pacer, by
// observing them when the meter collects. A hook records with no
// allocation of its own. It is safe for concurrent use.
type Metrics struct {
	attempts, retries, giveUps, hedges, transitions, resumes metric.Int64Counter
	wait                                                     metric.Float64Histogram
	registration                                             metric.Registration

	// Attribute sets made once, indexed by class, reason and state, in
	// the slices the instruments take: a slice made per call would be an
	// allocation per call.
	byClass   [classCount][]metric.AddOption
	byWait    [classCount][2][]metric.RecordOption
	byReason  [reasonCount][]metric.AddOption
	byChange  [breakerStateCount][breakerStateCount][]metric.AddOption
	byResumed [2][]metric.AddOption
	pacerKeys int
}

// NewMetrics makes the instruments, and registers the observation of the
// budget and the Pacer when given; Close unregisters it.
func NewMetrics(o MetricsOptions) (*Metrics, error) {
	mp := o.MeterProvider
	if mp == nil {
		mp = otel.GetMeterProvider()
	}
	if o.MaxPacerKeys < 0 {
		return nil, fmt.Errorf("otelretry: MaxPacerKeys %d is negative", o.MaxPacerKeys)
	}
	meter := mp.Meter(meterName)
	m := &Metrics{pacerKeys: o.MaxPacerKeys}
	if m.pacerKeys == 0 {
		m.pacerKeys = defaultPacerKeys
	}
	var errs [9]error
	m.attempts, errs[0] = meter.Int64Counter(MetricAttempts, metric.WithUnit("{attempt}"),
		metric.WithDescription("Attempts sent, hedged copies included."))
	m.retries, errs[1] = meter.Int64Counter(MetricRetries, metric.WithUnit("{retry}"),
		metric.WithDescription("Retries decided, by the class of the outcome retried."))
	m.giveUps, errs[2] = meter.Int64Counter(MetricGiveUps, metric.WithUnit("{call}"),
		metric.WithDescription("Calls that stopped on an outcome that would otherwise have been retried, by reason."))
	m.wait, errs[3] = meter.Float64Histogram(MetricWait, metric.WithUnit("s"),
		metric.WithDescription("Waits before retries: backoff or the server's wait."),
		metric.WithExplicitBucketBoundaries(0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300))
	m.hedges, errs[4] = meter.Int64Counter(MetricHedges, metric.WithUnit("{copy}"),
		metric.WithDescription("Copies of hedged attempts sent."))
	m.transitions, errs[5] = meter.Int64Counter(MetricBreaker, metric.WithUnit("{transition}"),
		metric.WithDescription("Circuit state changes, by the states left and entered."))
	m.resumes, errs[8] = meter.Int64Counter(MetricResumes, metric.WithUnit("{resume}"),
		metric.WithDescription("Resumes of broken response bodies, by whether the rest was spliced on."))
	budget, err := meter.Int64ObservableGauge(MetricBudget, metric.WithUnit("{token}"),
		metric.WithDescription("Tokens left in the retry budget."))
	errs[6] = err
	rate, err := meter.Float64ObservableGauge(MetricPacerRate, metric.WithUnit("{request}/s"),
		metric.WithDescription("The rate the Pacer paces a key at, for the keys it paces (at most MaxPacerKeys)."))
	errs[7] = err
	keys, err := meter.Int64ObservableGauge(MetricPacerKeys, metric.WithUnit("{key}"),
		metric.WithDescription("Keys the Pacer paces."))
	if err := errors.Join(append(errs[:], err)...); err != nil {
		return nil, err
	}
	m.attributeSets()

	var observed []metric.Observable
	if o.Budget != nil {
		observed = append(observed, budget)
	}
	if o.Pacer != nil {
		observed = append(observed, rate, keys)
	}
	if len(observed) > 0 {
		m.registration, err = meter.RegisterCallback(func(_ context.Context, obs metric.Observer) error {
			if b := o.Budget; b != nil {
				obs.ObserveInt64(budget, int64(b.Tokens()))
			}
			if p := o.Pacer; p != nil {
				var n int64
				p.Rates(func(key string, r float64) bool {
					if n < int64(m.pacerKeys) {
						obs.ObserveFloat64(rate, r, metric.WithAttributes(AttrKey.String(key)))
					}
					n++
					return true
				})
				obs.ObserveInt64(keys, n)
			}
			return nil
		}, observed...)
		if err != nil {
			return nil, err
		}
	}
	return m, nil
}

// attributeSets makes the attribute sets the hooks record with, once.
func (m *Metrics) attributeSets() {
	for c := range classCount {
		class := AttrClass.String(retry.Class(c).String())
		m.byClass[c] = []metric.AddOption{metric.WithAttributeSet(attribute.NewSet(class))}
		for i, server := range []bool{false, true} {
			m.byWait[c][i] = []metric.RecordOption{metric.WithAttributeSet(attribute.NewSet(class, AttrFromServer.Bool(server)))}
		}
	}
	for r := range reasonCount {
		m.byReason[r] = []metric.AddOption{metric.WithAttributeSet(attribute.NewSet(AttrReason.String(retry.StopReason(r).Label())))}
	}
	for i, resumed := range []bool{false, true} {
		m.byResumed[i] = []metric.AddOption{metric.WithAttributeSet(attribute.NewSet(AttrResumed.Bool(resumed)))}
	}
	for from := range breakerStateCount {
		for to := range breakerStateCount {
			m.byChange[from][to] = []metric.AddOption{metric.WithAttributeSet(attribute.NewSet(
				AttrFrom.String(breaker.State(from).String()), AttrTo.String(breaker.State(to).String())))}
		}
	}
}

// Close unregisters the observation of the budget and the Pacer.
func (m *Metrics) Close() error {
	if m.registration == nil {
		return nil
	}
	return m.registration.Unregister()
}

// Options returns the hooks that record: OnRetry, OnHedge, OnDone and
// OnResume.
// Given with other hooks of the same kinds, chain them instead
// (RecordRetry(m.RecordRetry(nil)), say): an option replaces a hook.
func (m *Metrics) Options() []retry.Option {
	return []retry.Option{
		retry.WithOnRetry(m.RecordRetry(nil)),
		retry.WithOnHedge(m.RecordHedge(nil)),
		retry.WithOnDone(m.RecordDone(nil)),
		retry.WithOnResume(m.RecordResume(nil)),
	}
}

// RecordResume returns an OnResume hook that counts the resume, by
// whether it spliced the rest on, then calls next, if not nil.
func (m *Metrics) RecordResume(next func(retry.ResumeEvent)) func(retry.ResumeEvent) {
	return func(e retry.ResumeEvent) {
		resumed := 0
		if e.Err == nil {
			resumed = 1
		}
		m.resumes.Add(eventContext(e.Request), 1, m.byResumed[resumed]...)
		if next != nil {
			next(e)
		}
	}
}

// RecordRetry returns an OnRetry hook that counts the retry by class and
// records its wait, then calls next, if not nil.
func (m *Metrics) RecordRetry(next func(retry.Event)) func(retry.Event) {
	return func(e retry.Event) {
		ctx := eventContext(e.Request)
		if c := int(e.Class); c >= 0 && c < classCount {
			m.retries.Add(ctx, 1, m.byClass[c]...)
			server := 0
			if e.FromServer {
				server = 1
			}
			m.wait.Record(ctx, e.Delay.Seconds(), m.byWait[c][server]...)
		}
		if next != nil {
			next(e)
		}
	}
}

// RecordHedge returns an OnHedge hook that counts the copy, then calls
// next, if not nil.
func (m *Metrics) RecordHedge(next func(retry.Event)) func(retry.Event) {
	return func(e retry.Event) {
		m.hedges.Add(eventContext(e.Request), 1)
		if next != nil {
			next(e)
		}
	}
}

// RecordDone returns an OnDone hook that counts the call's attempts and,
// when it gave up (see retry.StopReason.GaveUp), the give-up by reason;
// then calls next, if not nil.
func (m *Metrics) RecordDone(next func(retry.Summary)) func(retry.Summary) {
	return func(s retry.Summary) {
		ctx := eventContext(s.Request)
		if s.Attempts > 0 {
			m.attempts.Add(ctx, int64(s.Attempts))
		}
		if r := int(s.Reason); s.Reason.GaveUp() && r < reasonCount {
			m.giveUps.Add(ctx, 1, m.byReason[r]...)
		}
		if next != nil {
			next(s)
		}
	}
}

// BreakerStateChange returns a breaker.Breaker's OnStateChange hook that
// counts each change by the states left and entered (not by key, which
// could be many), then calls next, if not nil.
func (m *Metrics) BreakerStateChange(next func(key string, from, to breaker.State)) func(string, breaker.State, breaker.State) {
	return func(key string, from, to breaker.State) {
		if int(from) < breakerStateCount && int(to) < breakerStateCount {
			m.transitions.Add(context.Background(), 1, m.byChange[from][to]...)
		}
		if next != nil {
			next(key, from, to)
		}
	}
}

// eventContext is the context a hook records in: the caller's request's,
// for exemplars and baggage.
func eventContext(req *http.Request) context.Context {
	if req == nil {
		return context.Background()
	}
	return req.Context()
}
