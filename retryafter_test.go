package retry

import (
	"math"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// raNow is the fixed clock of the Retry-After tests: one minute before RFC
// 9110's example date, Sun, 06 Nov 1994 08:49:37 GMT.
var raNow = time.Date(1994, time.November, 6, 8, 48, 37, 0, time.UTC)

func TestParseRetryAfter(t *testing.T) {
	tests := []struct {
		name  string
		value string
		now   time.Time
		want  time.Duration
		ok    bool
	}{
		// delay-seconds: 1*DIGIT (RFC 9110 §10.2.3).
		{"zero", "0", raNow, 0, true},
		{"seconds", "120", raNow, 2 * time.Minute, true},
		{"leading zeros", "0005", raNow, 5 * time.Second, true},
		{"leading space", " 5", raNow, 5 * time.Second, true},
		{"trailing space", "5 ", raNow, 5 * time.Second, true},
		{"tabs", "\t5\t", raNow, 5 * time.Second, true},
		{"largest exact", "9223372036", raNow, 9223372036 * time.Second, true},
		{"saturates", "9223372037", raNow, maxDuration, true},
		{"saturates huge", "99999999999999999999", raNow, maxDuration, true},
		{"saturates very long", strings.Repeat("9", 1000), raNow, maxDuration, true},
		{"long zero prefix", strings.Repeat("0", 1000) + "7", raNow, 7 * time.Second, true},
		{"negative", "-1", raNow, 0, false},
		{"plus sign", "+5", raNow, 0, false},
		{"decimal", "1.5", raNow, 0, false},
		{"inner space", "1 5", raNow, 0, false},
		{"unit", "5s", raNow, 0, false},
		{"hex", "0x10", raNow, 0, false},
		{"exponent", "1e3", raNow, 0, false},
		{"empty", "", raNow, 0, false},
		{"only spaces", "  ", raNow, 0, false},
		{"letters", "abc", raNow, 0, false},
		{"arabic-indic digit", "٣", raNow, 0, false},
		{"fullwidth digit", "５", raNow, 0, false},
		{"digit then arabic-indic", "1٣", raNow, 0, false},
		{"newline", "\n5", raNow, 0, false},
		{"nbsp", "\u00a05", raNow, 0, false},
		{"list", "5, 10", raNow, 0, false},

		// HTTP-date, in the three forms of RFC 9110 §5.6.7.
		{"IMF-fixdate future", "Sun, 06 Nov 1994 08:49:37 GMT", raNow, time.Minute, true},
		{"RFC 850 future", "Sunday, 06-Nov-94 08:49:37 GMT", raNow, time.Minute, true},
		{"asctime future", "Sun Nov  6 08:49:37 1994", raNow, time.Minute, true},
		{"IMF-fixdate now", "Sun, 06 Nov 1994 08:48:37 GMT", raNow, 0, true},
		{"IMF-fixdate past", "Sun, 06 Nov 1994 08:00:00 GMT", raNow, 0, true},
		{"RFC 850 past", "Sunday, 06-Nov-94 08:00:00 GMT", raNow, 0, true},
		{"asctime past", "Sun Nov  6 08:00:00 1994", raNow, 0, true},
		{"IMF-fixdate long ago", "Thu, 01 Jan 1970 00:00:00 GMT", raNow, 0, true},
		{"IMF-fixdate next day", "Mon, 07 Nov 1994 08:48:37 GMT", raNow, 24 * time.Hour, true},
		{"IMF-fixdate spaces", "  Sun, 06 Nov 1994 08:49:37 GMT\t", raNow, time.Minute, true},
		{"IMF-fixdate saturates", "Fri, 31 Dec 9999 23:59:59 GMT", raNow, maxDuration, true},
		{"RFC 850 UTC", "Sunday, 06-Nov-94 08:49:37 UTC", raNow, time.Minute, true},
		{"IMF-fixdate zone PST", "Sun, 06 Nov 1994 08:49:37 PST", raNow, 0, false},
		{"IMF-fixdate zone UTC", "Sun, 06 Nov 1994 08:49:37 UTC", raNow, 0, false},
		{"IMF-fixdate offset", "Sun, 06 Nov 1994 08:49:37 +0000", raNow, 0, false},
		{"IMF-fixdate no zone", "Sun, 06 Nov 1994 08:49:37", raNow, 0, false},
		{"RFC 850 zone PST", "Sunday, 06-Nov-94 08:49:37 PST", raNow, 0, false},
		{"RFC 850 zone CEST", "Sunday, 06-Nov-94 08:49:37 CEST", raNow, 0, false},
		{"RFC 850 zone GMT+1", "Sunday, 06-Nov-94 08:49:37 GMT+1", raNow, 0, false},
		{"RFC 850 zone GMT-1", "Sunday, 06-Nov-94 08:49:37 GMT-1", raNow, 0, false},
		{"asctime with zone", "Sun Nov  6 08:49:37 GMT 1994", raNow, 0, false},
		{"negative year", "Sun, 06 Nov -994 08:49:37 GMT", raNow, 0, false},
		{"signed year", "Sun, 06 Nov +994 08:49:37 GMT", raNow, 0, false},
		{"RFC 850 signed year", "Sunday, 06-Nov--9 08:49:37 GMT", raNow, 0, false},
		{"ISO 8601", "1994-11-06T08:49:37Z", raNow, 0, false},
		{"RFC 3339 offset", "1994-11-06T08:49:37+00:00", raNow, 0, false},
		{"bad month", "Sun, 06 Foo 1994 08:49:37 GMT", raNow, 0, false},
		{"bad day", "Sun, 32 Nov 1994 08:49:37 GMT", raNow, 0, false},
		{"lower-case gmt", "Sun, 06 Nov 1994 08:49:37 gmt", raNow, 0, false},
		{"trailing text", "Sun, 06 Nov 1994 08:49:37 GMT x", raNow, 0, false},

		// RFC 850 two-digit years are the ones within 50 years of now.
		{"RFC 850 year 70 in 2070", "Thursday, 06-Nov-70 08:49:37 GMT",
			time.Date(2070, time.November, 6, 8, 48, 37, 0, time.UTC), time.Minute, true},
		{"RFC 850 year 69 in 1994", "Thursday, 06-Nov-69 08:49:37 GMT", raNow, 0, true},
		{"RFC 850 year 99 in 2001", "Saturday, 06-Nov-99 08:49:37 GMT",
			time.Date(2001, time.January, 1, 0, 0, 0, 0, time.UTC), 0, true},
		{"RFC 850 year 01 in 1999", "Monday, 01-Jan-01 00:00:00 GMT",
			time.Date(1999, time.December, 31, 0, 0, 0, 0, time.UTC), 367 * 24 * time.Hour, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := ParseRetryAfter(tt.value, tt.now)
			if got != tt.want || ok != tt.ok {
				t.Errorf("ParseRetryAfter(%q) = %v, %v; want %v, %v", tt.value, got, ok, tt.want, tt.ok)
			}
		})
	}
}

