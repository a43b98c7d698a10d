package main

import (
	"math"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"time"
)

// server is a loopback server of Workers workers, each taking Service per
// request (Service ÷ the capacity share while a capacity drop lasts), fed
// by a FIFO queue of at most Queue requests. A request that finds the
// queue full, or comes during an outage, is answered 503 at once. A
// queued request whose caller has gone is still worked on, as most
// servers do: that work is counted as wasted.
type server struct {
	cfg Config
	tl  *timeline
	srv *httptest.Server

	queue  chan *job
	share  atomic.Uint64 // the capacity share, as math.Float64bits; 1 normally
	outage atomic.Bool
	stop   chan struct{}
	done   chan struct{} // closed when every worker has returned
}

// job is a queued request: its caller's context, and a channel closed once
// a worker has served it.
type job struct {
	req    *http.Request
	served chan struct{}
}

func newServer(cfg Config, tl *timeline) *server {
	s := &server{
		cfg:   cfg,
		tl:    tl,
		queue: make(chan *job, cfg.Queue),
		stop:  make(chan struct{}),
		done:  make(chan struct{}),
	}
	s.setShare(1)
	s.srv = httptest.NewUnstartedServer(http.HandlerFunc(s.serve))
	s.srv.Config.ReadHeaderTimeout = 5 * time.Second
	s.srv.Start()
	var left atomic.Int32
	left.Store(int32(cfg.Workers))
	for range cfg.Workers {
		go func() {
			s.work()
			if left.Add(-1) == 0 {
				close(s.done)
			}
		}()
	}
	return s
}

func (s *server) URL() string { return s.srv.URL }

// Close stops the workers and the server.
func (s *server) Close() {
	close(s.stop)
	<-s.done
	s.srv.CloseClientConnections()
	s.srv.Close()
}

func (s *server) setShare(v float64) { s.share.Store(math.Float64bits(v)) }

func (s *server) serve(w http.ResponseWriter, r *http.Request) {
	s.tl.add(&s.tl.attempts, 1)
	if s.outage.Load() {
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	j := &job{req: r, served: make(chan struct{})}
	select {
	case s.queue <- j:
	default:
		w.WriteHeader(http.StatusServiceUnavailable) // the queue is full
		return
	}
	select {
	case <-j.served:
		w.WriteHeader(http.StatusOK)
	case <-r.Context().Done(): // the caller has gone; the job stays queued
	}
}

// work serves the queue until the server stops.
func (s *server) work() {
	for {
		select {
		case <-s.stop:
			return
		case j := <-s.queue:
			d := time.Duration(float64(s.cfg.Service) / math.Float64frombits(s.share.Load()))
			select {
			case <-time.After(d):
			case <-s.stop:
				return
			}
			if j.req.Context().Err() != nil {
				s.tl.add(&s.tl.wasted, 1)
			}
			close(j.served)
		}
	}
}
