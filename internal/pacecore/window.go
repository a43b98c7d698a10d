package pacecore

import "time"

// window is slow start's (RFC 5681's, by attempts): at most slots
// unanswered, one more per success, doubling each round trip. It ends at
// the first answer no attempt was refused a slot before, or after
// SlowStartLimit; a refusal engages the key as it would an idle one.
type window struct {
	slots, inflight int
	refused         int       // attempts refused a slot since the last answer
	began           time.Time // the first attempt's time
}

// take gives an attempt a slot, or tells it to wait for one.
func (w *window) take(now time.Time) Grant {
	if w.began.IsZero() {
		w.began = now
	}
	if w.inflight < w.slots {
		w.inflight++
		return Grant{Go: true, Slot: true}
	}
	w.refused++
	return Grant{WaitSlot: true, Until: w.began.Add(SlowStartLimit)}
}

// release gives a slot back, opening one more after a success, and
// reports whether an attempt may be waiting for it.
func (w *window) release(success bool) bool {
	w.inflight = max(w.inflight-1, 0)
	if success {
		w.slots++
	}
	return w.refused > 0
}

// answered reports whether the demand fits in the window: no attempt was
// refused a slot since the last answer.
func (w *window) answered() (fits bool) {
	fits = w.refused == 0
	w.refused = 0
	return fits
}

// over reports whether the slow start has lasted SlowStartLimit.
func (w *window) over(now time.Time) bool {
	return !w.began.IsZero() && now.Sub(w.began) >= SlowStartLimit
}
