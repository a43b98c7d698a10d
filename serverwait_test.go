package retry

import (
	"bytes"
	"net/http"
	"net/textproto"
	"strconv"
	"strings"
	"testing"
	"time"
)

// swNow is the fixed clock of the ServerWait tests, a Unix time after 2001
// as every live server's is: 2025-01-02T03:04:05Z, Unix 1735787045.
var swNow = time.Date(2025, time.January, 2, 3, 4, 5, 0, time.UTC)

func TestResetFormatString(t *testing.T) {
	tests := []struct {
		f    ResetFormat
		want string
	}{
		{ResetIgnore, "ResetIgnore"},
		{ResetDeltaSeconds, "ResetDeltaSeconds"},
		{ResetUnixSeconds, "ResetUnixSeconds"},
		{ResetUnixMillis, "ResetUnixMillis"},
		{ResetFormat(7), "ResetFormat(7)"},
		{ResetFormat(255), "ResetFormat(255)"},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			if got := tt.f.String(); got != tt.want {
				t.Errorf("ResetFormat(%d).String() = %q; want %q", uint8(tt.f), got, tt.want)
			}
		})
	}
}

// header builds an http.Header from name, value pairs, adding a value for
// each occurrence of a name, as a response with repeated field lines has.
func header(kv ...string) http.Header {
	h := make(http.Header)
	for i := 0; i+1 < len(kv); i += 2 {
		h.Add(kv[i], kv[i+1])
	}
	return h
}