// TestParseRetryAfterLocalZone checks that an RFC 850 date is GMT whatever
// the machine's time zone, where time.Parse would read "PST" as local time.
func TestParseRetryAfterLocalZone(t *testing.T) {
	la, err := time.LoadLocation("America/Los_Angeles")
	if err != nil {
		t.Skipf("no time zone database: %v", err)
	}
	saved := time.Local
	time.Local = la
	defer func() { time.Local = saved }()

	for _, value := range []string{
		"Sunday, 06-Nov-94 00:49:37 PST",
		"Sunday, 06-Nov-94 01:49:37 PDT",
	} {
		if got, ok := ParseRetryAfter(value, raNow); ok {
			t.Errorf("ParseRetryAfter(%q) = %v, %v; want 0s, false", value, got, ok)
		}
	}
	const value = "Sunday, 06-Nov-94 08:49:37 GMT"
	if got, ok := ParseRetryAfter(value, raNow); got != time.Minute || !ok {
		t.Errorf("ParseRetryAfter(%q) = %v, %v; want %v, true", value, got, ok, time.Minute)
	}
}

func TestParseRetryAfterAllocs(t *testing.T) {
	for _, value := range []string{"120", "99999999999999999999", "-1", "", "Sun, 06 Nov 1994 08:49:37 GMT"} {
		if n := testing.AllocsPerRun(100, func() { ParseRetryAfter(value, raNow) }); n != 0 {
			t.Errorf("ParseRetryAfter(%q) allocates %v times; want 0", value, n)
		}
	}
}

func TestParseNumber(t *testing.T) {
	tests := []struct {
		in   string
		kind sfKind
		n    int64
		rest string
	}{
		{"0", sfInteger, 0, ""},
		{"-0", sfInteger, 0, ""},
		{"42;x", sfInteger, 42, ";x"},
		{"-42", sfInteger, -42, ""},
		{"999999999999999", sfInteger, 999999999999999, ""},
		{"-999999999999999", sfInteger, -999999999999999, ""},
		{"1000000000000000", sfInvalid, 0, "1000000000000000"},
		{"1.5", sfDecimal, 0, ""},
		{"-1.125,", sfDecimal, 0, ","},
		{"123456789012.123", sfDecimal, 0, ""},
		{"1234567890123.1", sfInvalid, 0, "1234567890123.1"},
		{"1.1234", sfInvalid, 0, "1.1234"},
		{"1.", sfInvalid, 0, "1."},
		{"1..2", sfInvalid, 0, "1..2"},
		{"1.2.3", sfDecimal, 0, ".3"},
		{"-", sfInvalid, 0, "-"},
		{"-a", sfInvalid, 0, "-a"},
		{"-.5", sfInvalid, 0, "-.5"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			kind, n, rest := parseNumber(tt.in)
			if kind != tt.kind || n != tt.n || rest != tt.rest {
				t.Errorf("parseNumber(%q) = %v, %v, %q; want %v, %v, %q", tt.in, kind, n, rest, tt.kind, tt.n, tt.rest)
			}
		})
	}
}

