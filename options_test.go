package retry

import (
	"context"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/backoff-jitter/retry/retrytest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// ContextWithOptions changes one request's settings and no other's, over
// the same connections and budget.
func TestContextWithOptions(t *testing.T) {
	forEachProto(t, func(t *testing.T, p proto) {
		s := newScriptOver(t, p, status(503))
		budget := &TokenBucket{}
		var perRequest []Event
		rt, _ := testTransport(s.base, WithBudget(budget))
		defer rt.CloseIdleConnections()

		// No retries for this call.
		ctx := ContextWithOptions(context.Background(), WithMaxAttempts(1))
		resp, _, err := do(t, rt, mustRequest(t, "GET", s.srv.URL, nil).WithContext(ctx))
		require.NoError(t, err)
		assert.Equal(t, 503, resp.StatusCode)
		assert.Len(t, s.requests(), 1)

		// The Transport's own settings for the next: 4 attempts.
		_, _, err = do(t, rt, mustRequest(t, "GET", s.srv.URL, nil))
		require.NoError(t, err)
		assert.Len(t, s.requests(), 5)

		// Options given twice apply in order; a hook of this call only.
		ctx = ContextWithOptions(ContextWithOptions(context.Background(), WithMaxAttempts(5)),
			WithMaxAttempts(2), WithOnRetry(func(e Event) { perRequest = append(perRequest, e) }))
		_, _, err = do(t, rt, mustRequest(t, "GET", s.srv.URL, nil).WithContext(ctx))
		require.NoError(t, err)
		assert.Len(t, s.requests(), 7)
		assert.Len(t, perRequest, 1)

		assert.EqualValues(t, 1, s.newConn.Load(), "the per-request settings share the Transport's connections")
		// Every retry was paid from the one budget: 3 + 1 bare 503s, at a
		// transient retry's 14 tokens.
		assert.Equal(t, 500-4*14, budget.Tokens())
	})
	t.Run("invalid", func(t *testing.T) {
		rt, _ := testTransport(nil)
		cc := &countingCloser{Reader: strings.NewReader("x")}
		ctx := ContextWithOptions(context.Background(), WithMaxAttempts(-1))
		_, err := rt.RoundTrip(mustRequest(t, "PUT", "http://127.0.0.1:1/", cc).WithContext(ctx))
		require.ErrorContains(t, err, "MaxAttempts")
		assert.EqualValues(t, 1, cc.closes.Load())
		require.NoError(t, rt.Validate(), "the Transport itself is still valid")
	})
}

// fillTransport sets every exported field of t to a value that differs
// from the field's default: a field added to Transport that the test does
// not know fails it.
func fillTransport(t *testing.T, tr *Transport) {
	t.Helper()
	v := reflect.ValueOf(tr).Elem()
	typ := v.Type()
	for i := 0; i < typ.NumField(); i++ {
		f := typ.Field(i)
		if !f.IsExported() {
			continue
		}
		fv := v.Field(i)
		switch fv.Kind() {
		case reflect.Int, reflect.Int64:
			fv.SetInt(7)
		case reflect.Uint8:
			fv.SetUint(1)
		case reflect.String:
			fv.SetString("X-Test")
		case reflect.Struct:
			switch f.Name {
			case "Hedge":
				fv.Set(reflect.ValueOf(Hedge{Delay: time.Second, Percentile: 90, MaxHedges: 2}))
				tr.hedgeSet = true
			default:
				t.Fatalf("the test does not know how to set Transport.%s", f.Name)
			}
		case reflect.Interface, reflect.Func:
			switch f.Name {
			case "Base":
				fv.Set(reflect.ValueOf(http.RoundTripper(staticTransport{})))
			case "Backoff":
				fv.Set(reflect.ValueOf(Backoff(Constant{Base: time.Second})))
			case "Classifier":
				fv.Set(reflect.ValueOf(Classifier(DefaultClassifier)))
			case "Budget":
				fv.Set(reflect.ValueOf(Budget(&TokenBucket{Capacity: 7})))
			case "Pacer":
				fv.Set(reflect.ValueOf(Pacer(&recordingPacer{})))
			case "OnRetry", "OnGiveUp", "OnHedge":
				fv.Set(reflect.ValueOf(func(Event) {}))
			case "OnDone":
				fv.Set(reflect.ValueOf(func(Summary) {}))
			case "OnResume":
				fv.Set(reflect.ValueOf(func(ResumeEvent) {}))
			case "Breaker":
				fv.Set(reflect.ValueOf(Breaker(breakerFunc(func(*http.Request) (Turn, error) { return recordingTurn{&recordingPacer{}}, nil }))))
			case "Clock":
				fv.Set(reflect.ValueOf(Clock(retrytest.NewClock(time.Now()))))
			case "Random":
				fv.Set(reflect.ValueOf(func() float64 { return 0.5 }))
			case "WaitFloor":
				fv.Set(reflect.ValueOf(func(Outcome) time.Duration { return 0 }))
			case "ServerWaitJitter":
				fv.Set(reflect.ValueOf(Spread(0.1)))
			case "BeforeAttempt":
				fv.Set(reflect.ValueOf(func(Prepare) error { return nil }))
			case "Key":
				fv.Set(reflect.ValueOf(func(*http.Request) string { return "tenant" }))
			default:
				t.Fatalf("the test does not know how to set Transport.%s", f.Name)
			}
		default:
			t.Fatalf("the test does not know how to set Transport.%s (%v)", f.Name, fv.Kind())
		}
	}
}

// Every field of a Transport reaches its settings, and every field a
// per-request option sets reaches that request's: a field forgotten in
// resolve or withOptions fails here.
func TestSettingsCarryEveryField(t *testing.T) {
	full := &Transport{}
	fillTransport(t, full)
	s, err := full.settings()
	require.NoError(t, err)
	sv := reflect.ValueOf(s).Elem()
	for i := 0; i < sv.NumField(); i++ {
		if sv.Field(i).IsZero() {
			t.Errorf("resolve leaves settings.%s zero", sv.Type().Field(i).Name)
		}
	}

	defaults, err := (&Transport{}).settings()
	require.NoError(t, err)
	own, err := defaults.withOptions([]Option{func(o *Transport) { fillTransport(t, o) }})
	require.NoError(t, err)
	dv, ov := reflect.ValueOf(defaults).Elem(), reflect.ValueOf(own).Elem()
	for i := 0; i < dv.NumField(); i++ {
		switch name := dv.Type().Field(i).Name; name {
		case "now", "sleep", "rand", "timers":
			// Seams: the Transport's, never a request's.
		case "latencies":
			// The Transport's record of its hosts, shared by every request.
			if dv.Field(i).Pointer() != ov.Field(i).Pointer() {
				t.Error("withOptions gives a request latencies of its own")
			}
		default:
			if reflect.DeepEqual(readable(dv.Field(i)), readable(ov.Field(i))) {
				t.Errorf("withOptions does not carry settings.%s", name)
			}
		}
	}
}

// A per-request option's zero value keeps the Transport's setting, and
// WithBudget(NoBudget) turns the budget off for the request only.
func TestPerRequestZeroKeepsTheTransports(t *testing.T) {
	base := &Transport{MaxAttempts: 3, AttemptHeader: "X-Attempt", Budget: &TokenBucket{}, Pacer: &recordingPacer{}}
	s, err := base.settings()
	require.NoError(t, err)
	own, err := s.withOptions([]Option{WithMaxAttempts(0), WithAttemptHeader(""), WithBudget(nil), WithPacer(nil), WithBackoff(nil), WithClassifier(nil)})
	require.NoError(t, err)
	assert.Equal(t, 3, own.maxAttempts)
	assert.Equal(t, "X-Attempt", own.attemptHeader)
	assert.Same(t, base.Budget, own.budget)
	assert.Same(t, base.Pacer, own.pacer)
	assert.Equal(t, s.backoff.Delay(3, 0, 0.5), own.backoff.Delay(3, 0, 0.5), "the default backoff")
	assert.Nil(t, own.classifier)

	off, err := s.withOptions([]Option{WithBudget(NoBudget)})
	require.NoError(t, err)
	assert.Nil(t, off.budget)
	assert.NotNil(t, s.budget, "the Transport's own settings are unchanged")
}

// A per-request hook runs after the Transport's, never instead of it, and
// a nil one leaves the Transport's in place.
func TestPerRequestHooksAddToTheTransports(t *testing.T) {
	forEachProto(t, func(t *testing.T, p proto) {
		s := newScriptOver(t, p, status(503), status(503), status(200), status(503), status(503), status(200))
		var calls []string
		rt, _ := testTransport(s.base,
			WithOnRetry(func(Event) { calls = append(calls, "transport retry") }),
			WithOnDone(func(Summary) { calls = append(calls, "transport done") }))
		ctx := ContextWithOptions(context.Background(),
			WithOnRetry(nil),
			WithOnDone(func(Summary) { calls = append(calls, "request done") }))
		_, _, err := do(t, rt, mustRequest(t, "GET", s.srv.URL, nil).WithContext(ctx))
		require.NoError(t, err)
		assert.Equal(t, []string{"transport retry", "transport retry", "transport done", "request done"}, calls)

		calls = nil
		ctx = ContextWithOptions(context.Background(), WithOnRetry(func(Event) { calls = append(calls, "request retry") }))
		_, _, err = do(t, rt, mustRequest(t, "GET", s.srv.URL, nil).WithContext(ctx))
		require.NoError(t, err)
		assert.Equal(t, []string{"transport retry", "request retry", "transport retry", "request retry", "transport done"}, calls)
	})
}

// ContextWithOptions copies the options it is given: appending to a
// shared slice with spare capacity cannot change a context made before.
func TestContextWithOptionsCopies(t *testing.T) {
	defaults := make([]Option, 1, 4)
	defaults[0] = WithMaxRetryAfter(time.Second)
	one := ContextWithOptions(context.Background(), append(defaults, WithMaxAttempts(1))...)
	five := ContextWithOptions(context.Background(), append(defaults, WithMaxAttempts(5))...)
	base, err := (&Transport{}).settings()
	require.NoError(t, err)
	for ctx, want := range map[context.Context]int{one: 1, five: 5} {
		s, err := base.withOptions(ctx.Value(optionsKey{}).([]Option))
		require.NoError(t, err)
		assert.Equal(t, want, s.maxAttempts)
	}

	// The same for options added to a context that carries some.
	shared := ContextWithOptions(context.Background(), defaults...)
	a := ContextWithOptions(shared, WithMaxAttempts(2))
	b := ContextWithOptions(shared, WithMaxAttempts(3))
	for ctx, want := range map[context.Context]int{a: 2, b: 3} {
		s, err := base.withOptions(ctx.Value(optionsKey{}).([]Option))
		require.NoError(t, err)
		assert.Equal(t, want, s.maxAttempts)
	}
}

// readable returns the value of an unexported field f of an addressable
// struct.
func readable(f reflect.Value) any {
	return reflect.NewAt(f.Type(), unsafe.Pointer(f.UnsafeAddr())).Elem().Interface()
}

// breakerFunc is a Breaker of one function.
type breakerFunc func(*http.Request) (Turn, error)

func (f breakerFunc) Allow(r *http.Request) (Turn, error) { return f(r) }