func TestServerWait(t *testing.T) {
	unix := swNow.Unix()
	at := func(d time.Duration) string { return strconv.FormatInt(swNow.Add(d).Unix(), 10) }
	atMillis := func(d time.Duration) string { return strconv.FormatInt(swNow.Add(d).UnixMilli(), 10) }

	tests := []struct {
		name   string
		h      http.Header
		format ResetFormat
		want   time.Duration
		ok     bool
	}{
		{"none", header(), ResetUnixSeconds, 0, false},
		{"unrelated", header("Content-Type", "text/plain", "Date", "Thu, 02 Jan 2025 03:04:05 GMT"), ResetUnixSeconds, 0, false},

		// Retry-After.
		{"Retry-After seconds", header("Retry-After", "7"), ResetIgnore, 7 * time.Second, true},
		{"Retry-After zero", header("Retry-After", "0"), ResetIgnore, 0, true},
		{"Retry-After date", header("Retry-After", "Thu, 02 Jan 2025 03:05:05 GMT"), ResetIgnore, time.Minute, true},
		{"Retry-After past date", header("Retry-After", "Thu, 02 Jan 2025 03:00:00 GMT"), ResetIgnore, 0, true},
		{"Retry-After lower-case name", header("retry-after", "7"), ResetIgnore, 7 * time.Second, true},
		{"Retry-After invalid", header("Retry-After", "soon"), ResetIgnore, 0, false},
		{"Retry-After negative", header("Retry-After", "-5"), ResetIgnore, 0, false},
		{"Retry-After first line wins", header("Retry-After", "3", "Retry-After", "9"), ResetIgnore, 3 * time.Second, true},

		// Retry-After wins over every other signal when it is valid, even shorter.
		{"Retry-After over amz", header("Retry-After", "2", "X-Amz-Retry-After", "9000"), ResetIgnore, 2 * time.Second, true},
		{"Retry-After over RateLimit", header("Retry-After", "2", "RateLimit", `"p";r=0;t=60`), ResetIgnore, 2 * time.Second, true},
		{"Retry-After over RateLimit-Reset", header("Retry-After", "2", "RateLimit-Reset", "60"), ResetIgnore, 2 * time.Second, true},
		{"Retry-After over X-RateLimit-Reset", header("Retry-After", "2", "X-RateLimit-Reset", at(time.Hour)), ResetUnixSeconds, 2 * time.Second, true},
		{"Retry-After zero over others", header("Retry-After", "0", "X-Amz-Retry-After", "9000", "RateLimit", `"p";r=0;t=60`), ResetIgnore, 0, true},
		{"invalid Retry-After falls through", header("Retry-After", "1.5", "X-Amz-Retry-After", "1500"), ResetIgnore, 1500 * time.Millisecond, true},

		// Millisecond headers.
		{"amz", header("X-Amz-Retry-After", "1500"), ResetIgnore, 1500 * time.Millisecond, true},
		{"amz lower-case", header("x-amz-retry-after", "250"), ResetIgnore, 250 * time.Millisecond, true},
		{"amz zero", header("X-Amz-Retry-After", "0"), ResetIgnore, 0, true},
		{"amz spaces", header("X-Amz-Retry-After", " 20 "), ResetIgnore, 20 * time.Millisecond, true},
		{"amz negative", header("X-Amz-Retry-After", "-1500"), ResetIgnore, 0, false},
		{"amz decimal", header("X-Amz-Retry-After", "1.5"), ResetIgnore, 0, false},
		{"amz garbage", header("X-Amz-Retry-After", "later"), ResetIgnore, 0, false},
		{"amz saturates", header("X-Amz-Retry-After", "99999999999999999999"), ResetIgnore, maxDuration, true},
		{"amz largest exact", header("X-Amz-Retry-After", "9223372036854"), ResetIgnore, 9223372036854 * time.Millisecond, true},
		{"Retry-After-Ms", header("Retry-After-Ms", "750"), ResetIgnore, 750 * time.Millisecond, true},
		{"X-Ms-Retry-After-Ms", header("X-Ms-Retry-After-Ms", "40"), ResetIgnore, 40 * time.Millisecond, true},

		// RateLimit, draft-ietf-httpapi-ratelimit-headers-10.
		{"RateLimit exhausted", header("RateLimit", `"default";r=0;t=30`), ResetIgnore, 30 * time.Second, true},
		{"RateLimit remaining", header("RateLimit", `"default";r=5;t=30`), ResetIgnore, 0, false},
		{"RateLimit no t", header("RateLimit", `"default";r=0`), ResetIgnore, 0, false},
		{"RateLimit malformed", header("RateLimit", `"default";r=0;t=-30`), ResetIgnore, 0, false},

		// RateLimit-Reset of the earlier drafts.
		{"RateLimit-Reset alone", header("RateLimit-Reset", "45"), ResetIgnore, 45 * time.Second, true},
		{"RateLimit-Reset remaining 0", header("RateLimit-Remaining", "0", "RateLimit-Reset", "45"), ResetIgnore, 45 * time.Second, true},
		{"RateLimit-Reset remaining 00", header("RateLimit-Remaining", "00", "RateLimit-Reset", "45"), ResetIgnore, 45 * time.Second, true},
		{"RateLimit-Reset remaining 3", header("RateLimit-Remaining", "3", "RateLimit-Reset", "45"), ResetIgnore, 0, false},
		{"RateLimit-Reset remaining 10", header("RateLimit-Remaining", "10", "RateLimit-Reset", "45"), ResetIgnore, 0, false},
		{"RateLimit-Reset remaining garbage", header("RateLimit-Remaining", "many", "RateLimit-Reset", "45"), ResetIgnore, 45 * time.Second, true},
		{"RateLimit-Reset remaining negative", header("RateLimit-Remaining", "-1", "RateLimit-Reset", "45"), ResetIgnore, 45 * time.Second, true},
		{"RateLimit-Reset zero", header("RateLimit-Reset", "0"), ResetIgnore, 0, true},
		{"RateLimit-Reset negative", header("RateLimit-Reset", "-45"), ResetIgnore, 0, false},
		{"RateLimit-Reset decimal", header("RateLimit-Reset", "4.5"), ResetIgnore, 0, false},
		{"RateLimit-Reset garbage", header("RateLimit-Reset", "soon"), ResetIgnore, 0, false},
		{"RateLimit-Reset below the Unix floor", header("RateLimit-Reset", "999999999"), ResetIgnore, 999999999 * time.Second, true},
		{"RateLimit-Reset GitLab Unix time", header("RateLimit-Remaining", "0", "RateLimit-Reset", at(time.Minute)), ResetIgnore, time.Minute, true},
		{"RateLimit-Reset GitLab Unix time past", header("RateLimit-Reset", at(-time.Minute)), ResetIgnore, 0, true},
		{"RateLimit-Reset GitLab Unix floor", header("RateLimit-Reset", "1000000000"), ResetIgnore, 0, true},
		{"RateLimit-Reset saturates", header("RateLimit-Reset", "99999999999999999999"), ResetIgnore, maxDuration, true},
		{"RateLimit-Reset ignores X-RateLimit-Remaining", header("X-RateLimit-Remaining", "5", "RateLimit-Reset", "45"), ResetIgnore, 45 * time.Second, true},

		// X-RateLimit-Reset, only in the declared format.
		{"X ignored by default", header("X-RateLimit-Remaining", "0", "X-RateLimit-Reset", at(time.Minute)), ResetIgnore, 0, false},
		{"X unknown format", header("X-RateLimit-Reset", "60"), ResetFormat(9), 0, false},
		{"X delta", header("X-RateLimit-Reset", "60"), ResetDeltaSeconds, time.Minute, true},
		{"X delta fraction", header("X-RateLimit-Reset", "1.25"), ResetDeltaSeconds, 1250 * time.Millisecond, true},
		{"X delta long fraction", header("X-RateLimit-Reset", "0.1234567891"), ResetDeltaSeconds, 123456789 * time.Nanosecond, true},
		{"X delta saturates", header("X-RateLimit-Reset", "9223372036.9"), ResetDeltaSeconds, maxDuration, true},
		{"X delta largest exact", header("X-RateLimit-Reset", "9223372036.854775807"), ResetDeltaSeconds, maxDuration, true},
		{"X delta negative", header("X-RateLimit-Reset", "-60"), ResetDeltaSeconds, 0, false},
		{"X delta no fraction digits", header("X-RateLimit-Reset", "60."), ResetDeltaSeconds, 0, false},
		{"X delta no whole digits", header("X-RateLimit-Reset", ".5"), ResetDeltaSeconds, 0, false},
		{"X delta two points", header("X-RateLimit-Reset", "1.2.3"), ResetDeltaSeconds, 0, false},
		{"X unix seconds", header("X-RateLimit-Remaining", "0", "X-RateLimit-Reset", at(90*time.Second)), ResetUnixSeconds, 90 * time.Second, true},
		{"X unix seconds fraction", header("X-RateLimit-Reset", strconv.FormatInt(unix+1, 10)+".123"), ResetUnixSeconds, 1123 * time.Millisecond, true},
		{"X unix seconds now", header("X-RateLimit-Reset", at(0)), ResetUnixSeconds, 0, true},
		{"X unix seconds past", header("X-RateLimit-Reset", at(-time.Hour)), ResetUnixSeconds, 0, true},
		{"X unix seconds zero", header("X-RateLimit-Reset", "0"), ResetUnixSeconds, 0, true},
		{"X unix seconds given millis", header("X-RateLimit-Reset", atMillis(time.Minute)), ResetUnixSeconds, maxDuration, true},
		{"X unix seconds huge", header("X-RateLimit-Reset", "99999999999999999999"), ResetUnixSeconds, maxDuration, true},
		{"X unix seconds int64 max", header("X-RateLimit-Reset", "9223372036854775807"), ResetUnixSeconds, maxDuration, true},
		{"X unix seconds garbage", header("X-RateLimit-Reset", "tomorrow"), ResetUnixSeconds, 0, false},
		{"X unix seconds negative", header("X-RateLimit-Reset", "-1"), ResetUnixSeconds, 0, false},
		{"X unix millis", header("X-RateLimit-Reset", atMillis(2500*time.Millisecond)), ResetUnixMillis, 2500 * time.Millisecond, true},
		{"X unix millis past", header("X-RateLimit-Reset", atMillis(-time.Second)), ResetUnixMillis, 0, true},
		{"X unix millis given seconds", header("X-RateLimit-Reset", at(time.Minute)), ResetUnixMillis, 0, true},
		{"X unix millis huge", header("X-RateLimit-Reset", "99999999999999999999"), ResetUnixMillis, maxDuration, true},
		{"X unix millis fraction", header("X-RateLimit-Reset", atMillis(time.Second)+".5"), ResetUnixMillis, 0, false},
		{"X remaining", header("X-RateLimit-Remaining", "12", "X-RateLimit-Reset", at(time.Minute)), ResetUnixSeconds, 0, false},
		{"X remaining decimal zero", header("X-RateLimit-Remaining", "0.0", "X-RateLimit-Reset", "30"), ResetDeltaSeconds, 30 * time.Second, true},
		{"X remaining decimal", header("X-RateLimit-Remaining", "0.5", "X-RateLimit-Reset", "30"), ResetDeltaSeconds, 0, false},
		{"X remaining garbage", header("X-RateLimit-Remaining", "n/a", "X-RateLimit-Reset", "30"), ResetDeltaSeconds, 30 * time.Second, true},
		{"X ignores RateLimit-Remaining", header("RateLimit-Remaining", "12", "X-RateLimit-Reset", "30"), ResetDeltaSeconds, 30 * time.Second, true},

		// Without a valid Retry-After, the longest of the valid waits.
		{"longest amz", header("X-Amz-Retry-After", "90000", "RateLimit", `"p";r=0;t=30`, "RateLimit-Reset", "45"), ResetIgnore, 90 * time.Second, true},
		{"longest RateLimit", header("X-Amz-Retry-After", "1000", "RateLimit", `"p";r=0;t=60`, "RateLimit-Reset", "45"), ResetIgnore, time.Minute, true},
		{"longest RateLimit-Reset", header("X-Amz-Retry-After", "1000", "RateLimit", `"p";r=0;t=30`, "RateLimit-Reset", "45"), ResetIgnore, 45 * time.Second, true},
		{"longest X-RateLimit-Reset", header("X-Amz-Retry-After", "1000", "RateLimit-Reset", "45", "X-RateLimit-Reset", at(time.Hour)), ResetUnixSeconds, time.Hour, true},
		{"longest of the ms headers", header("X-Amz-Retry-After", "1000", "Retry-After-Ms", "3000", "X-Ms-Retry-After-Ms", "2000"), ResetIgnore, 3 * time.Second, true},
		{"longest ignores malformed", header("X-Amz-Retry-After", "-99999", "RateLimit", `"p";r=0;t=x`, "RateLimit-Reset", "5"), ResetIgnore, 5 * time.Second, true},
		{"zero and a wait", header("X-Amz-Retry-After", "0", "RateLimit-Reset", "5"), ResetIgnore, 5 * time.Second, true},
		{"all malformed", header("Retry-After", "x", "X-Amz-Retry-After", "x", "RateLimit", "x;", "RateLimit-Reset", "x", "X-RateLimit-Reset", "x"), ResetUnixSeconds, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := ServerWait(tt.h, swNow, tt.format)
			if got != tt.want || ok != tt.ok {
				t.Errorf("ServerWait(%v, %v) = %v, %v; want %v, %v", tt.h, tt.format, got, ok, tt.want, tt.ok)
			}
		})
	}
}

