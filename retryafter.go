package retry

import (
	"math"
	"net/http"
	"strings"
	"time"
)

// ParseRetryAfter returns the wait that a Retry-After field value asks for,
// measured from now, and whether value is a valid Retry-After value as
// defined by RFC 9110 §10.2.3.
//
// The value is either delay-seconds or an HTTP-date:
//
//   - delay-seconds is one or more ASCII digits: no sign, decimal point or
//     inner space. "120" is 2m0s. A number of seconds too large for a
//     [time.Duration] gives the largest Duration, never an overflow.
//   - an HTTP-date is read in any of the three forms RFC 9110 §5.6.7 requires
//     a recipient to accept, with [http.ParseTime]: IMF-fixdate
//     ("Sun, 06 Nov 1994 08:49:37 GMT"), the obsolete RFC 850 form
//     ("Sunday, 06-Nov-94 08:49:37 GMT") and ANSI C's asctime form
//     ("Sun Nov  6 08:49:37 1994"). The wait is the date minus now; a date
//     that is not after now gives 0, true. An RFC 850 date must be in GMT
//     (a different zone would otherwise be read in the machine's local
//     time zone), and its two-digit year is the one within 50 years of now,
//     as §5.6.7 asks.
//
// Leading and trailing spaces and tabs (the optional whitespace of RFC 9110
// §5.6.3) are ignored, since a field value copied from elsewhere may carry
// them; net/http already strips them from the headers it parses.
//
// For example, with now = Sun, 06 Nov 1994 08:48:37 GMT:
//
//	ParseRetryAfter("120", now)                           // 2m0s, true
//	ParseRetryAfter("Sun, 06 Nov 1994 08:49:37 GMT", now) // 1m0s, true
//	ParseRetryAfter("Sun, 06 Nov 1994 08:00:00 GMT", now) // 0s, true
//	ParseRetryAfter("1.5", now)                           // 0s, false
//	ParseRetryAfter("-1", now)                            // 0s, false
//	ParseRetryAfter("", now)                              // 0s, false
//
// The result is never negative. ParseRetryAfter is safe for concurrent use.
func ParseRetryAfter(value string, now time.Time) (time.Duration, bool) {
	value = trimFieldOWS(value)
	if value == "" {
		return 0, false
	}
	if c := value[0]; '0' <= c && c <= '9' {
		// No HTTP-date starts with a digit: this can only be delay-seconds.
		n, ok := parseDigits(value)
		if !ok {
			return 0, false
		}
		return secondsWait(n, 0), true
	}
	t, ok := parseHTTPDate(value, now)
	if !ok {
		return 0, false
	}
	// A date that has passed asks for no wait at all (RFC 9110 §10.2.3 gives
	// no meaning to a negative delay); Sub saturates instead of overflowing.
	return max(t.Sub(now), 0), true
}

// parseHTTPDate reads value, an HTTP-date in any of its three forms, with
// [http.ParseTime], and then rejects what that function accepts beyond RFC
// 9110 §5.6.7: signs in the numbers and an RFC 850 date whose zone is not GMT.
func parseHTTPDate(value string, now time.Time) (time.Time, bool) {
	// time.Parse reads a sign before a year ("-994"); no HTTP-date has one.
	// The only '-' allowed are the two of the RFC 850 form's date2,
	// "06-Nov-94", which follows the comma after the day name.
	if strings.IndexByte(value, '+') >= 0 {
		return time.Time{}, false
	}
	comma := strings.IndexByte(value, ',')
	dashes := strings.Count(value, "-")
	rfc850 := dashes == 2 && comma >= 0 && comma+8 < len(value) &&
		value[comma+4] == '-' && value[comma+8] == '-'
	if dashes != 0 && !rfc850 {
		return time.Time{}, false
	}
	t, err := http.ParseTime(value)
	if err != nil {
		return time.Time{}, false
	}
	if !rfc850 {
		// IMF-fixdate spells GMT literally and asctime has no zone: both are UTC.
		return t, true
	}
	// The RFC 850 layout takes any zone abbreviation and reads a known one
	// in the local time zone ("PST" on a machine in California); an
	// HTTP-date is always GMT, so anything else is not one.
	if name, offset := t.Zone(); offset != 0 || (name != "GMT" && name != "UTC") {
		return time.Time{}, false
	}
	// time.Parse maps a two-digit year to 1969–2068. RFC 9110 §5.6.7 asks
	// instead for the year with those last two digits that is not more than
	// 50 years after now; the year more than 50 years before it is taken to
	// be the one a century later, so the window slides with now.
	year := now.Year() - now.Year()%100 + t.Year()%100
	t = time.Date(year, t.Month(), t.Day(), t.Hour(), t.Minute(), t.Second(), t.Nanosecond(), time.UTC)
	if t.After(now.AddDate(50, 0, 0)) {
		t = t.AddDate(-100, 0, 0)
	} else if !t.After(now.AddDate(-50, 0, 0)) {
		t = t.AddDate(100, 0, 0)
	}
	return t, true
}

// trimFieldOWS removes the optional whitespace (spaces and tabs, RFC 9110
// §5.6.3) around a field value. Other characters, such as a line feed or a
// Unicode space, are left to make the value invalid.
func trimFieldOWS(v string) string {
	return strings.Trim(v, " \t")
}

// parseDigits reads s, which must be one or more ASCII digits, as a
// non-negative number that saturates at math.MaxInt64 instead of overflowing.
func parseDigits(s string) (int64, bool) {
	if s == "" {
		return 0, false
	}
	var n int64
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		if d := int64(c - '0'); n > (math.MaxInt64-d)/10 {
			n = math.MaxInt64
		} else {
			n = n*10 + d
		}
	}
	return n, true
}

// parseDecimalSeconds reads s, ASCII digits with an optional fraction
// (1*DIGIT ["." 1*DIGIT]), as whole seconds, saturating like parseDigits,
// and nanoseconds; digits beyond the ninth of the fraction are dropped.
func parseDecimalSeconds(s string) (sec, nsec int64, ok bool) {
	whole, frac, dotted := strings.Cut(s, ".")
	if sec, ok = parseDigits(whole); !ok {
		return 0, 0, false
	}
	if !dotted {
		return sec, 0, true
	}
	if _, ok = parseDigits(frac); !ok {
		return 0, 0, false
	}
	for i := range 9 {
		nsec *= 10
		if i < len(frac) {
			nsec += int64(frac[i] - '0')
		}
	}
	return sec, nsec, true
}

// secondsWait returns sec seconds and nsec nanoseconds (nsec < 1e9) as a
// Duration, saturating at maxDuration.
func secondsWait(sec, nsec int64) time.Duration {
	if sec > (math.MaxInt64-nsec)/int64(time.Second) {
		return maxDuration
	}
	return time.Duration(sec)*time.Second + time.Duration(nsec)
}

// millisWait returns ms milliseconds as a Duration, saturating at maxDuration.
func millisWait(ms int64) time.Duration {
	if ms > math.MaxInt64/int64(time.Millisecond) {
		return maxDuration
	}
	return time.Duration(ms) * time.Millisecond
}

// untilUnix returns the wait from now until the Unix time sec seconds and
// nsec nanoseconds (both non-negative), zero when that time has passed.
func untilUnix(sec, nsec int64, now time.Time) time.Duration {
	// time.Unix wraps around for seconds near math.MaxInt64; a time 1<<62
	// seconds away is already far beyond the longest Duration, and Sub
	// saturates at that.
	sec = min(sec, 1<<62)
	return max(time.Unix(sec, nsec).Sub(now), 0)
}
