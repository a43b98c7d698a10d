package pacecore

import (
	"math"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/backoff-jitter/retry"
	"github.com/backoff-jitter/retry/internal/pacesim"
)

// testPacer drives the tests' keys as package pace's Pacer drives them,
// on the fake clock and from one goroutine: its waits unrolled, and every
// event a step. (The Pacer counts an idle key's sends and successes
// without a step and carries them into the next one; that decides the
// same, and TestGoldenTraces holds both drivers to the same traces.)
type testPacer struct {
	Adapt         Adapt
	MinRate       float64
	InitialWindow int
	Refusal       func(retry.Feedback) bool

	cfg  *Config
	keys map[string]*entry
}

// entry is a key of a testPacer: its state, and the attempts sent since
// its last step.
type entry struct {
	p    *testPacer
	st   State
	sent int64
}

var pacerEpoch = pacesim.Epoch

func hostRequest(t testing.TB, host string) *http.Request {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, "https://"+host+"/", nil)
	if err != nil {
		t.Fatal(err)
	}
	return req
}

func response(code int, header ...string) *http.Response {
	h := http.Header{}
	for i := 0; i+1 < len(header); i += 2 {
		h.Set(header[i], header[i+1])
	}
	return &http.Response{StatusCode: code, Header: h}
}

// state returns req's key, made on first use.
func (p *testPacer) state(req *http.Request) *entry {
	if p.cfg == nil {
		p.cfg = &Config{Adapt: p.Adapt, MinRate: DefaultMinRate, InitialWindow: p.InitialWindow}
		if p.MinRate > 0 {
			p.cfg.MinRate = p.MinRate
		}
		if p.InitialWindow == 0 {
			p.cfg.InitialWindow = DefaultInitialWindow
		}
		p.keys = map[string]*entry{}
	}
	e := p.keys[req.URL.Host]
	if e == nil {
		e = &entry{p: p, st: New(p.cfg)}
		p.keys[req.URL.Host] = e
	}
	return e
}

// Rate returns the rate key is paced at, and whether it is engaged (+Inf
// when not), as the Pacer's Rate does.
func (p *testPacer) Rate(key string) (float64, bool) {
	e := p.keys[key]
	if e == nil || !e.st.Engaged() {
		return math.Inf(1), false
	}
	return e.st.Rate(), true
}

// reserve counts an attempt of req's key as sent, and takes its turn at
// now.
func (p *testPacer) reserve(req *http.Request, now time.Time) (time.Duration, *reservation) {
	e := p.state(req)
	e.sent++
	return e.reserveAt(now)
}

// observe is the answer resp of class to an attempt paced at gen, at now,
// with a throttle's server wait read from resp's header.
func (p *testPacer) observe(req *http.Request, class retry.Class, resp *http.Response, gen uint64, now time.Time) {
	f := retry.Feedback{Class: class, Response: resp}
	if class == retry.Throttled && resp != nil {
		f.Wait, f.Hinted = retry.ServerWait(resp.Header, now, retry.ResetIgnore)
	}
	p.observeState(p.state(req), false, f, gen, now)
}

// observeHint is observe of a success whose response said the quota is
// spent, for wait: the Transport reads that from its headers.
func (p *testPacer) observeHint(req *http.Request, wait time.Duration, gen uint64, now time.Time) {
	f := retry.Feedback{Class: retry.Success, Response: response(200), Wait: wait, Hinted: true}
	p.observeState(p.state(req), false, f, gen, now)
}

// observeState is the answer f of an attempt of e paced at gen, at now,
// which held a slot of slow start if slot.
func (p *testPacer) observeState(e *entry, slot bool, f retry.Feedback, gen uint64, now time.Time) {
	ev := Event{Kind: Answer, Slot: slot, Class: f.Class, Answered: f.Response != nil,
		Hinted: f.Hinted, Wait: f.Wait, Gen: gen, ForRate: true}
	if f.Class == retry.Throttled && p.Refusal != nil {
		ev.ForRate = p.Refusal(f)
	}
	if f.Class == retry.Success {
		ev.OK = 1
	}
	e.step(now, ev)
}

// step applies ev with the attempts sent since the last step.
func (e *entry) step(now time.Time, ev Event) Effects {
	ev.Sent += e.sent
	e.sent = 0
	return e.st.Step(now, ev)
}

// reserveAt takes a turn at now, with no deadline: nil when the key is
// not engaged.
func (e *entry) reserveAt(now time.Time) (time.Duration, *reservation) {
	fx := e.step(now, Event{Kind: Reserve})
	if !fx.Paced {
		return 0, nil
	}
	return fx.Turn, &reservation{e: e, at: fx.At, next: fx.Next, gen: fx.Gen}
}

// change runs f on the key's state, as a step would: the tests set
// states up with it.
func (e *entry) change(f func(s *State)) {
	e.st.meter.count(e.sent, 0)
	e.sent = 0
	f(&e.st)
	e.st.signals()
}

// slowState returns slow start's window and whether the key is in it.
func slowState(e *entry) (inflight, slots, waiting int, slow bool) {
	inflight, slots, waiting = e.st.Window()
	return inflight, slots, waiting, e.st.Mode() == ModeSlowStart
}

// reservation is a turn handed out by reserveAt.
type reservation struct {
	e        *entry
	at, next time.Time
	gen      uint64
}

func (r *reservation) stale() bool { return r != nil && r.e.st.Stale(r.gen) }

func (r *reservation) generation() uint64 {
	if r == nil {
		return 0
	}
	return r.gen
}

// cancel gives the turn back.
func (r *reservation) cancel() {
	r.e.step(r.e.p.clock(), Event{Kind: Cancel, At: r.at, Next: r.next})
}

// clock is the time of the steps that the tests do not time: the tests
// that give turns back take them at pacerEpoch.
func (p *testPacer) clock() time.Time { return pacerEpoch }

// The entry is a pacesim.Key: the simulations drive it.
func (e *entry) Reserve(at time.Time) (time.Duration, pacesim.Turn) {
	d, r := e.reserveAt(at)
	if r == nil {
		return d, nil
	}
	return d, r
}

func (e *entry) Send() { e.sent++ }

func (e *entry) Answer(class retry.Class, gen uint64, at time.Time) {
	e.p.observeState(e, false, retry.Feedback{Class: class, Response: &http.Response{}}, gen, at)
}

func (e *entry) State() pacesim.State {
	return pacesim.State{Rate: e.st.Rate(), Engaged: e.st.Engaged(), Gen: e.st.Gen(),
		Paused: e.st.Paused(), Held: e.st.Mode() == ModeHeld}
}

func (r *reservation) Gen() uint64 { return r.gen }
func (r *reservation) Stale() bool { return r.stale() }

// newKey returns a key of a new testPacer with the scenario's settings.
func newKey(s pacesim.Setup) pacesim.Key {
	p := &testPacer{InitialWindow: s.InitialWindow}
	if s.AIMD {
		p.Adapt = AIMD
	}
	return p.state(&http.Request{URL: &url.URL{Host: "api.example"}})
}