// TestServerWaitCanonicalNames checks that the names ServerWait looks up are
// in canonical form, so that http.Header.Get does not build a copy of them.
func TestServerWaitCanonicalNames(t *testing.T) {
	for _, name := range []string{
		"Retry-After", "X-Amz-Retry-After", "Retry-After-Ms", "X-Ms-Retry-After-Ms",
		"Ratelimit", "Ratelimit-Remaining", "Ratelimit-Reset",
		"X-Ratelimit-Remaining", "X-Ratelimit-Reset",
	} {
		if c := textproto.CanonicalMIMEHeaderKey(name); c != name {
			t.Errorf("CanonicalMIMEHeaderKey(%q) = %q; want it unchanged", name, c)
		}
	}
}

func TestServerWaitAllocs(t *testing.T) {
	h := header(
		"X-Amz-Retry-After", "1500",
		"RateLimit", `"burst";r=0;t=2, "daily";r=100;t=3600;pk=:cHsdsRa894==:`,
		"RateLimit-Remaining", "0",
		"RateLimit-Reset", "45",
		"X-RateLimit-Remaining", "0",
		"X-RateLimit-Reset", strconv.FormatInt(swNow.Unix()+60, 10),
	)
	if n := testing.AllocsPerRun(100, func() { ServerWait(h, swNow, ResetUnixSeconds) }); n != 0 {
		t.Errorf("ServerWait allocates %v times; want 0", n)
	}
	for _, value := range []string{"120", "Thu, 02 Jan 2025 03:05:05 GMT"} {
		h := header("Retry-After", value)
		if n := testing.AllocsPerRun(100, func() { ServerWait(h, swNow, ResetUnixSeconds) }); n != 0 {
			t.Errorf("ServerWait with Retry-After %q allocates %v times; want 0", value, n)
		}
	}
}

