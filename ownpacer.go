package retry

import (
	"context"
	"errors"
	"net/http"

	"github.com/backoff-jitter/retry/internal/memstore"
	"github.com/backoff-jitter/retry/internal/pacecore"
)

// NoPacer is a [Pacer] that never waits: a [Transport] whose Pacer is
// NoPacer ([WithPacer](NoPacer)) does not pace, for the Transport or, among
// a request's options, for one request. A nil Pacer is not this: it means
// the Transport's own.
var NoPacer Pacer = noPacer{}

type noPacer struct{}

func (noPacer) Wait(context.Context, *http.Request) (Turn, error) { return noTurn{}, nil }

type noTurn struct{}

func (noTurn) Done(Feedback) {}
func (noTurn) Abandon()      {}

// RateLimited reports whether f refused its attempt for the rate it was
// sent at, which is what a Pacer learns from unless told otherwise (see
// package pace's Pacer.Refusal): a [Throttled] outcome, but not a 503
// that gives no server wait. Such a 503 says the server is unavailable or
// overloaded (a balancer with no healthy backend, a queue that is full),
// not that the client is too fast: it teaches no rate, and the retry
// budget and a circuit breaker see to it.
func RateLimited(f Feedback) bool {
	if f.Class != Throttled {
		return false
	}
	return f.Response == nil || f.Response.StatusCode != http.StatusServiceUnavailable || f.Hinted
}

// ownPacer is the Pacer of a Transport whose Pacer is nil: the adaptive
// pacer of package pace with its defaults (no slow start, keys by host),
// one per Transport, made on first use. It is written here rather than
// taken from package pace, which imports this one.
type ownPacer struct{ store memstore.Store }

func newOwnPacer(s *settings) *ownPacer {
	p := &ownPacer{}
	p.store.Config = pacecore.Config{}.Defaulted()
	p.store.Now, p.store.Sleep = s.now, s.sleep
	return p
}

func (p *ownPacer) Wait(ctx context.Context, req *http.Request) (Turn, error) {
	k := p.store.OpenKey(RequestKey(req))
	t, err := pacecore.Wait(ctx, k)
	if err != nil {
		var late *pacecore.TooLate
		if errors.As(err, &late) {
			return nil, &TurnTooLate{Wait: late.Wait}
		}
		return nil, err
	}
	if t.Unpaced() {
		return (*ownIdleTurn)(k), nil // no allocation
	}
	return &ownTurn{t}, nil
}

// rateSignal returns what f tells the Transport's own Pacer, by
// RateLimited (package pace builds the same for its Pacer).
func rateSignal(f Feedback) pacecore.Signal {
	return pacecore.Outcome(f.Class == Success, RateLimited(f), f.Hinted, f.Wait,
		pacecore.Quota{Remaining: f.Quota.Remaining, Reset: f.Quota.Reset})
}

type ownTurn struct{ t pacecore.Turn }

func (t *ownTurn) Done(f Feedback) { pacecore.Done(t.t, rateSignal(f)) }
func (t *ownTurn) Abandon()        { pacecore.Abandon(t.t) }
func (t *ownTurn) Paced() bool     { return t.t.Gen != 0 }

type ownIdleTurn memstore.Key

func (t *ownIdleTurn) Done(f Feedback) {
	pacecore.Done(pacecore.Turn{H: (*memstore.Key)(t)}, rateSignal(f))
}

func (t *ownIdleTurn) Abandon() { pacecore.Abandon(pacecore.Turn{H: (*memstore.Key)(t)}) }
