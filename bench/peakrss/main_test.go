package main

import (
	"bytes"
	"fmt"
	"os"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

// TestMain makes the test binary a child when the parent under test starts
// it as one, as the program is for itself.
func TestMain(m *testing.M) {
	if lib := os.Getenv(childEnv); lib != "" {
		if err := child(lib, os.Getenv("PEAKRSS_URL"), os.Getenv("PEAKRSS_SIZE"), os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	goleak.VerifyTestMain(m)
}

// TestMeasureAll runs every library's child once with a small body: the
// server must get every byte, and each child must report a peak.
func TestMeasureAll(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	results, err := measureAll(exe, 1<<20, 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(results) != 5 {
		t.Fatalf("%d results; want idle and 4 libraries", len(results))
	}
	for _, r := range results {
		if r.maxRSS[0] <= 0 || r.vmHWM[0] <= 0 {
			t.Errorf("%s: max RSS %d KiB, VmHWM %d KiB; want both positive", r.lib, r.maxRSS[0], r.vmHWM[0])
		}
	}
	var out bytes.Buffer
	printTable(&out, 1<<20, results)
	for _, lib := range []string{"idle", "bare", "retry", "retryablehttp", "failsafe"} {
		if !strings.Contains(out.String(), lib) {
			t.Errorf("table lacks %s:\n%s", lib, out.String())
		}
	}
}

func TestPatternReader(t *testing.T) {
	var buf bytes.Buffer
	n, err := buf.ReadFrom(&patternReader{left: 100})
	if err != nil || n != 100 {
		t.Fatalf("ReadFrom = %d, %v; want 100, nil", n, err)
	}
	if got := buf.String()[:30]; got != "abcdefghijklmnopqrstuvwxyzabcd" {
		t.Errorf("pattern starts %q", got)
	}
}

func TestParseKiB(t *testing.T) {
	got, err := parseKiB("Name:\tx\nVmHWM:\t   12345 kB\nVmRSS:\t 1 kB\n", "VmHWM:")
	if err != nil || got != 12345 {
		t.Errorf("parseKiB = %d, %v; want 12345, nil", got, err)
	}
	if _, err := parseKiB("VmRSS: 1 kB\n", "VmHWM:"); err == nil {
		t.Error("parseKiB found a missing key")
	}
}
