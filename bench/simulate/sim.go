package main

import (
	"container/heap"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"github.com/backoff-jitter/retry"
)

// model is the setting of one simulated run: the AWS Architecture Blog's
// optimistic-concurrency experiment. One row holds a version, starting at 0;
// each client reads it and, as soon as the reply arrives, sends a write
// conditional on it. The write succeeds if the version is unchanged when it
// reaches the server (the version then goes up by one). A client whose write
// fails sleeps as its Backoff says and starts again with a read; every
// client stops after its one successful write, with no limit on retries.
//
// Every one-way message takes |Normal(latency, latencySD)|, drawn anew for
// each; the server takes no time and has no queue. All clients send their
// first read at time 0.
type model struct {
	clients   int
	backoff   retry.Backoff
	latency   time.Duration // mean one-way latency
	latencySD time.Duration // its standard deviation
	// limit is the longest simulated time a run may take: a run whose clock
	// would pass it is abandoned with an error (errTimeLimit).
	limit time.Duration
	// binWidth, if not zero, asks for the number of writes reaching the
	// server in each interval of this width (the time series of calls).
	binWidth time.Duration
}

// outcome is the result of one run.
type outcome struct {
	// calls is the number of writes that reached the server (reads are
	// not counted, as in the AWS simulator).
	calls int64
	// time is when the last client received its successful write's reply.
	time time.Duration
	// events is the number of messages delivered: four per attempt.
	events int64
	// bins[i] is the number of writes that reached the server in
	// [i*binWidth, (i+1)*binWidth), when the model asked for them.
	bins []int64
}

// errTimeLimit is the error of a run whose simulated clock passes the model's
// limit, as with no cap (a -cap of 0) and exponential sleeps.
var errTimeLimit = errors.New("the simulated clock passed the time limit")

// maxEvents returns the most messages a run with n clients can deliver.
// A write fails only when another client's write succeeded between its read
// and its arrival; the attempts of one client are disjoint in time, so each
// of the n-1 other successes fails at most one of them. A client thus makes
// at most n attempts, of four messages each.
func maxEvents(n int) int64 {
	return 4 * int64(n) * int64(n)
}

// simulate runs the model once, drawing every random number from rng.
func simulate(m model, rng *rand.Rand) (outcome, error) {
	s, err := newSim(m, rng)
	if err != nil {
		return s.out, err
	}
	for s.queue.Len() > 0 {
		if err := s.step(); err != nil {
			return s.out, err
		}
	}
	return s.out, nil
}

// kind is what a message is.
type kind uint8

const (
	readArrives  kind = iota // a read reaches the server
	readReplied              // the version read reaches the client
	writeArrives             // a conditional write reaches the server
	writeReplied             // the write's result reaches the client
)

// event is a message reaching its destination.
type event struct {
	at      time.Duration // when it arrives
	seq     uint64        // the order it was sent in, to break ties
	version int64         // the version read, or carried by a write
	client  int32
	kind    kind
	ok      bool // for writeReplied: whether the write succeeded
}

// queue is a priority queue of events, the earliest first, and among
// simultaneous events the first sent. It implements [heap.Interface].
type queue []event

// Len returns the number of events.
func (q queue) Len() int { return len(q) }

// Less orders events by time, then by the order they were sent.
func (q queue) Less(i, j int) bool {
	if q[i].at != q[j].at {
		return q[i].at < q[j].at
	}
	return q[i].seq < q[j].seq
}

// Swap swaps two events.
func (q queue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }

// Push appends x, an event.
func (q *queue) Push(x any) { *q = append(*q, x.(event)) }

// Pop removes and returns the last event.
func (q *queue) Pop() any {
	old := *q
	e := old[len(old)-1]
	*q = old[:len(old)-1]
	return e
}

// client is the state of one client.
type client struct {
	attempt int           // failed writes so far: the number of the next retry
	prev    time.Duration // the sleep before the previous retry, zero at first
}

// sim is one run in progress.
type sim struct {
	m         model
	rng       *rand.Rand
	maxEvents int64
	version   int64
	seq       uint64
	clients   []client
	queue     queue
	out       outcome
}

