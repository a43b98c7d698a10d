package retry

import (
	"math"
	"net/http"
	"strconv"
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

// ResetFormat declares how a response's X-RateLimit-Reset header is read.
// Its meaning varies between APIs (a number of seconds to wait, or a Unix
// time in seconds or in milliseconds), so it is never guessed: an API's
// documentation says which format it uses.
type ResetFormat uint8

const (
	// ResetIgnore, the zero value, ignores X-RateLimit-Reset.
	ResetIgnore ResetFormat = iota
	// ResetDeltaSeconds reads X-RateLimit-Reset as a number of seconds
	// from now, as the IETF drafts define RateLimit-Reset (Reddit, for one,
	// sends X-RateLimit-Reset this way).
	ResetDeltaSeconds
	// ResetUnixSeconds reads X-RateLimit-Reset as a Unix time in seconds
	// (GitHub, and Discord with a fraction of a second).
	ResetUnixSeconds
	// ResetUnixMillis reads X-RateLimit-Reset as a Unix time in milliseconds.
	ResetUnixMillis
)

// String returns the name of the constant f, such as "ResetUnixSeconds", or
// "ResetFormat(7)" for a value that is none of them.
func (f ResetFormat) String() string {
	switch f {
	case ResetIgnore:
		return "ResetIgnore"
	case ResetDeltaSeconds:
		return "ResetDeltaSeconds"
	case ResetUnixSeconds:
		return "ResetUnixSeconds"
	case ResetUnixMillis:
		return "ResetUnixMillis"
	}
	return "ResetFormat(" + strconv.Itoa(int(f)) + ")"
}

// ServerWait returns the wait the server asked for in the response header h,
// measured from now, and whether it asked for one. The [Transport] consults
// it (with resp.Header) only for a response it is going to retry, so every
// signal below is read as "a request sent earlier will be refused".
//
// The signals, each parsed defensively and ignored when malformed, negative
// or missing:
//
//   - Retry-After, read by [ParseRetryAfter]. When it is valid it wins over
//     all the others, even when it asks for less, as §7 of
//     draft-ietf-httpapi-ratelimit-headers-10 requires of the RateLimit field.
//   - X-Amz-Retry-After (AWS), Retry-After-Ms (OpenAI, Azure) and
//     X-Ms-Retry-After-Ms (Azure): a number of milliseconds, ASCII digits only.
//   - RateLimit, of draft-ietf-httpapi-ratelimit-headers-10 §4: a
//     Structured Field List (RFC 9651) of quota policies such as
//     `"default";r=0;t=30`. A policy whose remaining quota r is 0 asks for a
//     wait of t seconds; one with r > 0, or no t, asks for none. A field that
//     is not a valid List, or that has a policy without r or with an r or t
//     that is not a non-negative Integer, is malformed and ignored as a
//     whole (§7), across all its field lines.
//   - RateLimit-Reset, of the same draft's earlier revisions: a number of
//     seconds to wait, unless RateLimit-Remaining says quota remains (a
//     well-formed number above 0); when it is absent, malformed or 0, the
//     reset is the wait. GitLab sends a Unix time in this field instead, so
//     a value of 1,000,000,000 or more (as seconds, more than 31 years; as a
//     Unix time, after September 2001) is read as a Unix time: the two
//     readings never overlap.
//   - X-RateLimit-Reset, only in the format xReset declares (by default,
//     [ResetIgnore], not at all), and like RateLimit-Reset only when
//     X-RateLimit-Remaining is absent, malformed or 0 (as GitHub's
//     documentation prescribes). The seconds formats accept a decimal
//     fraction ("1470173023.123"). A Unix time in the past gives a wait of 0.
//
// When Retry-After is not valid and several of the others are, the longest
// of their waits is returned: each is the server's statement that a request
// sent earlier will be refused, and only the longest wait honours them all.
//
// Every wait is at least 0 and saturates at the largest [time.Duration]
// instead of overflowing: a Unix time in milliseconds declared as
// [ResetUnixSeconds] gives a wait of millennia, which the Transport's
// MaxRetryAfter then refuses to sleep. A valid wait of 0 is reported as
// (0, true).
//
// ServerWait only reads h and is safe for concurrent use. It does not
// allocate, except when Retry-After is present but neither delay-seconds nor
// an IMF-fixdate: [http.ParseTime] allocates for the layouts that fail.
func ServerWait(h http.Header, now time.Time, xReset ResetFormat) (time.Duration, bool) {
	if d, ok := ParseRetryAfter(h.Get("Retry-After"), now); ok {
		return d, true
	}
	// The names are written in canonical form so that h.Get finds them
	// without building a canonical copy of each on every call.
	var wait time.Duration
	found := false
	for _, name := range [...]string{"X-Amz-Retry-After", "Retry-After-Ms", "X-Ms-Retry-After-Ms"} {
		if n, ok := parseDigits(trimFieldOWS(h.Get(name))); ok {
			wait, found = max(wait, millisWait(n)), true
		}
	}
	if d, ok := rateLimitWait(h["Ratelimit"]); ok {
		wait, found = max(wait, d), true
	}
	if d, ok := legacyResetWait(h, now); ok {
		wait, found = max(wait, d), true
	}
	if d, ok := xResetWait(h, now, xReset); ok {
		wait, found = max(wait, d), true
	}
	return wait, found
}

// legacyResetWait reads RateLimit-Reset, of the revisions up to 06 of
// draft-ietf-httpapi-ratelimit-headers, as [ServerWait] documents.
func legacyResetWait(h http.Header, now time.Time) (time.Duration, bool) {
	if quotaRemains(h.Get("Ratelimit-Remaining")) {
		return 0, false
	}
	n, ok := parseDigits(trimFieldOWS(h.Get("Ratelimit-Reset")))
	if !ok {
		return 0, false
	}
	// The drafts define delta-seconds, to be immune to clock skew, but
	// GitLab sends a Unix time. No real wait is 31 years long and no live
	// server's clock reads before 2001, so the value itself tells them apart.
	const unixTimeFloor = 1_000_000_000 // 2001-09-09T01:46:40Z
	if n >= unixTimeFloor {
		return untilUnix(n, 0, now), true
	}
	return secondsWait(n, 0), true
}

// xResetWait reads X-RateLimit-Reset in the format f, as [ServerWait]
// documents.
func xResetWait(h http.Header, now time.Time, f ResetFormat) (time.Duration, bool) {
	if f == ResetIgnore || f > ResetUnixMillis {
		return 0, false
	}
	if quotaRemains(h.Get("X-Ratelimit-Remaining")) {
		return 0, false
	}
	v := trimFieldOWS(h.Get("X-Ratelimit-Reset"))
	if f == ResetUnixMillis {
		n, ok := parseDigits(v)
		if !ok {
			return 0, false
		}
		return untilUnix(n/1000, n%1000*int64(time.Millisecond), now), true
	}
	sec, nsec, ok := parseDecimalSeconds(v)
	if !ok {
		return 0, false
	}
	if f == ResetDeltaSeconds {
		return secondsWait(sec, nsec), true
	}
	return untilUnix(sec, nsec, now), true
}

// quotaRemains reports whether v, a RateLimit-Remaining or
// X-RateLimit-Remaining value, is a well-formed count above zero. Some APIs
// (Reddit) send a decimal count such as "0.0".
func quotaRemains(v string) bool {
	v = trimFieldOWS(v)
	if _, _, ok := parseDecimalSeconds(v); !ok {
		return false
	}
	return strings.Trim(v, "0.") != ""
}

// rateLimitWait reads the field lines of a RateLimit field
// (draft-ietf-httpapi-ratelimit-headers-10 §4) as [ServerWait] documents:
// the longest t of the policies whose r is 0, and whether there is one.
//
// RFC 9651 §4.2 parses the lines joined by commas. Each line is parsed as a
// List of its own instead, which is the same for every field a sender can
// split (it splits between members) and needs no joined copy.
func rateLimitWait(lines []string) (time.Duration, bool) {
	var wait time.Duration
	found := false
	for _, line := range lines {
		d, exhausted, ok := parseRateLimitLine(line)
		if !ok {
			// §7: "Malformed RateLimit header fields MUST be ignored."
			return 0, false
		}
		if exhausted {
			wait, found = max(wait, d), true
		}
	}
	return wait, found
}

// parseRateLimitLine parses s, one RateLimit field line, as a Structured
// Field List (RFC 9651 §4.2.1) of service limit items. It reports whether
// s is well-formed and, if so, whether a policy whose r is 0 has a t, and
// the longest such t.
func parseRateLimitLine(s string) (wait time.Duration, exhausted, ok bool) {
	s = trimFieldOWS(s)
	for s != "" {
		var kind sfKind
		if kind, _, s = parseBareItem(s); kind != sfString && kind != sfToken {
			// §4.1 names a policy; an Inner List or a number names none.
			return 0, false, false
		}
		var r, t int64
		rSet, tSet := false, false
		for s != "" && s[0] == ';' {
			var key string
			if key, s = parseKey(strings.TrimLeft(s[1:], " ")); key == "" {
				return 0, false, false
			}
			kind, n := sfBoolean, int64(1) // a parameter without a value is true
			if s != "" && s[0] == '=' {
				if kind, n, s = parseBareItem(s[1:]); kind == sfInvalid {
					return 0, false, false
				}
			}
			if (key == "r" || key == "t") && (kind != sfInteger || n < 0) {
				// §4.1.1 and §4.1.2: both are non-negative Integers.
				return 0, false, false
			}
			// RFC 9651 §4.2.3.2: a repeated key overwrites the earlier value.
			switch key {
			case "r":
				r, rSet = n, true
			case "t":
				t, tSet = n, true
			}
		}
		if !rSet {
			return 0, false, false // §4.1: r is required
		}
		if r == 0 && tSet {
			wait, exhausted = max(wait, secondsWait(t, 0)), true
		}
		s = strings.TrimLeft(s, " \t")
		if s == "" {
			break
		}
		if s[0] != ',' {
			return 0, false, false
		}
		if s = strings.TrimLeft(s[1:], " \t"); s == "" {
			return 0, false, false // a trailing comma
		}
	}
	return wait, exhausted, true
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

// quotaExhausted reports the wait a response announces while it still
// succeeds: an IETF RateLimit field whose quota is spent (r=0), or a
// RateLimit-Remaining of 0 with its RateLimit-Reset.
func quotaExhausted(h http.Header, now time.Time) (time.Duration, bool) {
	if d, ok := rateLimitWait(h["Ratelimit"]); ok {
		return d, true
	}
	if v := h.Get("Ratelimit-Remaining"); v != "" && !quotaRemains(v) {
		return legacyResetWait(h, now)
	}
	return 0, false
}