func TestParseRateLimit(t *testing.T) {
	tests := []struct {
		name  string
		lines []string
		want  time.Duration
		ok    bool
	}{
		// Examples of draft-ietf-httpapi-ratelimit-headers-10 §4.2, and exhausted variants.
		{"draft example", []string{`"default";r=50;t=30`}, 0, false},
		{"draft example no reset", []string{`"default";r=999;pk=:dHJpYWwxMjEzMjM=:`}, 0, false},
		{"draft example bytes", []string{`"default";r=300000000;t=60;pk=:QXBwLTk5OQ==:`}, 0, false},
		{"exhausted", []string{`"default";r=0;t=30`}, 30 * time.Second, true},
		{"exhausted t first", []string{`"default";t=30;r=0`}, 30 * time.Second, true},
		{"exhausted t zero", []string{`"default";r=0;t=0`}, 0, true},
		{"exhausted no t", []string{`"default";r=0`}, 0, false},
		{"exhausted partition key", []string{`"peruser";r=0;t=10;pk=:cHsdsRa894==:`}, 10 * time.Second, true},
		{"token name", []string{`default;r=0;t=30`}, 30 * time.Second, true},
		{"token name with colon and slash", []string{`a:b/c;r=0;t=30`}, 30 * time.Second, true},
		{"star token", []string{`*;r=0;t=30`}, 30 * time.Second, true},
		{"empty string name", []string{`"";r=0;t=30`}, 30 * time.Second, true},
		{"escaped name", []string{`"a\"b\\c";r=0;t=30`}, 30 * time.Second, true},
		{"leading zeros", []string{`"p";r=000;t=0030`}, 30 * time.Second, true},
		{"minus zero", []string{`"p";r=-0;t=-0`}, 0, true},
		{"largest Integer", []string{`"p";r=0;t=999999999999999`}, maxDuration, true},

		// Several policies and field lines.
		{"one exhausted of two", []string{`"burst";r=0;t=2, "daily";r=100;t=3600`}, 2 * time.Second, true},
		{"other exhausted of two", []string{`"burst";r=7;t=2, "daily";r=0;t=3600`}, time.Hour, true},
		{"longest of exhausted", []string{`"a";r=0;t=5,"b";r=0;t=50,"c";r=0;t=20`}, 50 * time.Second, true},
		{"no space after comma", []string{`"a";r=0;t=5,"b";r=1;t=50`}, 5 * time.Second, true},
		{"spaces and tabs around comma", []string{"\"a\";r=0;t=5 \t, \t\"b\";r=0;t=6"}, 6 * time.Second, true},
		{"space after semicolon", []string{`"a"; r=0; t=5`}, 5 * time.Second, true},
		{"surrounding spaces", []string{`  "a";r=0;t=5  `}, 5 * time.Second, true},
		{"two lines", []string{`"a";r=0;t=5`, `"b";r=0;t=9`}, 9 * time.Second, true},
		{"two lines one exhausted", []string{`"a";r=3;t=5`, `"b";r=0;t=9`}, 9 * time.Second, true},
		{"empty line", []string{`"a";r=0;t=5`, ``}, 5 * time.Second, true},
		{"empty", []string{``}, 0, false},
		{"none", nil, 0, false},

		// Unknown parameters are comments, of any type.
		{"unknown integer", []string{`"a";r=0;t=5;acme-x=3`}, 5 * time.Second, true},
		{"unknown decimal", []string{`"a";r=0;t=5;x=-1.5`}, 5 * time.Second, true},
		{"unknown string", []string{`"a";r=0;t=5;x="q;r=9,t=1"`}, 5 * time.Second, true},
		{"unknown token", []string{`"a";r=0;t=5;x=tok/en`}, 5 * time.Second, true},
		{"unknown boolean", []string{`"a";r=0;t=5;x=?0;y`}, 5 * time.Second, true},
		{"unknown date", []string{`"a";r=0;t=5;x=@1659578233`}, 5 * time.Second, true},
		{"unknown display string", []string{`"a";r=0;t=5;x=%"f%c3%bc"`}, 5 * time.Second, true},
		{"unknown star key", []string{`"a";r=0;*x.y_z-1=1;t=5`}, 5 * time.Second, true},

		// A repeated key keeps its last value (RFC 9651 §4.2.3.2).
		{"repeated r", []string{`"a";r=0;t=5;r=2`}, 0, false},
		{"repeated r to zero", []string{`"a";r=2;t=5;r=0`}, 5 * time.Second, true},
		{"repeated t", []string{`"a";r=0;t=5;t=7`}, 7 * time.Second, true},

		// Malformed: the whole field is ignored (draft-10 §7).
		{"missing r", []string{`"a";t=5`}, 0, false},
		{"missing r in one", []string{`"a";r=0;t=5, "b";t=9`}, 0, false},
		{"negative r", []string{`"a";r=-1;t=5`}, 0, false},
		{"negative t", []string{`"a";r=0;t=-5`}, 0, false},
		{"decimal r", []string{`"a";r=0.0;t=5`}, 0, false},
		{"decimal t", []string{`"a";r=0;t=5.5`}, 0, false},
		{"string t", []string{`"a";r=0;t="5"`}, 0, false},
		{"boolean r", []string{`"a";r;t=5`}, 0, false},
		{"Integer too long", []string{`"a";r=0;t=1000000000000000`}, 0, false},
		{"Decimal too long", []string{`"a";r=0;t=5;x=1234567890123.5`}, 0, false},
		{"Decimal fraction too long", []string{`"a";r=0;t=5;x=1.2345`}, 0, false},
		{"Decimal no fraction", []string{`"a";r=0;t=5;x=1.`}, 0, false},
		{"sign alone", []string{`"a";r=0;t=5;x=-`}, 0, false},
		{"plus sign", []string{`"a";r=0;t=+5`}, 0, false},
		{"space before semicolon", []string{`"a" ;r=0;t=5`}, 0, false},
		{"space around equals", []string{`"a";r = 0;t=5`}, 0, false},
		{"upper-case key", []string{`"a";R=0;t=5`}, 0, false},
		{"empty key", []string{`"a";=0;r=0;t=5`}, 0, false},
		{"empty value", []string{`"a";r=;t=5`}, 0, false},
		{"trailing comma", []string{`"a";r=0;t=5,`}, 0, false},
		{"leading comma", []string{`,"a";r=0;t=5`}, 0, false},
		{"double comma", []string{`"a";r=0;t=5,,"b";r=1`}, 0, false},
		{"missing comma", []string{`"a";r=0;t=5 "b";r=1`}, 0, false},
		{"semicolon separator", []string{`"a";r=0;t=5;"b";r=1`}, 0, false},
		{"unterminated string", []string{`"a;r=0;t=5`}, 0, false},
		{"bad escape", []string{`"a\n";r=0;t=5`}, 0, false},
		{"control in string", []string{"\"a\x01\";r=0;t=5"}, 0, false},
		{"non-ASCII in string", []string{`"ä";r=0;t=5`}, 0, false},
		{"non-ASCII digit", []string{`"a";r=0;t=٣`}, 0, false},
		{"integer name", []string{`5;r=0;t=5`}, 0, false},
		{"byte sequence name", []string{`:YQ==:;r=0;t=5`}, 0, false},
		{"inner list", []string{`("a" "b");r=0;t=5`}, 0, false},
		{"bad byte sequence", []string{`"a";r=0;t=5;pk=:a$b:`}, 0, false},
		{"unterminated byte sequence", []string{`"a";r=0;t=5;pk=:YQ==`}, 0, false},
		{"bad boolean", []string{`"a";r=0;t=5;x=?2`}, 0, false},
		{"decimal date", []string{`"a";r=0;t=5;x=@1.5`}, 0, false},
		{"upper-case hex display string", []string{`"a";r=0;t=5;x=%"%C3"`}, 0, false},
		{"unterminated display string", []string{`"a";r=0;t=5;x=%"a`}, 0, false},
		{"percent alone", []string{`"a";r=0;t=5;x=%`}, 0, false},
		{"legacy syntax", []string{`limit=100, remaining=0, reset=30`}, 0, false},
		{"bare number", []string{`30`}, 0, false},
		{"malformed second line", []string{`"a";r=0;t=5`, `"b";r=0;t=`}, 0, false},
		{"malformed first line", []string{`"b";r=0;t=`, `"a";r=0;t=5`}, 0, false},
		{"leading tab", []string{"\t\"a\";r=0;t=5"}, 5 * time.Second, true},
		{"newline", []string{"\"a\";r=0;t=5\n"}, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := rateLimitWait(tt.lines)
			if got != tt.want || ok != tt.ok {
				t.Errorf("rateLimitWait(%q) = %v, %v; want %v, %v", tt.lines, got, ok, tt.want, tt.ok)
			}
		})
	}
}

