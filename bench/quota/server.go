package main

import (
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// Window is how a server counts its quota: per fixed window, or over a
// window that slides.
type Window string

const (
	Fixed   Window = "fixed"
	Sliding Window = "sliding"
)

// Family is the fields a server publishes its quota in.
type Family string

const (
	XRateLimit Family = "x-ratelimit" // X-RateLimit-Limit, -Remaining, -Reset (a Unix time)
	IETF       Family = "ietf"        // RateLimit: "default";r=R;t=T
	// GitHub's: X-RateLimit-* with the reset in whole Unix seconds, and
	// X-RateLimit-Resource.
	GitHub Family = "github"
)

// server allows limit requests per window, published on every answer in
// one family of fields, and refuses the rest with 429 and the same fields.
// Fixed: the windows are back to back from the first request. Sliding: at
// most limit requests in any window's span; its reset is when the oldest
// of them leaves it.
type server struct {
	window Window
	family Family
	limit  int
	span   time.Duration

	mu       sync.Mutex
	start    time.Time   // Fixed: the current window's
	used     int         // Fixed: requests accepted in it
	log      []time.Time // Sliding: the accepted requests in the span, oldest first
	accepted int
	refused  []time.Time // when each 429 was sent
}

func (s *server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	now := time.Now()
	s.mu.Lock()
	ok, remaining, reset := s.admit(now)
	if ok {
		s.accepted++
	} else {
		s.refused = append(s.refused, now)
	}
	s.mu.Unlock()
	h := w.Header()
	switch s.family {
	case XRateLimit:
		h.Set("X-RateLimit-Limit", strconv.Itoa(s.limit))
		h.Set("X-RateLimit-Remaining", strconv.Itoa(remaining))
		// In milliseconds, rounded up: a client is never told to come
		// back early.
		ms := (reset.UnixNano() + int64(time.Millisecond) - 1) / int64(time.Millisecond)
		h.Set("X-RateLimit-Reset", fmt.Sprintf("%d.%03d", ms/1000, ms%1000))
	case GitHub:
		h.Set("X-RateLimit-Limit", strconv.Itoa(s.limit))
		h.Set("X-RateLimit-Remaining", strconv.Itoa(remaining))
		h.Set("X-RateLimit-Reset", strconv.FormatInt(reset.Add(time.Second-1).Unix(), 10)) // rounded up
		h.Set("X-RateLimit-Resource", "core")
	case IETF:
		// t is whole seconds, rounded up: a client is never told to come
		// back early.
		t := (reset.Sub(now) + time.Second - 1) / time.Second
		h.Set("RateLimit", fmt.Sprintf(`"default";r=%d;t=%d`, remaining, t))
	}
	if !ok {
		w.WriteHeader(http.StatusTooManyRequests)
	}
}

// admit counts a request at now, and returns whether it is accepted, the
// quota left after it and when that changes. s.mu is held.
func (s *server) admit(now time.Time) (ok bool, remaining int, reset time.Time) {
	if s.window == Fixed {
		if s.start.IsZero() || now.Sub(s.start) >= s.span {
			s.start, s.used = now, 0
		}
		if ok = s.used < s.limit; ok {
			s.used++
		}
		return ok, s.limit - s.used, s.start.Add(s.span)
	}
	i := 0
	for i < len(s.log) && now.Sub(s.log[i]) >= s.span {
		i++
	}
	s.log = s.log[i:]
	if ok = len(s.log) < s.limit; ok {
		s.log = append(s.log, now)
	}
	return ok, s.limit - len(s.log), s.log[0].Add(s.span)
}

// refusalsPerSpan returns the most 429s sent within any one span (a
// window for Fixed, a window's length for Sliding).
func (s *server) refusalsPerSpan() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	most, j := 0, 0
	for i, t := range s.refused {
		for t.Sub(s.refused[j]) >= s.span {
			j++
		}
		most = max(most, i-j+1)
	}
	return most
}
