package main

import (
	"bytes"
	"strings"
	"testing"
)

const sample = `goos: linux
BenchmarkLoopback/scenario=S1-GET-1KiB/lib=bare         	   11229	     20000 ns/op	         0 conns/op	    6000 B/op	      70 allocs/op
BenchmarkLoopback/scenario=S1-GET-1KiB/lib=bare         	   11229	     22000 ns/op	         0 conns/op	    6000 B/op	      70 allocs/op
BenchmarkLoopback/scenario=S1-GET-1KiB/lib=retry-2      	   10000	     21000 ns/op	         0 conns/op	    6400 B/op	      72 allocs/op
BenchmarkLoopback/scenario=S4-GET-503x2-then-200/lib=retry 	    3483	     77000 ns/op	         0 conns/op	   16949 B/op	     197 allocs/op
BenchmarkLoopback/scenario=S4-GET-503x2-then-200/lib=retryablehttp 	    4015	     77600 ns/op	         0 conns/op	   17589 B/op	     214 allocs/op
PASS
`

func TestReadAndTargets(t *testing.T) {
	s := samples{}
	if err := s.read(strings.NewReader(sample)); err != nil {
		t.Fatal(err)
	}
	if m, _ := s.median(key{"Loopback", "S1-GET-1KiB", "bare", "ns/op"}); m != 21000 {
		t.Errorf("median = %v; want 21000", m)
	}
	if m, ok := s.median(key{"Loopback", "S1-GET-1KiB", "retry", "allocs/op"}); !ok || m != 72 {
		t.Errorf("the -2 suffix was not stripped: %v, %v", m, ok)
	}
	var out bytes.Buffer
	s.printRatios(&out)
	if !strings.Contains(out.String(), "1.00x") { // retry/bare S1 time: 21000/21000
		t.Errorf("no ratio in:\n%s", out.String())
	}
	out.Reset()
	s.printTargets(&out)
	for _, want := range []string{"+2", "1.000x", "0.992x of retryablehttp's time"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("targets lack %q:\n%s", want, out.String())
		}
	}
}

func TestPeakTarget(t *testing.T) {
	csv := "library,run,maxrss_kib,vmhwm_kib\nretry,1,18000,18000\nretryablehttp,1,170000,170000\nfailsafe,1,160000,160000\n"
	var out bytes.Buffer
	met, err := peakTarget(&out, strings.NewReader(csv))
	if err != nil || !met {
		t.Errorf("peakTarget = %v, %v; want met:\n%s", met, err, out.String())
	}
}