func FuzzServerWait(f *testing.F) {
	f.Add("", "", "", "", "", "", "", uint8(ResetIgnore), swNow.Unix())
	f.Add("120", "1500", `"p";r=0;t=30`, "0", "45", "0", "1735787105", uint8(ResetUnixSeconds), swNow.Unix())
	f.Add("soon", "-1", `"a";r=0;t=5, "b";r=1`, "", "1735787105", "", "1735787105000", uint8(ResetUnixMillis), swNow.Unix())
	f.Add("Thu, 02 Jan 2025 03:05:05 GMT", "x", "x;", "3", "99999999999999999999", "0.0", "1.25", uint8(ResetDeltaSeconds), swNow.Unix())
	f.Add("", "99999999999999999999", `"p";r=0;t=999999999999999`, "-1", "-45", "n/a", "99999999999999999999", uint8(ResetUnixSeconds), int64(0))
	f.Fuzz(func(t *testing.T, retryAfter, amz, rateLimit, remaining, reset, xRemaining, xReset string, format uint8, nowUnix int64) {
		now := time.Unix(nowUnix%(1<<40), 0)
		h := http.Header{
			"Retry-After":           {retryAfter},
			"X-Amz-Retry-After":     {amz},
			"Ratelimit":             {rateLimit},
			"Ratelimit-Remaining":   {remaining},
			"Ratelimit-Reset":       {reset},
			"X-Ratelimit-Remaining": {xRemaining},
			"X-Ratelimit-Reset":     {xReset},
		}
		got, ok := ServerWait(h, now, ResetFormat(format))
		if got < 0 || !ok && got != 0 {
			t.Fatalf("ServerWait(%v, %v) = %v, %v; want a non-negative wait, 0 when not ok", h, ResetFormat(format), got, ok)
		}
		if d, raOK := ParseRetryAfter(retryAfter, now); raOK && (got != d || !ok) {
			t.Fatalf("ServerWait(%v, %v) = %v, %v; want Retry-After's %v, true", h, ResetFormat(format), got, ok, d)
		}
	})
}

