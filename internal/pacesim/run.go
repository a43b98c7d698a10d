package pacesim

import (
	"container/heap"
	"math/rand/v2"
	"testing"
	"time"
)

// Setup is what a scenario sets of the Pacer, as package pace's Pacer
// fields of the same names mean them.
type Setup struct {
	AIMD          bool // AdaptAIMD, else AdaptCubic
	InitialWindow int  // 0 or less: no slow start
}

// Key is one key of a Pacer, driven from one goroutine on the fake clock
// (the Pacer's Wait and Turn.Done, unrolled).
type Key interface {
	// Reserve takes a turn for an attempt about to be sent at at: the
	// wait for it, and the turn; nil when the key is not engaged.
	Reserve(at time.Time) (time.Duration, Turn)
	// Send counts an attempt as sent.
	Send()
	// Answer is the outcome of an attempt paced at generation gen (0:
	// not paced), at at: refused for the rate, or accepted.
	Answer(r Reply, gen uint64, at time.Time)
	// State is what the key's state says of itself after an answer.
	State() State
}

// Turn is a turn that Key.Reserve handed out.
type Turn interface {
	Gen() uint64 // the generation of the rate it was paced at
	Stale() bool // void: its attempt takes a new one
}

// State is what a trace records of a key's state.
type State struct {
	Rate    float64 // the rate in force
	Engaged bool    // the key paces its attempts
	Mode    uint8   // where the key stands (pacecore.Mode)
	Gen     uint64  // the turns' generation
}

func gen(t Turn) uint64 {
	if t == nil {
		return 0
	}
	return t.Gen()
}

// Run sends n attempts through k to srv, at demand attempts a second or
// as the key allows, one after another from from (a queue served first
// come, first served, each attempt counted as sent before its turn), and
// returns when the last was sent, the attempts refused, and how many
// times the key went from engaged to idle.
func Run(t testing.TB, k Key, srv *Server, from time.Time, demand float64, n int) (end time.Time, refused, disengaged int) {
	t.Helper()
	at := from
	wasEngaged := false
	for i := 0; i < n; i++ {
		if due := from.Add(time.Duration(float64(i) / demand * float64(time.Second))); due.After(at) {
			at = due
		}
		k.Send()
		d, turn := k.Reserve(at)
		srv.Trace.turn(at, d, gen(turn))
		at = at.Add(d)
		r := srv.Reply(at)
		no := r.Refused
		if no {
			refused++
		}
		k.Answer(r, gen(turn), at)
		st := k.State()
		srv.Trace.answer(at, no, gen(turn), st)
		if srv.OnAnswer != nil {
			srv.OnAnswer()
		}
		if wasEngaged && !st.Engaged {
			disengaged++
		}
		wasEngaged = st.Engaged
	}
	return at, refused, disengaged
}

// Kinds of event.
const (
	want   = iota // an attempt wants to go: it takes a turn
	due           // its turn is due, unless void
	answer        // its answer arrives
)

// event is one step of a client of Clients.
type event struct {
	at    time.Time
	kind  int
	tries int    // the attempts of the request refused so far
	turn  Turn   // due: the turn
	reply Reply  // answer: refused, and the wait asked for
	gen   uint64 // answer: the generation it was paced at
	key   int    // the index of the client's key (see Shared)
}

// events is a queue of events by time (container/heap).
type events []event

func (q events) Len() int           { return len(q) }
func (q events) Less(i, j int) bool { return q[i].at.Before(q[j].at) }
func (q events) Swap(i, j int)      { q[i], q[j] = q[j], q[i] }
func (q *events) Push(x any)        { *q = append(*q, x.(event)) }
func (q *events) Pop() any {
	old := *q
	e := old[len(old)-1]
	*q = old[:len(old)-1]
	return e
}

// Clients runs clients at once on the fake clock, each sending its
// requests one after another through k to srv and retrying a refused
// attempt after a backoff with full jitter (10 ms doubled for each
// attempt, up to a second), or after the wait the refusal asked for when
// that is longer, each answered rtt after it is sent (a quick refusal in
// a tenth of it: see Server.QuickRefusals). Turns
// are taken as Wait takes them: when an attempt wants to go, and again
// when the turn it waits for is void. Slow start is not simulated: k's
// must be off. It returns when n requests have succeeded, and the
// attempts refused on the way.
func Clients(t testing.TB, k Key, srv *Server, clients, n int, rtt time.Duration, rnd *rand.Rand) (end time.Time, refused int) {
	t.Helper()
	return Shared(t, []Key{k}, srv, clients, n, rtt, rnd)
}

// Shared is Clients for processes that share one server, each with a key
// of its own (keys[i]), the clients split evenly among them: a limit
// that several processes, each pacing by itself, run into together.
func Shared(t testing.TB, keys []Key, srv *Server, clients, n int, rtt time.Duration, rnd *rand.Rand) (end time.Time, refused int) {
	t.Helper()
	q := &events{}
	for c := range clients {
		heap.Push(q, event{at: Epoch, kind: want, key: c % len(keys)})
	}
	send := func(at time.Time, key int, gen uint64, tries int) {
		keys[key].Send()
		r := srv.Reply(at)
		lag := rtt
		if r.Refused && srv.QuickRefusals {
			lag = rtt / 10
		}
		heap.Push(q, event{at: at.Add(lag), kind: answer, reply: r, gen: gen, tries: tries, key: key})
	}
	for done := 0; done < n; {
		e := heap.Pop(q).(event)
		end = e.at
		k := keys[e.key]
		switch {
		case e.kind == answer:
			k.Answer(e.reply, e.gen, e.at)
			srv.Trace.answer(e.at, e.reply.Refused, e.gen, k.State())
			if !e.reply.Refused {
				done++
				heap.Push(q, event{at: e.at, kind: want, key: e.key})
				continue
			}
			refused++
			backoff := min(time.Second, 10*time.Millisecond<<min(e.tries, 10))
			wait := max(time.Duration(rnd.Int64N(int64(backoff))), e.reply.Hint)
			heap.Push(q, event{at: e.at.Add(wait), kind: want, tries: e.tries + 1, key: e.key})
		case e.kind == due && !e.turn.Stale():
			send(e.at, e.key, e.turn.Gen(), e.tries)
		default: // wants to go, or its turn is void
			d, turn := k.Reserve(e.at)
			srv.Trace.turn(e.at, d, gen(turn))
			if turn == nil {
				send(e.at, e.key, 0, e.tries) // not engaged
				continue
			}
			heap.Push(q, event{at: e.at.Add(d), kind: due, turn: turn, tries: e.tries, key: e.key})
		}
	}
	return end, refused
}

// Unpaced is a key with no Pacer: it never engages, and its attempts go
// as the clients send them. It runs a scenario's baseline.
type Unpaced struct{}

func (Unpaced) Reserve(time.Time) (time.Duration, Turn) { return 0, nil }
func (Unpaced) Send()                                   {}
func (Unpaced) Answer(Reply, uint64, time.Time)         {}
func (Unpaced) State() State                            { return State{} }
