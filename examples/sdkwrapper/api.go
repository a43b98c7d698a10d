package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"
)

// widgetsAPI is a local stand-in for a made-up rate-limited JSON API:
//
//	GET  /v1/widgets/{id}  200 a widget, 404 not_found
//	GET  /v1/widgets       200 {"widgets": [...]}
//	POST /v1/widgets       201 a new widget, 400 invalid
//
// It lets each API key make Burst requests at once and Rate a second after
// that, and answers the rest 429 with Retry-After: 1. It honours
// Idempotency-Key on POST as the IETF draft describes: a request with a
// key it has seen gets the first response again, marked Idempotent-Replayed,
// and acts on nothing; the same key with another body gets 422.
//
// Faults are scripted per route, one per request, so that the demo and the
// tests can show each retry: see fault. It is safe for concurrent use.
type widgetsAPI struct {
	apiKey string
	burst  float64
	rate   float64 // tokens per second

	mu      sync.Mutex
	tokens  float64
	last    time.Time
	widgets map[string]Widget
	keys    map[string]stored // Idempotency-Key -> first response
	faults  map[string][]fault
	log     []hit
}

// fault is what the API does to one request instead of serving it well.
type fault int

const (
	// serverError answers 500 without serving the request; the client
	// cannot tell that it was not served.
	serverError fault = iota + 1
	// lostResponse serves the request, then answers 502 Bad Gateway, as a
	// proxy whose backend answered too late: the client cannot tell
	// whether the request was served.
	lostResponse
	// stuck answers nothing until the client gives up.
	stuck
)

// stored is a response kept for an Idempotency-Key.
type stored struct {
	body   []byte // the request's
	status int
	resp   []byte
}

// hit is one request the API received.
type hit struct {
	Method, Path, Key string
	Status            int // 0: no response (the attempt was abandoned)
	Replayed          bool
}

func newWidgetsAPI(apiKey string, burst, rate float64) *widgetsAPI {
	return &widgetsAPI{
		apiKey:  apiKey,
		burst:   burst,
		rate:    rate,
		tokens:  burst,
		widgets: map[string]Widget{"w1": {ID: "w1", Name: "sprocket"}},
		keys:    map[string]stored{},
		faults:  map[string][]fault{},
	}
}

// inject makes the next requests to route ("GET /v1/widgets/w1") meet faults,
// one each, in order.
func (a *widgetsAPI) inject(route string, faults ...fault) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.faults[route] = append(a.faults[route], faults...)
}

// exhaust uses up the API key's quota for the next second, as other
// clients sharing the key would: a request in that second is refused
// however long the client's Pacer holds it first.
func (a *widgetsAPI) exhaust() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.tokens, a.last = 1-a.rate, time.Now()
}

// Hits returns the requests received so far.
func (a *widgetsAPI) Hits() []hit {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]hit(nil), a.log...)
}

// Count returns the number of widgets.
func (a *widgetsAPI) Count() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.widgets)
}

func (a *widgetsAPI) record(h hit) {
	a.mu.Lock()
	a.log = append(a.log, h)
	a.mu.Unlock()
}

func (a *widgetsAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		return
	}
	h := hit{Method: r.Method, Path: r.URL.Path, Key: r.Header.Get("Idempotency-Key")}
	if r.Header.Get("Authorization") != "Bearer "+a.apiKey {
		h.Status = http.StatusUnauthorized
		a.record(h)
		writeJSON(w, h.Status, apiError("unauthorized", "a valid API key is required"))
		return
	}
	if !a.admit(time.Now()) {
		h.Status = http.StatusTooManyRequests
		a.record(h)
		w.Header().Set("Retry-After", "1")
		writeJSON(w, h.Status, apiError("rate_limited", "slow down"))
		return
	}
	switch a.nextFault(r.Method + " " + r.URL.Path) {
	case serverError:
		h.Status = http.StatusInternalServerError
		a.record(h)
		writeJSON(w, h.Status, apiError("internal", "something went wrong"))
		return
	case stuck:
		a.record(h)
		<-r.Context().Done() // the client gave up on the attempt
		return
	case lostResponse:
		a.serve(r, body, &h) // done, but the answer is lost
		h.Status, h.Replayed = http.StatusBadGateway, false
		a.record(h)
		writeJSON(w, h.Status, apiError("bad_gateway", "the upstream did not answer in time"))
		return
	}
	status, resp := a.serve(r, body, &h)
	h.Status = status
	a.record(h)
	if h.Replayed {
		w.Header().Set("Idempotent-Replayed", "true")
	}
	writeRaw(w, status, resp)
}

