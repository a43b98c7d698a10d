package retry

import (
	"net/http"
	"strconv"
	"strings"
	"time"
)

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

// LongWait is what a [Transport] does with a server wait longer than its
// MaxRetryAfter.
type LongWait uint8

const (
	// ReturnLongWait, the zero value, returns the response at once, with
	// reason StopServerWait, and [RetryAt] saying when the server asked
	// the client back: the caller decides whether to wait that long.
	ReturnLongWait LongWait = iota
	// CapLongWait waits MaxRetryAfter instead and retries anyway, for a
	// client that would rather try early than give up (urllib3 offers
	// both): the server may refuse the retry again, and a retry of an
	// unsafe request is made only where a replay is safe, as always.
	CapLongWait
)

// String returns the name of the constant w, such as "CapLongWait".
func (w LongWait) String() string {
	switch w {
	case ReturnLongWait:
		return "ReturnLongWait"
	case CapLongWait:
		return "CapLongWait"
	}
	return "LongWait(" + strconv.Itoa(int(w)) + ")"
}

// serverDelay returns the wait to sleep for a server's wait sw, and false
// when the Transport does not wait that long (see LongWait): a wait over
// maxWait is capped at it or refused, and one within it is spread above
// sw by jitter, if any, never below sw nor beyond maxWait.
func serverDelay(sw, maxWait time.Duration, long LongWait, jitter Jitter, u float64) (time.Duration, bool) {
	switch {
	case sw > maxWait && long == CapLongWait:
		return maxWait, true
	case sw > maxWait:
		return 0, false
	case jitter != nil:
		return min(max(sw, jitter(sw, u)), maxWait), true
	}
	return sw, true
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
	return resetWait(n, 0, now), true
}

// resetWait returns the wait until a reset given as sec seconds and nsec
// nanoseconds, read at now: a Unix time from 1,000,000,000 up, a number
// of seconds below it. The drafts define delta-seconds, to be immune to
// clock skew, but GitLab and GitHub send a Unix time. No real wait is 31
// years long and no live server's clock reads before 2001, so the value
// itself tells them apart.
func resetWait(sec, nsec int64, now time.Time) time.Duration {
	const unixTimeFloor = 1_000_000_000 // 2001-09-09T01:46:40Z
	if sec >= unixTimeFloor {
		return untilUnix(sec, nsec, now)
	}
	return secondsWait(sec, nsec)
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
		ok := walkRateLimitLine(line, func(r, t int64, tSet bool) {
			if r == 0 && tSet {
				wait, found = max(wait, secondsWait(t, 0)), true
			}
		})
		if !ok {
			// §7: "Malformed RateLimit header fields MUST be ignored."
			return 0, false
		}
	}
	return wait, found
}

// walkRateLimitLine parses s, one RateLimit field line, as a Structured
// Field List (RFC 9651 §4.2.1) of service limit items, calling policy
// with each item's remaining quota r and its reset t (tSet: present). It
// reports whether s is well-formed; the items before a malformed one have
// been walked.
func walkRateLimitLine(s string, policy func(r, t int64, tSet bool)) (ok bool) {
	s = trimFieldOWS(s)
	for s != "" {
		var kind sfKind
		if kind, _, s = parseBareItem(s); kind != sfString && kind != sfToken {
			// §4.1 names a policy; an Inner List or a number names none.
			return false
		}
		var r, t int64
		rSet, tSet := false, false
		for s != "" && s[0] == ';' {
			var key string
			if key, s = parseKey(strings.TrimLeft(s[1:], " ")); key == "" {
				return false
			}
			kind, n := sfBoolean, int64(1) // a parameter without a value is true
			if s != "" && s[0] == '=' {
				if kind, n, s = parseBareItem(s[1:]); kind == sfInvalid {
					return false
				}
			}
			if (key == "r" || key == "t") && (kind != sfInteger || n < 0) {
				// §4.1.1 and §4.1.2: both are non-negative Integers.
				return false
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
			return false // §4.1: r is required
		}
		policy(r, t, tSet)
		s = strings.TrimLeft(s, " \t")
		if s == "" {
			break
		}
		if s[0] != ',' {
			return false
		}
		if s = strings.TrimLeft(s[1:], " \t"); s == "" {
			return false // a trailing comma
		}
	}
	return true
}

// quotaExhausted reports the wait a response announces while it still
// succeeds: an IETF RateLimit field whose quota is spent (r=0), or a
// RateLimit-Remaining of 0 with its RateLimit-Reset. It reads the clock
// only for the latter: most successes carry no quota.
func quotaExhausted(h http.Header, now func() time.Time) (time.Duration, bool) {
	if d, ok := rateLimitWait(h["Ratelimit"]); ok {
		return d, true
	}
	if h.Get("Ratelimit-Remaining") != "" {
		return legacyResetWait(h, now()) // no wait while the quota remains
	}
	return 0, false
}
