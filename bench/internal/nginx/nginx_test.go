package nginx

import (
	"io"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"
)

func ms(n int) time.Duration { return time.Duration(n) * time.Millisecond }

// TestParseLogLine parses lines of the "$msec $status" access log, good
// and malformed.
func TestParseLogLine(t *testing.T) {
	for _, tt := range []struct {
		line   string
		ms     int64
		status int
		ok     bool
	}{
		{"1712345678.123 200", 1712345678123, 200, true},
		{"1712345678.005 429", 1712345678005, 429, true},
		{"  1712345678.000\t429  extra ", 1712345678000, 429, true},
		{"", 0, 0, false},
		{"garbage", 0, 0, false},
		{"1712345678.123", 0, 0, false},      // no status
		{"1712345678 200", 0, 0, false},      // no milliseconds
		{"1712345678.12 200", 0, 0, false},   // two decimals
		{"1712345678.1234 200", 0, 0, false}, // four
		{".123 200", 0, 0, false},
		{"-1712345678.123 200", 0, 0, false},
		{"+1712345678.123 200", 0, 0, false},
		{"1712345678.-12 200", 0, 0, false},
		{"abc.def 200", 0, 0, false},
		{"99999999999999999999.123 200", 0, 0, false}, // overflows
		{"1712345678.123 abc", 0, 0, false},
		{"1712345678.123 42", 0, 0, false},   // no such status
		{"1712345678.123 1000", 0, 0, false}, // nor this
		{`127.0.0.1 - - [01/Jan/2025:00:00:00 +0000] "GET / HTTP/1.1" 200 3 "-" "Go"`, 0, 0, false}, // combined
	} {
		ms, status, ok := ParseLogLine(tt.line)
		if ms != tt.ms || status != tt.status || ok != tt.ok {
			t.Errorf("ParseLogLine(%q) = %d, %d, %v; want %d, %d, %v", tt.line, ms, status, ok, tt.ms, tt.status, tt.ok)
		}
	}
}

// TestParseLog parses a log: lines of other runs, malformed lines and an
// unfinished last line are skipped.
func TestParseLog(t *testing.T) {
	const start, end = 1712345678000, 1712345681000
	log := strings.Join([]string{
		"1712345600.000 200", // long before the run
		"1712345677.999 429", // a millisecond before: kept, as -1ms
		"1712345678.000 200",
		"oops",
		"",
		"1712345678.250 429",
		"1712345681.500 200", // within a second of the end
		"1712345700.000 200", // long after
		"1712345678.300 20",  // unfinished: nginx is writing it
	}, "\n")
	want := []Event{{ms(-1), 429}, {0, 200}, {ms(250), 429}, {ms(3500), 200}}
	if got := ParseLog([]byte(log), start, end); !reflect.DeepEqual(got, want) {
		t.Errorf("parseLog = %v; want %v", got, want)
	}
	if got := ParseLog([]byte("1712345678.000 200"), start, end); got != nil {
		t.Errorf("parseLog of an unfinished line = %v; want nil", got)
	}
	if got := ParseLog(nil, start, end); got != nil {
		t.Errorf("ParseLog(nil) = %v; want nil", got)
	}
}

// TestRoute53 starts the Route 53-style nginx, when nginx is installed, and
// checks that it answers ListHostedZones, refuses the call after it, too
// soon for a rate of 1 a second, as Route 53 does, and logs both.
func TestRoute53(t *testing.T) {
	n, err := StartRoute53(1, 0, false)
	if err != nil {
		t.Skipf("no nginx: %v", err)
	}
	defer n.Close()
	mark, err := n.Mark()
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	client := &http.Client{Transport: &http.Transport{}, Timeout: 10 * time.Second}
	defer client.CloseIdleConnections()
	get := func() (int, string) {
		t.Helper()
		resp, err := client.Get(strings.TrimSuffix(n.URL(), "/") + ListHostedZonesPath)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		if ct := resp.Header.Get("Content-Type"); ct != "text/xml" {
			t.Errorf("Content-Type %q; want text/xml", ct)
		}
		return resp.StatusCode, string(b)
	}
	if status, body := get(); status != http.StatusOK || body != ListHostedZonesXML {
		t.Errorf("first call: %d %q; want 200 and the empty list", status, body)
	}
	if status, body := get(); status != http.StatusBadRequest || body != ThrottlingXML {
		t.Errorf("second call: %d %q; want 400 and the Throttling document", status, body)
	}
	evs, err := n.Since(mark, start)
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 2 || evs[0].Status != http.StatusOK || evs[1].Status != http.StatusBadRequest {
		t.Errorf("logged %+v; want a 200 then a 400", evs)
	}
}

// TestBurst starts nginx at 1 request a second with a burst of 3, when
// nginx is installed: it accepts 4 requests at once and refuses the
// fifth; without a burst, it refuses the second. A negative burst is an
// error.
func TestBurst(t *testing.T) {
	if _, err := Start(1, -1, false); err == nil {
		t.Error("Start with a burst of -1: no error")
	}
	for _, burst := range []int{0, 3} {
		n, err := Start(1, burst, false)
		if err != nil {
			t.Skipf("no nginx: %v", err)
		}
		t.Cleanup(n.Close)
		client := &http.Client{Transport: &http.Transport{}, Timeout: 10 * time.Second}
		t.Cleanup(client.CloseIdleConnections)
		var got []int
		for i := 0; i < burst+2; i++ {
			resp, err := client.Get(n.URL())
			if err != nil {
				t.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			got = append(got, resp.StatusCode)
		}
		want := make([]int, burst+2)
		for i := range want {
			want[i] = http.StatusOK
		}
		want[burst+1] = http.StatusTooManyRequests
		if !reflect.DeepEqual(got, want) {
			t.Errorf("burst %d: statuses %v; want %v", burst, got, want)
		}
	}
}