// admit takes a token from the bucket, refilled at rate a second up to
// burst, if there is one.
func (a *widgetsAPI) admit(now time.Time) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if !a.last.IsZero() {
		a.tokens = min(a.burst, a.tokens+now.Sub(a.last).Seconds()*a.rate)
	}
	a.last = now
	if a.tokens < 1 {
		return false
	}
	a.tokens--
	return true
}

func (a *widgetsAPI) nextFault(route string) fault {
	a.mu.Lock()
	defer a.mu.Unlock()
	q := a.faults[route]
	if len(q) == 0 {
		return 0
	}
	a.faults[route] = q[1:]
	return q[0]
}

// serve does what the request asks and returns the response.
func (a *widgetsAPI) serve(r *http.Request, body []byte, h *hit) (int, []byte) {
	a.mu.Lock()
	defer a.mu.Unlock()
	switch {
	case r.Method == http.MethodGet && r.URL.Path == "/v1/widgets":
		list := struct {
			Widgets []Widget `json:"widgets"`
		}{Widgets: []Widget{}}
		for _, w := range a.widgets {
			list.Widgets = append(list.Widgets, w)
		}
		return marshal(http.StatusOK, list)
	case r.Method == http.MethodGet && strings.HasPrefix(r.URL.Path, "/v1/widgets/"):
		w, ok := a.widgets[strings.TrimPrefix(r.URL.Path, "/v1/widgets/")]
		if !ok {
			return marshal(http.StatusNotFound, apiError("not_found", "no widget "+strings.TrimPrefix(r.URL.Path, "/v1/widgets/")))
		}
		return marshal(http.StatusOK, w)
	case r.Method == http.MethodPost && r.URL.Path == "/v1/widgets":
		if s, ok := a.keys[h.Key]; ok && h.Key != "" {
			if !bytes.Equal(s.body, body) {
				return marshal(http.StatusUnprocessableEntity, apiError("key_reused", "Idempotency-Key was used with another request"))
			}
			h.Replayed = true
			return s.status, s.resp
		}
		var in struct {
			Name string `json:"name"`
		}
		status, resp := 0, []byte(nil)
		if json.Unmarshal(body, &in) != nil || in.Name == "" {
			status, resp = marshal(http.StatusBadRequest, apiError("invalid", "name is required"))
		} else {
			w := Widget{ID: fmt.Sprintf("w%d", len(a.widgets)+1), Name: in.Name}
			a.widgets[w.ID] = w
			status, resp = marshal(http.StatusCreated, w)
		}
		if h.Key != "" {
			a.keys[h.Key] = stored{body: body, status: status, resp: resp}
		}
		return status, resp
	}
	return marshal(http.StatusNotFound, apiError("not_found", "no route "+r.Method+" "+r.URL.Path))
}

func apiError(code, msg string) any {
	return map[string]map[string]string{"error": {"code": code, "message": msg}}
}

func marshal(status int, v any) (int, []byte) {
	b, err := json.Marshal(v)
	if err != nil {
		return http.StatusInternalServerError, []byte(`{"error":{"code":"internal","message":"encoding"}}`)
	}
	return status, b
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	status, body := marshal(status, v)
	writeRaw(w, status, body)
}

func writeRaw(w http.ResponseWriter, status int, body []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(body)
}
