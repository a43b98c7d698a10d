// Command gobreaker plugs sony/gobreaker into a retry.Transport through
// the retry.Breaker seam, in place of package breaker: one two-step
// circuit breaker per host, told of each attempt's outcome. It runs
// against a local server that fails every request, and prints what each
// call met:
//
//	cd examples/gobreaker && go run .
//
// The mapping: a success closes gobreaker's count as a success; transient
// and unsent outcomes (a 500, a refused dial) count as failures; anything
// else (a throttle, a 404, an attempt the Transport gave back unsent) is
// excluded, as package breaker ignores it.
package main

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"sync"
	"sync/atomic"

	"github.com/sony/gobreaker/v2"

	"github.com/backoff-jitter/retry"
)

// hostBreakers is a retry.Breaker made of one gobreaker per host.
type hostBreakers struct {
	settings func(host string) gobreaker.Settings
	m        sync.Map // host -> *gobreaker.TwoStepCircuitBreaker[struct{}]
}

// errExcluded is the outcome gobreaker is told to leave out of its counts.
var errExcluded = errors.New("excluded")

// errFailed is the outcome it counts as a failure.
var errFailed = errors.New("failed")

func newHostBreakers(settings func(host string) gobreaker.Settings) *hostBreakers {
	return &hostBreakers{settings: settings}
}

func (h *hostBreakers) breaker(host string) *gobreaker.TwoStepCircuitBreaker[struct{}] {
	if v, ok := h.m.Load(host); ok {
		return v.(*gobreaker.TwoStepCircuitBreaker[struct{}])
	}
	st := h.settings(host)
	st.Name = host
	excluded := st.IsExcluded
	st.IsExcluded = func(err error) bool {
		return errors.Is(err, errExcluded) || excluded != nil && excluded(err)
	}
	v, _ := h.m.LoadOrStore(host, gobreaker.NewTwoStepCircuitBreaker[struct{}](st))
	return v.(*gobreaker.TwoStepCircuitBreaker[struct{}])
}

// Allow implements retry.Breaker.
func (h *hostBreakers) Allow(req *http.Request) (retry.Turn, error) {
	host := req.URL.Host
	done, err := h.breaker(host).Allow()
	if err != nil {
		return nil, &retry.CircuitOpen{Key: host} // gobreaker does not say until when
	}
	return turn(done), nil
}

// turn reports an attempt's outcome to gobreaker.
type turn func(error)

func (t turn) Done(f retry.Feedback) {
	switch {
	case f.Class == retry.Success:
		t(nil)
	case f.Class == retry.Transient, f.Class == retry.Unsent,
		f.Class == retry.Throttled && !retry.RateLimited(f): // a 503 that names no wait: a backend down
		t(errFailed)
	default:
		t(errExcluded)
	}
}

func (t turn) Abandon() { t(errExcluded) }

func main() {
	if err := run(os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "gobreaker:", err)
		os.Exit(1)
	}
}

// run sends six calls to a server that fails them all, through a
// Transport whose breaker opens after three failures in a row.
func run(out io.Writer) error {
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		http.Error(w, "broken", http.StatusInternalServerError)
	}))
	defer srv.Close()

	breakers := newHostBreakers(func(string) gobreaker.Settings {
		return gobreaker.Settings{ReadyToTrip: func(c gobreaker.Counts) bool { return c.ConsecutiveFailures >= 3 }}
	})
	client := retry.NewClient(retry.WithBreaker(breakers), retry.WithMaxAttempts(1))
	defer client.CloseIdleConnections()
	for i := 1; i <= 6; i++ {
		resp, err := client.Get(srv.URL)
		switch {
		case errors.Is(err, retry.ErrCircuitOpen):
			fmt.Fprintf(out, "call %d: circuit open, not sent\n", i)
		case err != nil:
			return err
		default:
			resp.Body.Close()
			fmt.Fprintf(out, "call %d: %s\n", i, resp.Status)
		}
	}
	fmt.Fprintf(out, "the server saw %d requests\n", hits.Load())
	return nil
}