func FuzzParseRateLimit(f *testing.F) {
	for _, seed := range []string{
		`"default";r=50;t=30`, `"default";r=0;t=30`, `"default";r=0`, `default;r=0;t=30`,
		`"burst";r=0;t=2, "daily";r=100;t=3600`, `"a"; r=0; t=5`, `"a";r=0;t=5;pk=:cHsdsRa894==:`,
		`"a";r=0;t=5;x=-1.5;y;z=?1;w=@12;v=%"f%c3%bc"`, `"a";r=0;t=-5`, `"a";r=0;t=999999999999999`,
		`"a";r=0;t=5,`, `("a" "b");r=0;t=5`, `"a\"b";r=0;t=1`, ``, `,`, `"`, `%"`, `:`, `?`, `@`, `-`,
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, value string) {
		got, ok := rateLimitWait([]string{value})
		if got < 0 || !ok && got != 0 {
			t.Fatalf("rateLimitWait(%q) = %v, %v; want a non-negative wait, 0 when not ok", value, got, ok)
		}
		if ok && (!strings.Contains(value, "r=0") && !strings.Contains(value, "r=-0") || !strings.Contains(value, "t=")) {
			t.Fatalf("rateLimitWait(%q) = %v, %v; want not ok without an r=0 and a t", value, got, ok)
		}
		// A field split over two lines between its members means the same.
		if i := strings.IndexByte(value, ','); i >= 0 && ok {
			if got2, ok2 := rateLimitWait([]string{value[:i], value[i+1:]}); ok2 && got2 != got {
				t.Fatalf("rateLimitWait(%q) = %v, %v but split at the comma %v, %v", value, got, ok, got2, ok2)
			}
		}
	})
}

