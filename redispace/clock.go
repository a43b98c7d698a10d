package redispace

import (
	"sync"
	"time"
)

// fleetClock maps Redis's clock, on which a key's turns are due, onto
// the process's, on which its attempts sleep: from the call to Redis
// with the shortest round trip, as NTP does, Redis's time read at the
// midpoint of the call. Each call's own reply came a varying part of a
// millisecond or more after Redis read its time, with the process
// loaded; attempts timed from it reached the server up to 2 ms early or
// late, and a limiter without a burst refused turns 12.5 ms apart as
// closer than its 10 ms. Safe for concurrent use.
type fleetClock struct {
	mu     sync.Mutex
	offset time.Duration // the process's clock less Redis's
	rtt    time.Duration // the round trip of the call it was read from
	at     time.Time     // when it was read, on the process's clock
	set    bool
}

// ageWeight makes an old reading count as a round trip longer by this
// share of its age: a reading a second old gives way to one taken now
// whose round trip is a millisecond longer, so that the offset follows
// the clocks' drift.
const ageWeight = 1e-3

// sample takes a call sent and answered at sent and recv, on the
// process's clock, in which Redis read its clock as redis.
func (c *fleetClock) sample(sent, recv, redis time.Time) {
	rtt := recv.Sub(sent)
	c.mu.Lock()
	defer c.mu.Unlock()
	age := time.Duration(float64(recv.Sub(c.at)) * ageWeight)
	if c.set && rtt > c.rtt+age {
		return
	}
	c.offset = sent.Add(rtt / 2).Sub(redis)
	c.rtt, c.at, c.set = rtt, recv, true
}

// local returns t, on Redis's clock, on the process's, and whether the
// clock has a reading yet.
func (c *fleetClock) local(t time.Time) (time.Time, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return t.Add(c.offset), c.set
}
