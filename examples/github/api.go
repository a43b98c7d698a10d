package main

import (
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// fakeAPI is a fake of the few GitHub REST endpoints the program calls,
// with GitHub's rate-limit answers: a primary limit of perSecond requests
// in each wall-clock second (GitHub's is per hour, with the same headers),
// and on the first POST of each issue a secondary limit. It is safe for
// concurrent use.
type fakeAPI struct {
	perSecond int

	mu     sync.Mutex
	second int64 // the Unix second the count is for
	count  int
	seen   map[string]bool // issue titles refused once already
	denied bool

	requests, limited, issues atomic.Int64
}

func newFakeAPI(perSecond int) *fakeAPI {
	return &fakeAPI{perSecond: perSecond, seen: make(map[string]bool)}
}

// denyAll makes every later request fail as bad credentials do.
func (a *fakeAPI) denyAll() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.denied = true
}

func (a *fakeAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	a.requests.Add(1)
	body, _ := io.ReadAll(r.Body)
	now := time.Now()
	a.mu.Lock()
	if a.denied {
		a.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusForbidden)
		fmt.Fprint(w, `{"message":"Bad credentials","documentation_url":"https://docs.github.com/rest"}`)
		return
	}
	if s := now.Unix(); s != a.second {
		a.second, a.count = s, 0
	}
	a.count++
	remaining := a.perSecond - a.count
	reset := a.second + 1
	firstTry := false
	if r.Method == http.MethodPost {
		key := string(body)
		firstTry = !a.seen[key]
		a.seen[key] = true
	}
	a.mu.Unlock()

	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-RateLimit-Limit", strconv.Itoa(a.perSecond))
	w.Header().Set("X-RateLimit-Remaining", strconv.Itoa(max(remaining, 0)))
	w.Header().Set("X-RateLimit-Reset", strconv.FormatInt(reset, 10))
	switch {
	case remaining < 0:
		a.limited.Add(1)
		w.WriteHeader(http.StatusForbidden)
		fmt.Fprint(w, `{"message":"API rate limit exceeded for user ID 1.","documentation_url":"https://docs.github.com/rest/overview/rate-limits-for-the-rest-api"}`)
	case firstTry:
		a.limited.Add(1)
		w.Header().Set("Retry-After", "1")
		w.WriteHeader(http.StatusForbidden)
		fmt.Fprint(w, `{"message":"You have exceeded a secondary rate limit. Please wait a few minutes before you try again.","documentation_url":"https://docs.github.com/rest/overview/rate-limits-for-the-rest-api"}`)
	case r.Method == http.MethodPost:
		n := a.issues.Add(1)
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, `{"number":%d,"title":"issue"}`, n)
	default:
		fmt.Fprint(w, `[{"id":1,"name":"demo","full_name":"octo/demo"}]`)
	}
}