// serverWaitNames are the fields ServerWait reads, in canonical form.
var serverWaitNames = []string{
	"Retry-After", "X-Amz-Retry-After", "Retry-After-Ms", "X-Ms-Retry-After-Ms", "Ratelimit",
	"Ratelimit-Remaining", "Ratelimit-Reset", "X-Ratelimit-Remaining", "X-Ratelimit-Reset",
}

// FuzzServerWaitHeaders builds a header from fuzzed (field, value) lines
// over every field ServerWait reads and checks that the wait is never
// negative, is 0 when none was found, that a valid Retry-After in the first
// line wins, and otherwise that the wait is at least each well-formed
// millisecond field's: the longest wait honours them all.
func FuzzServerWaitHeaders(f *testing.F) {
	f.Add([]byte("\x00120\n\x021500\n\x035"), uint8(0), int64(1735787105))
	f.Add([]byte("\x00soon\n\x022000\n\x04\"p\";r=0;t=30\n\x0699999999999999999999"), uint8(1), int64(1735787105))
	f.Add([]byte("\x02-1\n\x03 250 \n\x0799\n\x080.5\n\x051"), uint8(2), int64(0))
	f.Add([]byte("\x04\"a\";r=0;t=5\n\x04x;\n\x01\t7\t"), uint8(3), int64(1<<33))
	f.Fuzz(func(t *testing.T, lines []byte, format uint8, nowUnix int64) {
		now := time.Unix(nowUnix%(1<<40), 0)
		h := make(http.Header)
		for _, line := range bytes.Split(lines, []byte("\n")) {
			if len(line) == 0 {
				continue
			}
			name := serverWaitNames[int(line[0])%len(serverWaitNames)]
			h[name] = append(h[name], string(line[1:]))
		}
		xReset := ResetFormat(format % 5) // 4 is not a format: ignored
		got, ok := ServerWait(h, now, xReset)
		if again, ok2 := ServerWait(h, now, xReset); again != got || ok2 != ok {
			t.Fatalf("ServerWait(%q) = %v, %v, then %v, %v", h, got, ok, again, ok2)
		}
		if got < 0 || !ok && got != 0 {
			t.Fatalf("ServerWait(%q) = %v, %v; want a non-negative wait, 0 when not ok", h, got, ok)
		}
		if d, raOK := ParseRetryAfter(h.Get("Retry-After"), now); raOK {
			if got != d || !ok {
				t.Fatalf("ServerWait(%q) = %v, %v; want Retry-After's %v, true", h, got, ok, d)
			}
			return
		}
		for _, name := range []string{"X-Amz-Retry-After", "Retry-After-Ms", "X-Ms-Retry-After-Ms"} {
			if n, valid := parseDigits(trimFieldOWS(h.Get(name))); valid && (!ok || got < millisWait(n)) {
				t.Fatalf("ServerWait(%q) = %v, %v; want at least %s's %v", h, got, ok, name, millisWait(n))
			}
		}
	})
}

// FuzzRetryAfterDates writes now+ahead (whole seconds, up to 49 years
// ahead or behind) in each of the three HTTP-date forms and checks that
// ParseRetryAfter reads each back as the same wait: ahead, or 0 for a date
// in the past. RFC 850's two-digit year is read within 50 years of now.
