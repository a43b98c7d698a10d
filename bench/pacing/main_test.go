package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// TestRunSmall runs every strategy once against the in-process server, with
// few clients, and checks that each finished every request and that the
// table names each strategy.
func TestRunSmall(t *testing.T) {
	c := config{server: "fake", clients: 10, requests: 2, rate: 400, rounds: 1, limit: 20 * time.Second}
	if err := c.validate(); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := run(c, &out); err != nil {
		t.Fatalf("run: %v", err)
	}
	for _, s := range strategies {
		line := ""
		for _, l := range strings.Split(out.String(), "\n") {
			if strings.Contains(l, s.name+" ") {
				line = l
			}
		}
		if line == "" {
			t.Fatalf("no row for %s in:\n%s", s.name, out.String())
		}
		// The "failed" column is the third number on the row.
		if f := strings.Fields(line); len(f) < 4 || f[3] != "0" {
			t.Errorf("%s: requests failed: %q", s.name, line)
		}
	}
}

func TestValidate(t *testing.T) {
	for _, c := range []config{
		{server: "apache", clients: 1, requests: 1, rate: 1, rounds: 1, limit: time.Second},
		{server: "fake", clients: 0, requests: 1, rate: 1, rounds: 1, limit: time.Second},
		{server: "fake", clients: 1, requests: 1, rate: 0, rounds: 1, limit: time.Second},
		{server: "fake", clients: 1, requests: 1, rate: 1, rounds: 1, limit: 0},
	} {
		if err := c.validate(); err == nil {
			t.Errorf("validate(%+v) = nil; want an error", c)
		}
	}
}
