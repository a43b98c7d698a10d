package main

import (
	"bytes"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"
)

// TestMain makes the test binary a child when the parent under test starts
// it as one, as the program is for itself.
func TestMain(m *testing.M) {
	if spec := os.Getenv(childEnv); spec != "" {
		if err := child(spec); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestCutDownloads runs the harness small: 4 MiB bodies cut every
// 512 KiB, two cut runs per protocol, every one intact.
func TestCutDownloads(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := run(&out, exe, 4<<20, 512<<10, 2, 1, time.Minute, 0); err != nil {
		t.Fatal(err)
	}
	for _, proto := range []string{"h1", "h2"} {
		found := false
		for line := range strings.Lines(out.String()) {
			if f := strings.Fields(line); len(f) > 2 && f[0] == proto {
				found = true
				if f[1] != "2/2" {
					t.Errorf("%s: %s intact; want 2/2\n%s", proto, f[1], out.String())
				}
			}
		}
		if !found {
			t.Errorf("no %s row in\n%s", proto, out.String())
		}
	}
}
