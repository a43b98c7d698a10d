package retrytest

import (
	"net/http"
	"sync"
)

// Executions is an [http.Handler] for a real (loopback) server that counts
// the requests it executes per request id, the value of the header named
// Header (Idempotency-Key when empty), and hands each to Next (a 200 when
// nil). Every request that reaches it counts, whatever Next answers; one
// without the header counts under "". Count tells whether a client ever
// had one request executed twice. It is safe for concurrent use.
type Executions struct {
	Header string
	Next   http.Handler

	mu     sync.Mutex
	counts map[string]int
	total  int
}

func (e *Executions) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	name := e.Header
	if name == "" {
		name = "Idempotency-Key"
	}
	id := r.Header.Get(name)
	e.mu.Lock()
	if e.counts == nil {
		e.counts = make(map[string]int)
	}
	e.counts[id]++
	e.total++
	e.mu.Unlock()
	if e.Next == nil {
		w.WriteHeader(http.StatusOK)
		return
	}
	e.Next.ServeHTTP(w, r)
}

// Count returns how many times a request with id was executed.
func (e *Executions) Count(id string) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.counts[id]
}

// Total returns how many requests were executed.
func (e *Executions) Total() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.total
}

// Twice returns the ids executed more than once, in no order.
func (e *Executions) Twice() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	var ids []string
	for id, n := range e.counts {
		if n > 1 {
			ids = append(ids, id)
		}
	}
	return ids
}
