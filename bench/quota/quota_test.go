package main

import (
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// A small run of every window and family, in memory: the quota is
// spread, not run into, and every call succeeds.
func TestMeasure(t *testing.T) {
	for _, w := range []Window{Fixed, Sliding} {
		for _, f := range []Family{XRateLimit, IETF} {
			run := Run{Window: w, Family: f, Lib: "retry", Store: "memory", Clients: 1, Goroutines: 4, Calls: 20, Limit: 10, Span: 500 * time.Millisecond}
			res, err := measure(run, nil, "")
			if err != nil {
				t.Fatal(err)
			}
			if res.Failed != 0 || res.MostPerSpan > 1 {
				t.Errorf("%s %s: %d failed, %d 429s in one window; want none failed, at most one", w, f, res.Failed, res.MostPerSpan)
			}
			if res.Elapsed > 3*run.Ideal() {
				t.Errorf("%s %s: %v, against an ideal of %v", w, f, res.Elapsed, run.Ideal())
			}
		}
	}
	if _, err := measure(Run{Window: "rolling", Family: IETF, Lib: "retry", Store: "memory"}, nil, ""); err == nil {
		t.Error("an unknown window is not refused")
	}
}
