package retry

import (
	"context"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

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
		// Every retry was paid from the one budget: 3 + 1 of 5 tokens.
		assert.Equal(t, 500-4*5, budget.Tokens())
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

// clone copies every exported field: a field added to Transport and
// forgotten there would be lost for requests with per-request options.
func TestCloneCopiesEveryField(t *testing.T) {
	orig := &Transport{}
	v := reflect.ValueOf(orig).Elem()
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
		case reflect.Interface, reflect.Func:
			// Any non-nil value of the field's type.
			switch f.Name {
			case "Base":
				fv.Set(reflect.ValueOf(http.RoundTripper(staticTransport{})))
			case "Backoff":
				fv.Set(reflect.ValueOf(Backoff(Constant{Base: time.Second})))
			case "Classifier":
				fv.Set(reflect.ValueOf(Classifier(DefaultClassifier)))
			case "Budget":
				fv.Set(reflect.ValueOf(Budget(NoBudget)))
			case "Pacer":
				fv.Set(reflect.ValueOf(Pacer(&recordingPacer{})))
			case "OnRetry", "OnGiveUp":
				fv.Set(reflect.ValueOf(func(Event) {}))
			case "OnDone":
				fv.Set(reflect.ValueOf(func(Summary) {}))
			default:
				t.Fatalf("the test does not know how to set Transport.%s", f.Name)
			}
		default:
			t.Fatalf("the test does not know how to set Transport.%s (%v)", f.Name, fv.Kind())
		}
	}
	cv := reflect.ValueOf(orig.clone()).Elem()
	for i := 0; i < typ.NumField(); i++ {
		f := typ.Field(i)
		if f.IsExported() && cv.Field(i).IsZero() {
			t.Errorf("clone does not copy Transport.%s", f.Name)
		}
	}
}
