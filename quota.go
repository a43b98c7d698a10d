package retry

import (
	"net/http"
	"time"
)

// Quota is the quota a server publishes on its answers: Remaining
// requests until Reset, of Limit (0 when not published), for Resource
// (GitHub's X-RateLimit-Resource; empty when not published). The zero
// Quota is none.
type Quota struct {
	Limit, Remaining int64
	Reset            time.Time
	Resource         string
}

// Published reports whether q is a quota a server published.
func (q Quota) Published() bool { return !q.Reset.IsZero() }

// maxQuotaReset is the furthest reset a quota is believed to have: a day,
// the longest window APIs publish. A reset further away is a misread
// format (a Unix time in milliseconds) or a server's error.
const maxQuotaReset = 24 * time.Hour

// ParseQuota returns the quota published in the response header h, read
// at now, and whether h publishes one. It reads three families of
// fields, and the first that is present decides:
//
//   - the IETF's RateLimit field (draft-ietf-httpapi-ratelimit-headers-10
//     §4): of its policies, the one whose remaining r lasts the shortest
//     over its t seconds; Limit is not published there (its
//     RateLimit-Policy is not read);
//   - the older drafts' RateLimit-Limit, RateLimit-Remaining and
//     RateLimit-Reset;
//   - X-RateLimit-Limit, X-RateLimit-Remaining, X-RateLimit-Reset and
//     X-RateLimit-Resource (GitHub, and most APIs with a quota).
//
// A reset of 1,000,000,000 or more is a Unix time in seconds, a fraction
// allowed; anything less is a number of seconds from now: the two
// readings never overlap (see [ServerWait]). A family whose remaining or
// reset is missing or malformed, whose remaining is above its limit, or
// whose reset is more than a day away publishes nothing: a quota that
// cannot be read whole is not guessed at. A reset in the past is now.
//
// ParseQuota only reads h and does not allocate; it is safe for
// concurrent use. It looks up three field names on a response that
// publishes nothing.
func ParseQuota(h http.Header, now time.Time) (Quota, bool) {
	return readQuota(h, func() time.Time { return now })
}

// readQuota is ParseQuota reading the clock only when h publishes a
// quota: most answers do not.
func readQuota(h http.Header, now func() time.Time) (Quota, bool) {
	if lines := h["Ratelimit"]; len(lines) > 0 {
		return ietfQuota(lines, now())
	}
	if v := h["Ratelimit-Remaining"]; len(v) > 0 {
		return fieldQuota(h.Get("Ratelimit-Limit"), v[0], h.Get("Ratelimit-Reset"), "", now())
	}
	if v := h["X-Ratelimit-Remaining"]; len(v) > 0 {
		return fieldQuota(h.Get("X-Ratelimit-Limit"), v[0], h.Get("X-Ratelimit-Reset"), h.Get("X-Ratelimit-Resource"), now())
	}
	return Quota{}, false
}

// ietfQuota reads the lines of a RateLimit field: the policy whose r
// lasts the shortest over its t. A malformed field publishes nothing
// (§7), nor does one whose policies all lack t.
func ietfQuota(lines []string, now time.Time) (Quota, bool) {
	var bestR, bestT int64
	found := false
	for _, line := range lines {
		ok := walkRateLimitLine(line, func(r, t int64, tSet bool) {
			if !tSet || t > int64(maxQuotaReset/time.Second) {
				return
			}
			// r/t below bestR/bestT, compared without a division.
			if !found || r*bestT < bestR*t {
				bestR, bestT, found = r, t, true
			}
		})
		if !ok {
			return Quota{}, false
		}
	}
	if !found {
		return Quota{}, false
	}
	return Quota{Remaining: bestR, Reset: now.Add(secondsWait(bestT, 0))}, true
}

// fieldQuota reads a quota published as three fields, and X-RateLimit's
// resource.
func fieldQuota(limit, remaining, reset, resource string, now time.Time) (Quota, bool) {
	var q Quota
	var ok bool
	if q.Remaining, ok = parseDigits(trimFieldOWS(remaining)); !ok {
		return Quota{}, false
	}
	if limit = trimFieldOWS(limit); limit != "" {
		if q.Limit, ok = parseDigits(limit); !ok || q.Remaining > q.Limit {
			return Quota{}, false
		}
	}
	sec, nsec, ok := parseDecimalSeconds(trimFieldOWS(reset))
	if !ok {
		return Quota{}, false
	}
	wait := resetWait(sec, nsec, now)
	if wait > maxQuotaReset {
		return Quota{}, false
	}
	q.Reset, q.Resource = now.Add(wait), trimFieldOWS(resource)
	return q, true
}