func FuzzParseRetryAfter(f *testing.F) {
	for _, seed := range []string{
		"0", "120", "0005", " 5", "5 ", "\t5", "-1", "+5", "1.5", "", " ", "abc", "0x10", "1e3",
		"9223372036", "9223372037", "99999999999999999999", "٣", "５",
		"Sun, 06 Nov 1994 08:49:37 GMT", "Sunday, 06-Nov-94 08:49:37 GMT", "Sun Nov  6 08:49:37 1994",
		"Sun, 06 Nov 1994 08:49:37 PST", "Sunday, 06-Nov-94 08:49:37 PST", "Sunday, 06-Nov-94 08:49:37 GMT+1",
		"Sun, 06 Nov -994 08:49:37 GMT", "Fri, 31 Dec 9999 23:59:59 GMT", "Thursday, 06-Nov-70 08:49:37 GMT",
	} {
		f.Add(seed, raNow.Unix())
	}
	f.Fuzz(func(t *testing.T, value string, nowUnix int64) {
		now := time.Unix(nowUnix%(1<<40), 0)
		got, ok := ParseRetryAfter(value, now)
		if got < 0 {
			t.Fatalf("ParseRetryAfter(%q) = %v, %v; want no negative wait", value, got, ok)
		}
		if !ok && got != 0 {
			t.Fatalf("ParseRetryAfter(%q) = %v, %v; want 0 when not ok", value, got, ok)
		}
		v := strings.Trim(value, " \t")
		n, digitsErr := strconv.ParseUint(v, 10, 64)
		allDigits := v != "" && strings.Trim(v, "0123456789") == ""
		if allDigits && !ok {
			t.Fatalf("ParseRetryAfter(%q) = %v, %v; want ok for delay-seconds", value, got, ok)
		}
		if allDigits && digitsErr == nil && n <= math.MaxInt64/uint64(time.Second) && got != time.Duration(n)*time.Second {
			t.Fatalf("ParseRetryAfter(%q) = %v, %v; want %v", value, got, ok, time.Duration(n)*time.Second)
		}
		if ok && !allDigits {
			if _, err := http.ParseTime(v); err != nil {
				t.Fatalf("ParseRetryAfter(%q) = %v, %v; want not ok, http.ParseTime fails: %v", value, got, ok, err)
			}
		}
	})
}

func FuzzRetryAfterDates(f *testing.F) {
	f.Add(int64(1735787105), int64(90))
	f.Add(int64(1735787105), int64(-3600))
	f.Add(int64(946684799), int64(1))               // a second before 2000
	f.Add(int64(4102444799), int64(86400))          // the end of 2099
	f.Add(int64(1735787105), int64(49*365*86400))   // 49 years ahead
	f.Add(int64(1735787105), int64(-49*365*86400))  // 49 years behind
	f.Add(int64(253402300799-86400), int64(3*3600)) // near the end of year 9999
	f.Fuzz(func(t *testing.T, nowUnix, ahead int64) {
		const maxAhead = 49 * 365 * 86400 // RFC 850 dates are unambiguous within 50 years
		nowUnix = nowUnix % 253402300799  // up to the end of year 9999
		if nowUnix < 0 {
			nowUnix = -nowUnix
		}
		ahead = ahead % maxAhead
		now := time.Unix(nowUnix, 0).UTC()
		when := now.Add(time.Duration(ahead) * time.Second)
		if when.Year() > 9999 || when.Year() < 1000 {
			return // not a four-digit year: no HTTP-date can say it
		}
		want := max(when.Sub(now), 0)
		for _, layout := range []string{http.TimeFormat, time.RFC850, time.ANSIC} {
			v := when.Format(layout)
			if layout == time.RFC850 {
				v = when.Format("Monday, 02-Jan-06 15:04:05 GMT")
			}
			got, ok := ParseRetryAfter(v, now)
			if !ok || got != want {
				t.Errorf("ParseRetryAfter(%q, %v) = %v, %v; want %v, true", v, now, got, ok, want)
			}
		}
	})
}
