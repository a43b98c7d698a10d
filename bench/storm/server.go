package main

import (
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"
)

// Reject is how the server answers a request over its capacity.
type Reject string

const (
	Reject429           Reject = "429"             // 429 Too Many Requests
	Reject429RetryAfter Reject = "429-retry-after" // 429 with Retry-After
	Reject503           Reject = "503"             // 503 Service Unavailable
)

// server is a loopback server of fixed capacity: a token bucket of Rate
// requests a second (Burst deep) and at most Concurrency requests at once.
// For the first Outage after Start it answers everything 503. Over capacity
// it answers as Reject says. A request it accepts takes Service to answer.
// It counts, per Interval since Start, the requests it saw and the ones it
// answered 200.
type server struct {
	cfg     Config
	srv     *httptest.Server
	limiter *rate.Limiter

	start    atomic.Int64 // unix nanoseconds; 0 until Start
	inflight atomic.Int64
	newConns atomic.Int64
	attempts []atomic.Int64 // per interval; the last one takes the rest
	ok       []atomic.Int64
}

func newServer(cfg Config) *server {
	n := int((cfg.Deadline+2*time.Second)/cfg.Interval) + 1
	s := &server{
		cfg:      cfg,
		limiter:  rate.NewLimiter(rate.Limit(cfg.Rate), cfg.Burst),
		attempts: make([]atomic.Int64, n),
		ok:       make([]atomic.Int64, n),
	}
	s.srv = httptest.NewUnstartedServer(http.HandlerFunc(s.serve))
	s.srv.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			s.newConns.Add(1)
		}
	}
	// Connections the clients abandon are closed after a while rather
	// than kept until the end of the run.
	s.srv.Config.IdleTimeout = 5 * time.Second
	s.srv.Start()
	return s
}

// Start marks time zero: the outage begins now.
func (s *server) Start(now time.Time) { s.start.Store(now.UnixNano()) }

func (s *server) Close() { s.srv.Close() }

// interval returns the index of the interval t falls in.
func (s *server) interval(t time.Time) int {
	i := int(time.Duration(t.UnixNano()-s.start.Load()) / s.cfg.Interval)
	return min(max(i, 0), len(s.attempts)-1)
}

func (s *server) serve(w http.ResponseWriter, r *http.Request) {
	now := time.Now()
	i := s.interval(now)
	s.attempts[i].Add(1)
	if time.Duration(now.UnixNano()-s.start.Load()) < s.cfg.Outage {
		http.Error(w, "outage", http.StatusServiceUnavailable)
		return
	}
	defer s.inflight.Add(-1)
	if s.inflight.Add(1) > int64(s.cfg.Concurrency) || !s.limiter.AllowN(now, 1) {
		s.reject(w)
		return
	}
	if s.cfg.Service > 0 {
		time.Sleep(s.cfg.Service) // the work a request takes
	}
	s.ok[s.interval(time.Now())].Add(1)
	w.Write([]byte("ok"))
}

func (s *server) reject(w http.ResponseWriter) {
	switch s.cfg.Reject {
	case Reject503:
		http.Error(w, "over capacity", http.StatusServiceUnavailable)
	case Reject429RetryAfter:
		w.Header().Set("Retry-After", strconv.Itoa(s.cfg.RetryAfter))
		fallthrough
	default:
		http.Error(w, "over capacity", http.StatusTooManyRequests)
	}
}

// series returns the requests seen and answered 200 per interval, up to
// the last interval with any.
func (s *server) series() (attempts, ok []int64) {
	last := 0
	for i := range s.attempts {
		if s.attempts[i].Load() > 0 || s.ok[i].Load() > 0 {
			last = i
		}
	}
	for i := 0; i <= last; i++ {
		attempts = append(attempts, s.attempts[i].Load())
		ok = append(ok, s.ok[i].Load())
	}
	return attempts, ok
}