// newSim returns a run whose clients have all sent their first read at
// time 0.
func newSim(m model, rng *rand.Rand) (*sim, error) {
	s := &sim{
		m:         m,
		rng:       rng,
		maxEvents: maxEvents(m.clients),
		clients:   make([]client, m.clients),
		queue:     make(queue, 0, m.clients),
	}
	for i := range s.clients {
		e, err := s.send(int32(i), readArrives, 0)
		if err != nil {
			return s, err
		}
		s.queue = append(s.queue, e)
	}
	heap.Init(&s.queue)
	return s, nil
}

// step delivers the earliest message. Every message but a successful write's
// reply causes exactly one more, which takes its place in the queue.
func (s *sim) step() error {
	e := s.queue[0]
	s.out.events++
	if s.out.events > s.maxEvents {
		// Impossible (see maxEvents): a bug, reported rather than looped on.
		return fmt.Errorf("more than %d messages for %d clients", s.maxEvents, s.m.clients)
	}
	next, more, err := s.deliver(e)
	if err != nil {
		return err
	}
	if more {
		s.queue[0] = next
		heap.Fix(&s.queue, 0)
	} else {
		heap.Pop(&s.queue)
	}
	return nil
}

// deliver handles the arrival of e and returns the message it causes, if any.
func (s *sim) deliver(e event) (event, bool, error) {
	switch e.kind {
	case readArrives:
		next, err := s.send(e.client, readReplied, e.at)
		next.version = s.version
		return next, true, err
	case readReplied:
		next, err := s.send(e.client, writeArrives, e.at)
		next.version = e.version
		return next, true, err
	case writeArrives:
		s.count(e.at)
		ok := e.version == s.version
		if ok {
			s.version++
		}
		next, err := s.send(e.client, writeReplied, e.at)
		next.ok = ok
		return next, true, err
	}
	if e.ok {
		s.out.time = e.at
		return event{}, false, nil
	}
	return s.retry(e)
}

// retry handles a failed write's reply: the client sleeps, then sends its
// next read. The sleep is added to that read's travel time.
func (s *sim) retry(e event) (event, bool, error) {
	c := &s.clients[e.client]
	c.attempt++
	lat, err := s.latency()
	if err != nil {
		return event{}, false, err
	}
	// A negative wait (from a Backoff of the user's) is no wait, as for a
	// Transport; time must not run backwards.
	sleep := max(s.m.backoff.Delay(c.attempt, c.prev, s.rng.Float64()), 0)
	c.prev = sleep
	at, err := s.later(e.at, lat, sleep)
	return s.event(e.client, readArrives, at), true, err
}

// send returns a message of kind k sent by or to client c at time now.
func (s *sim) send(c int32, k kind, now time.Duration) (event, error) {
	lat, err := s.latency()
	if err != nil {
		return event{}, err
	}
	at, err := s.later(now, lat, 0)
	return s.event(c, k, at), err
}

// event returns a message arriving at the given time, numbered in the order
// sent.
func (s *sim) event(c int32, k kind, at time.Duration) event {
	s.seq++
	return event{at: at, seq: s.seq, client: c, kind: k}
}

// latency draws a one-way latency, |Normal(latency, latencySD)|.
func (s *sim) latency() (time.Duration, error) {
	f := math.Abs(float64(s.m.latency) + float64(s.m.latencySD)*s.rng.NormFloat64())
	if f > float64(s.m.limit) {
		return 0, fmt.Errorf("%w of %v (one message took %.3gs)", errTimeLimit, s.m.limit, f/1e9)
	}
	return time.Duration(f), nil
}

// later returns now+a+b, or errTimeLimit when that passes the limit (which
// also keeps the sum from overflowing: sleeps with no cap reach the largest
// time.Duration).
func (s *sim) later(now, a, b time.Duration) (time.Duration, error) {
	room := s.m.limit - now
	if a > room || b > room-a {
		return 0, fmt.Errorf("%w of %v", errTimeLimit, s.m.limit)
	}
	return now + a + b, nil
}

// count records a write reaching the server at time at.
func (s *sim) count(at time.Duration) {
	s.out.calls++
	if s.m.binWidth <= 0 {
		return
	}
	i := int(at / s.m.binWidth)
	for len(s.out.bins) <= i {
		s.out.bins = append(s.out.bins, 0)
	}
	s.out.bins[i]++
}
