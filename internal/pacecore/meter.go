package pacecore

import "time"

// meter counts a key's attempts and answers in buckets of BucketWidth.
// Rates are read over the fewest latest buckets (two at least) holding
// minSamples successes, from their first event: a fast server's over the
// last round trips, a slow one's over enough answers, never a quiet spell.
type meter struct {
	start time.Time // the newest bucket's start; zero before any event
	b     [meterBuckets]tally
	head  int // the newest bucket's index in b
}

// tally is one bucket's counts, and its first event's and success's times.
type tally struct {
	first, firstOK    time.Time
	sent, ok, refused int64
	spent             int64 // refusals a published quota explains: no rate's
}

// roll makes now's bucket the newest, returning the one that ended.
func (m *meter) roll(now time.Time) (ended tally, rolled bool) {
	if m.start.IsZero() {
		m.start = now
		return tally{}, false
	}
	if now.Sub(m.start) >= BucketWidth {
		ended, rolled = m.b[m.head], true
	}
	for n := 0; now.Sub(m.start) >= BucketWidth; n++ {
		if n == meterBuckets {
			m.start = now // a quiet spell longer than the meter: start afresh
			break
		}
		m.head = (m.head + 1) % meterBuckets
		m.b[m.head] = tally{}
		m.start = m.start.Add(BucketWidth)
	}
	return ended, rolled
}

// count adds the attempts and successes the driver counted since the
// last event to that event's bucket (see State.Calm), then rolls to now,
// returning the bucket that ended, if one did.
func (m *meter) count(now time.Time, sent, ok int64) (ended tally, rolled bool) {
	if (sent > 0 || ok > 0) && !m.start.IsZero() {
		at := now
		if end := m.start.Add(BucketWidth - 1); at.After(end) {
			at = end
		}
		m.b[m.head].add(at, sent, ok)
		sent, ok = 0, 0
	}
	ended, rolled = m.roll(now)
	if sent > 0 || ok > 0 { // the first event
		m.b[m.head].add(now, sent, ok)
	}
	return ended, rolled
}

// add counts sent attempts and ok successes that came by at.
func (t *tally) add(at time.Time, sent, ok int64) {
	if t.first.IsZero() {
		t.first = at
	}
	t.sent += sent
	t.ok += ok
	if ok > 0 && t.firstOK.IsZero() {
		t.firstOK = at
	}
}

// answer adds an answer: a refusal, a quota's refusal, or a success.
func (m *meter) answer(now time.Time, refused, spent bool) {
	m.roll(now)
	t := &m.b[m.head]
	switch {
	case spent:
		t.spent++
	case refused:
		t.refused++
	default:
		t.add(now, 0, 1)
		return
	}
	t.add(now, 0, 0)
}

// spanFrom returns the seconds from from to now, at least minElapsed.
func spanFrom(from, now time.Time) float64 {
	if from.IsZero() {
		from = now
	}
	return max(now.Sub(from), minElapsed).Seconds()
}

// sum returns the counts of the buckets the rates are read over.
func (m *meter) sum() (sum tally) {
	for i := range meterBuckets {
		t := m.b[(m.head-i+meterBuckets)%meterBuckets]
		sum.sent += t.sent
		sum.ok += t.ok
		sum.refused += t.refused
		if !t.first.IsZero() {
			sum.first = t.first
		}
		if !t.firstOK.IsZero() {
			sum.firstOK = t.firstOK
		}
		if i >= 1 && sum.ok >= minSamples {
			break
		}
	}
	return sum
}

// unanswered returns the attempts sent that no answer counted: in
// flight, or answered with neither (the driver does not step for those).
func (m *meter) unanswered() int64 {
	var n int64
	for _, t := range m.b {
		n += t.sent - t.ok - t.refused - t.spent
	}
	return max(n, 0)
}

// sendRate returns the rate the client sent at, per second.
func (m *meter) sendRate(now time.Time) float64 {
	t := m.sum()
	return float64(t.sent) / spanFrom(t.first, now)
}

// accepted returns the rate the server accepted at, per second, read
// from the first success (an outage before it does not dilute it), and
// the successes it was read from.
func (m *meter) accepted(now time.Time) (rate float64, samples int64) {
	t := m.sum()
	return float64(t.ok) / spanFrom(t.firstOK, now), t.ok
}

// inBucket reports whether now falls in the newest bucket.
func (m *meter) inBucket(now time.Time) bool {
	return !m.start.IsZero() && now.Sub(m.start) < BucketWidth
}

// end returns when the newest bucket ends; zero before any event.
func (m *meter) end() time.Time {
	if m.start.IsZero() {
		return time.Time{}
	}
	return m.start.Add(BucketWidth)
}
