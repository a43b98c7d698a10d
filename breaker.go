package retry

import (
	"errors"
	"fmt"
	"net/http"
	"time"
)

// Breaker is a circuit breaker the [Transport] asks before each attempt:
// while the circuit of a request's host (or key) is open, attempts fail at
// once, before anything is sent, instead of adding to the load of a
// server that is failing. Package
// [github.com/backoff-jitter/retry/breaker] provides one per host.
//
// Implementations must be safe for concurrent use: Allow, and the methods
// of the turns it returns, are called from concurrent RoundTrips. If a
// Breaker also has a Validate() error method, the Transport calls it once,
// at first use.
type Breaker interface {
	// Allow reports whether an attempt of req may be sent now. When it
	// may, the attempt's outcome is reported on the Turn returned (Done),
	// or the turn is given back unused (Abandon). When it may not, the
	// error says why; a [*CircuitOpen] tells until when.
	Allow(req *http.Request) (Turn, error)
}

// CircuitOpen is the error of a [Breaker] that refuses an attempt because
// the circuit of its key is open. It wraps [ErrCircuitOpen].
type CircuitOpen struct {
	// Key is the circuit's key, the request's host by default.
	Key string
	// Until is when the circuit lets a probe through; zero when unknown.
	Until time.Time
}

// ErrCircuitOpen is what every [*CircuitOpen] wraps, for errors.Is.
var ErrCircuitOpen = errors.New("retry: circuit open")

func (e *CircuitOpen) Error() string {
	if e.Until.IsZero() {
		return fmt.Sprintf("retry: circuit of %s open", e.Key)
	}
	return fmt.Sprintf("retry: circuit of %s open until %s", e.Key, e.Until.Format(time.RFC3339))
}

func (e *CircuitOpen) Unwrap() error { return ErrCircuitOpen }

// admit asks the Breaker whether the next attempt may be sent, and keeps
// its turn. Refused, the call ends, and retryAt is when the circuit lets a
// probe through, when the Breaker says.
func (r *roundTrip) admit() error {
	if r.s.breaker == nil {
		return nil
	}
	turn, err := r.s.breaker.Allow(r.req)
	if err != nil {
		var open *CircuitOpen
		if errors.As(err, &open) && !open.Until.IsZero() {
			r.retryAt = open.Until
		}
		return err
	}
	r.circuit = turn
	return nil
}

// unadmit gives the Breaker's turn back: its attempt was not sent.
func (r *roundTrip) unadmit() {
	if r.circuit != nil {
		r.circuit.Abandon()
		r.circuit = nil
	}
}

// trip reports feedback f, of an attempt's outcome o, on circuit, the
// Breaker's turn of that attempt (nil without a Breaker), and a transient
// answer's server wait too (Feedback.Wait; a throttle's is there already):
// a Breaker may hold the circuit open that long.
func (r *roundTrip) trip(circuit Turn, o Outcome, f Feedback) {
	if circuit == nil {
		return
	}
	if f.Class == Transient && o.Response != nil {
		f.Wait, f.Hinted = ServerWait(o.Response.Header, r.s.now(), r.s.rateLimitReset)
	}
	circuit.Done(f)
}

// report tells the turns of an attempt, the Pacer's and the Breaker's
// (either nil), of its outcome o, of class c, and reports whether o
// refused the attempt for the rate (RateLimited).
func (r *roundTrip) report(turn, circuit Turn, o Outcome, c Class) (limited bool) {
	if turn == nil && circuit == nil && c != Throttled {
		return false // no one to tell, and no clock to read
	}
	f := r.feedback(o, c)
	if turn != nil {
		turn.Done(f)
	}
	r.trip(circuit, o, f)
	return RateLimited(f)
}
