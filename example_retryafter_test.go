package retry_test

import (
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/backoff-jitter/retry"
)

func ExampleParseRetryAfter() {
	// A fixed clock: one minute before RFC 9110's example date.
	now := time.Date(1994, time.November, 6, 8, 48, 37, 0, time.UTC)
	for _, value := range []string{
		"120",                            // delay-seconds
		"Sun, 06 Nov 1994 08:49:37 GMT",  // IMF-fixdate
		"Sunday, 06-Nov-94 08:49:37 GMT", // obsolete RFC 850 form
		"Sun Nov  6 08:49:37 1994",       // ANSI C asctime() form
		"Sun, 06 Nov 1994 08:00:00 GMT",  // a date that has passed
		"1.5",                            // not delay-seconds
		"-1",
	} {
		d, ok := retry.ParseRetryAfter(value, now)
		fmt.Printf("%-32q %v %v\n", value, d, ok)
	}
	// Output:
	// "120"                            2m0s true
	// "Sun, 06 Nov 1994 08:49:37 GMT"  1m0s true
	// "Sunday, 06-Nov-94 08:49:37 GMT" 1m0s true
	// "Sun Nov  6 08:49:37 1994"       1m0s true
	// "Sun, 06 Nov 1994 08:00:00 GMT"  0s true
	// "1.5"                            0s false
	// "-1"                             0s false
}

func ExampleServerWait() {
	now := time.Date(2025, time.January, 2, 3, 4, 5, 0, time.UTC)

	// GitHub's primary rate limit: X-RateLimit-Reset is a Unix time in
	// seconds, which the caller declares, and applies when none remains.
	github := http.Header{}
	github.Set("X-RateLimit-Remaining", "0")
	github.Set("X-RateLimit-Reset", strconv.FormatInt(now.Add(90*time.Second).Unix(), 10))
	fmt.Println(retry.ServerWait(github, now, retry.ResetUnixSeconds))
	fmt.Println(retry.ServerWait(github, now, retry.ResetIgnore)) // the default: not read

	// The IETF RateLimit field: the "burst" policy is exhausted for 2 seconds.
	ietf := http.Header{}
	ietf.Set("RateLimit", `"burst";r=0;t=2, "daily";r=100;t=3600`)
	fmt.Println(retry.ServerWait(ietf, now, retry.ResetIgnore))

	// A valid Retry-After wins over every other signal.
	ietf.Set("Retry-After", "5")
	fmt.Println(retry.ServerWait(ietf, now, retry.ResetIgnore))
	// Output:
	// 1m30s true
	// 0s false
	// 2s true
	// 5s true
}
