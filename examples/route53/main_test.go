package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/route53"
	"github.com/aws/aws-sdk-go-v2/service/route53/types"
	"github.com/aws/smithy-go"
	"go.uber.org/goleak"

	"github.com/backoff-jitter/retry"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// TestRun runs the program as `go run .` does and checks its account
// against the fake's own log: every call succeeded, the invalid change
// failed at once with the SDK's typed error, the throttled calls were
// retried with growing, jittered waits that never came faster than the
// fake allows, and every replay was signed anew (signAgain).
func TestRun(t *testing.T) {
	var out bytes.Buffer
	res, err := run(context.Background(), &out, options{workers: defaultWorkers})
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	t.Run("invalid change", func(t *testing.T) { checkInvalid(t, res) })
	t.Run("calls", func(t *testing.T) { checkCalls(t, res) })
	t.Run("waits", func(t *testing.T) { checkWaits(t, res) })
	t.Run("server", func(t *testing.T) { checkServer(t, res) })
	t.Run("output", func(t *testing.T) {
		checkOutput(t, out.String(),
			"*types.InvalidInput InvalidInput: 1 validation error detected",
			"50 by 10 goroutines",
			"50 succeeded, 0 failed",
			"Throttling, wait ",
			"0 signatures refused",
			"pacer:    off",
		)
	})
}

// checkOutput reports each of wants that out lacks.
func checkOutput(t *testing.T, out string, wants ...string) {
	t.Helper()
	for _, want := range wants {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

func checkInvalid(t *testing.T, res *result) {
	c := res.invalid
	var invalid *types.InvalidInput
	if !errors.As(c.err, &invalid) {
		t.Fatalf("invalid change: error %v (%T); want a *types.InvalidInput", c.err, c.err)
	}
	if c.attempts() != 1 || len(c.retries) != 0 {
		t.Errorf("invalid change: %d attempts, %d retries; want 1, 0", c.attempts(), len(c.retries))
	}
	if c.gaveUp == nil || c.gaveUp.Reason != retry.StopPermanent || c.gaveUp.StatusCode != http.StatusBadRequest {
		t.Errorf("invalid change: OnGiveUp saw %+v; want a 400 and StopPermanent", c.gaveUp)
	}
	if n := len(requestsOf(res.log, c)); n != 1 {
		t.Errorf("invalid change: the server got %d requests; want 1", n)
	}
}

func checkCalls(t *testing.T, res *result) {
	if len(res.calls) != res.workers*callsPerWorker {
		t.Fatalf("%d calls; want %d", len(res.calls), res.workers*callsPerWorker)
	}
	ops := map[string]int{}
	for _, c := range res.calls {
		ops[c.op]++
		if c.err != nil {
			t.Errorf("call #%d %s %s: %v", c.n, c.op, c.target, c.err)
		}
		for _, r := range c.retries {
			if r.why != "Throttling" && r.why != "PriorRequestNotComplete" {
				t.Errorf("call #%d %s: retried after %q; want only Throttling and PriorRequestNotComplete", c.n, c.op, r.why)
			}
		}
		if got := len(requestsOf(res.log, c)); got != c.attempts() {
			t.Errorf("call #%d %s: the server got %d requests; the Transport reports %d attempts", c.n, c.op, got, c.attempts())
		}
	}
	// Each worker changes two zones, looks at each change, and lists the
	// zones once.
	want := map[string]int{"ChangeResourceRecordSets": 2 * res.workers, "GetChange": 2 * res.workers, "ListHostedZones": res.workers}
	for op, n := range want {
		if ops[op] != n {
			t.Errorf("%d %s calls; want %d", ops[op], op, n)
		}
	}
	if res.elapsed > 30*time.Second {
		t.Errorf("the calls took %v; want well under 30s", res.elapsed)
	}
}

// checkWaits checks the waits against route53Backoff: the wait before
// retry n is in [d/2, d] for d = min(Cap, Base·2^(n-1)), so waits grow
// until the cap, never come sooner than 200ms, and vary between calls.
func checkWaits(t *testing.T, res *result) {
	byRetry := map[int][]time.Duration{}
	for _, c := range res.calls {
		for i, r := range c.retries {
			d := min(route53Backoff.Cap, route53Backoff.Base<<(r.attempt-1))
			if r.delay < d/2 || r.delay > d {
				t.Errorf("call #%d: wait before retry %d is %v; want within [%v, %v]", c.n, r.attempt, r.delay, d/2, d)
			}
			// Below the cap, d doubles and its lower half starts where the
			// last one ended: each wait is at least the one before.
			if prev := min(route53Backoff.Cap, route53Backoff.Base<<max(r.attempt-2, 0)); i > 0 && d == 2*prev && r.delay < c.retries[i-1].delay {
				t.Errorf("call #%d: wait before retry %d (%v) is shorter than the one before (%v)", c.n, r.attempt, r.delay, c.retries[i-1].delay)
			}
			byRetry[r.attempt] = append(byRetry[r.attempt], r.delay)
		}
	}
	first := byRetry[1]
	if len(first) < 2 {
		t.Fatalf("%d calls were retried; the fake's limit should have throttled several", len(first))
	}
	distinct := map[time.Duration]bool{}
	for _, d := range first {
		distinct[d] = true
	}
	if len(distinct) < 2 {
		t.Errorf("the waits before retry 1 are all %v: not jittered", first[0])
	}
	for n := 2; n <= 3 && len(byRetry[n]) > 0; n++ {
		_, _, prev := stats(byRetry[n-1])
		if _, _, mean := stats(byRetry[n]); mean <= prev {
			t.Errorf("mean wait before retry %d is %v, not longer than before retry %d (%v)", n, mean, n-1, prev)
		}
	}
}

// checkServer checks what the fake saw: only valid signatures, each call's
// replays signed anew (signAgain), never more than 5 admitted requests a
// second, and never two attempts of one call closer than the 200ms a slot
// takes to free.
func checkServer(t *testing.T, res *result) {
	s := serverStats(res.log)
	if s.badSignatures != 0 {
		t.Errorf("%d requests had a bad signature", s.badSignatures)
	}
	if s.maxInWindow > ratePerSecond {
		t.Errorf("%d requests admitted in one second; the limit is %d", s.maxInWindow, ratePerSecond)
	}
	if slot := time.Second / ratePerSecond; s.closestGap < slot {
		t.Errorf("two attempts of one call came %v apart; want at least %v", s.closestGap, slot)
	}
	if s.refused["Throttling"] == 0 || s.replays == 0 {
		t.Errorf("%d requests throttled, %d replays; the test needs some of each", s.refused["Throttling"], s.replays)
	}
	for _, c := range res.calls {
		reqs := requestsOf(res.log, c)
		for i, r := range reqs {
			if r.Attempt != i+1 {
				t.Errorf("call #%d: request %d has X-Retry-Attempt %d", c.n, i+1, r.Attempt)
			}
			if i > 0 && (r.Signature == reqs[i-1].Signature || r.SignedAt.Before(reqs[i-1].SignedAt)) {
				t.Errorf("call #%d: attempt %d carries the signature of attempt %d, or an older one; each replay is signed anew", c.n, i+1, i)
			}
			if i < len(reqs)-1 && r.Code != "Throttling" && r.Code != "PriorRequestNotComplete" {
				t.Errorf("call #%d: attempt %d got %d %s and was retried", c.n, i+1, r.Status, r.Code)
			}
		}
	}
}

// TestDefaultsRunOut is the reason for client.go's settings: with the
// Transport's defaults, 4 attempts and waits of at most 100ms, 200ms and
// 400ms, callers queueing for Route 53's 5 requests a second run out of
// attempts.
func TestDefaultsRunOut(t *testing.T) {
	res, err := run(context.Background(), io.Discard, options{workers: defaultWorkers, defaults: true})
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	ranOut := 0
	for _, c := range res.calls {
		if c.err != nil && c.gaveUp != nil && c.gaveUp.Reason == retry.StopAttempts && c.gaveUp.Attempt == retry.DefaultMaxAttempts {
			ranOut++
		}
	}
	if ranOut < 10 {
		t.Errorf("%d of %d calls ran out of attempts with the defaults; want many", ranOut, len(res.calls))
	}
	var invalid *types.InvalidInput
	if !errors.As(res.invalid.err, &invalid) {
		t.Errorf("invalid change: %v; want *types.InvalidInput with the defaults too", res.invalid.err)
	}
}

// TestPacer runs the program as `go run . -workers 5` does: the
// Pacer, keyed by the account, learns a rate near Route 53's 5 requests a
// second, and every call succeeds. (Five workers, not ten, keep the test
// short: the run takes some 6 seconds, against 13 to 14 for ten.)
func TestPacer(t *testing.T) {
	var out bytes.Buffer
	res, err := run(context.Background(), &out, options{workers: 5, pacer: true})
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	t.Run("calls", func(t *testing.T) { checkCalls(t, res) })
	t.Run("server", func(t *testing.T) { checkServer(t, res) })
	t.Run("rate", func(t *testing.T) {
		rate, ok := res.learned, res.engaged
		if !ok {
			t.Fatalf("the Pacer never engaged for %s", accessKey)
		}
		if rate < 1 || rate > 10 {
			t.Errorf("the Pacer learned %.2f requests/s; want 1 to 10 (the limit is %d)", rate, ratePerSecond)
		}
		if len(res.rates) == 0 {
			t.Errorf("no samples of the Pacer's rate")
		}
	})
	t.Run("output", func(t *testing.T) {
		checkOutput(t, out.String(),
			"25 by 5 goroutines",
			"25 succeeded, 0 failed",
			"and a Pacer keyed by the access key ID",
			"pacer:    on, learned ",
			"pacer rate",
		)
	})
}

func TestOptionsValidate(t *testing.T) {
	for _, tt := range []struct {
		workers int
		ok      bool
	}{{-1, false}, {0, false}, {1, true}, {defaultWorkers, true}, {maxWorkers, true}, {maxWorkers + 1, false}} {
		err := options{workers: tt.workers}.validate()
		if (err == nil) != tt.ok {
			t.Errorf("workers %d: validate() = %v; want ok %v", tt.workers, err, tt.ok)
		}
	}
	if _, err := run(context.Background(), io.Discard, options{}); err == nil {
		t.Errorf("run with 0 workers: no error")
	}
	for _, o := range []options{
		{workers: 1, sdk: "legacy"},
		{workers: 1, sdk: "adaptive", pacer: true},
		{workers: 1, sdk: "standard", defaults: true},
	} {
		if err := o.validate(); err == nil {
			t.Errorf("%+v: validate() = nil; want an error", o)
		}
	}
	if err := (options{workers: 1, sdk: "standard"}).validate(); err != nil {
		t.Errorf("-sdk standard: %v", err)
	}
}

// requestsOf returns the requests of call c in the server's log.
func requestsOf(log []served, c *call) []served {
	var out []served
	for _, s := range log {
		if s.Invocation != "" && s.Invocation == c.invocation {
			out = append(out, s)
		}
	}
	return out
}

// startFake serves fake on loopback and returns a Route 53 client that
// sends through a Transport made by newTransport(opts...).
func startFake(t *testing.T, fake *fakeRoute53, secret string, opts ...retry.Option) *route53.Client {
	t.Helper()
	srv := httptest.NewServer(fake)
	t.Cleanup(srv.Close)
	rt := newTransport(newBudget(), credentials.NewStaticCredentialsProvider(accessKey, secret, ""), opts...)
	t.Cleanup(rt.CloseIdleConnections)
	return newClient(srv.URL, accessKey, secret, rt)
}

func newFake(limit int) *fakeRoute53 {
	return &fakeRoute53{
		Limit:    limit,
		Window:   time.Second,
		Pending:  300 * time.Millisecond,
		Accounts: map[string]string{accessKey: secretKey},
		Zones:    []zone{{"Z1EXAMPLE", "example.com."}},
	}
}

// TestPriorRequestNotComplete: a second change to a zone while the first
// is PENDING is refused with 400 PriorRequestNotComplete, and retried until
// the first is INSYNC.
func TestPriorRequestNotComplete(t *testing.T) {
	fake := newFake(100)
	client := startFake(t, fake, secretKey, hooks(nil, nil)...)
	p := &printer{out: io.Discard, start: time.Now()}
	ctx := context.Background()
	change := func() *call {
		return p.do(ctx, &call{op: "ChangeResourceRecordSets"}, func(ctx context.Context) (string, error) {
			return changeRecord(ctx, client, "Z1EXAMPLE", "a.example.com.", 60)
		})
	}
	first, second := change(), change()
	if first.err != nil || second.err != nil {
		t.Fatalf("changes failed: %v, %v", first.err, second.err)
	}
	if len(second.retries) == 0 || second.retries[0].why != "PriorRequestNotComplete" {
		t.Fatalf("second change retried after %+v; want PriorRequestNotComplete first", second.retries)
	}
	reqs := requestsOf(fake.Log(), second)
	if last := reqs[len(reqs)-1]; last.Status != http.StatusOK || last.At.Before(reqs[0].At.Add(fake.Pending-50*time.Millisecond)) {
		t.Errorf("second change: last attempt %+v; want a 200 once the first change is INSYNC", last)
	}
}

// TestSignatureExpired: a replay that outlives the SDK's signature is
// refused with 403 (permanent, and the SDK returns the error) unless it is
// signed anew, as newTransport's signAgain does. Instead of waiting 5
// minutes, the test moves the clocks 6 minutes ahead after the first,
// throttled attempt: the server's, and the one signAgain signs with.
func TestSignatureExpired(t *testing.T) {
	for _, resign := range []bool{false, true} {
		t.Run(fmt.Sprintf("signed anew %v", resign), func(t *testing.T) {
			var skew atomic.Int64
			now := func() time.Time { return time.Now().Add(time.Duration(skew.Load())) }
			fake := newFake(1) // one request a second: the retry gets through
			fake.Now = now
			hook := signAgain(credentials.NewStaticCredentialsProvider(accessKey, secretKey, ""), now)
			if !resign {
				hook = nil
			}
			var gaveUp retry.Event
			client := startFake(t, fake, secretKey,
				retry.WithBeforeAttempt(hook), // replaces newTransport's
				retry.WithOnRetry(func(retry.Event) { skew.Store(int64(6 * time.Minute)) }),
				retry.WithOnGiveUp(func(e retry.Event) { gaveUp = e }))
			fake.mu.Lock()
			fake.admitted = map[string][]time.Time{accessKey: {now()}} // the first attempt is throttled
			fake.mu.Unlock()

			_, err := changeRecord(context.Background(), client, "Z1EXAMPLE", "a.example.com.", 60)
			log := fake.Log()
			if resign {
				if err != nil {
					t.Fatalf("error %v; want the replay, signed anew, to succeed", err)
				}
				if len(log) != 2 || log[0].Code != "Throttling" || log[1].Status != http.StatusOK || log[0].Signature == log[1].Signature {
					t.Errorf("server log %+v; want a Throttling, then a new signature accepted", log)
				}
				return
			}
			var apiErr smithy.APIError
			if !errors.As(err, &apiErr) || apiErr.ErrorCode() != "SignatureDoesNotMatch" || !strings.Contains(apiErr.ErrorMessage(), "Signature expired") {
				t.Fatalf("error %v; want SignatureDoesNotMatch: Signature expired", err)
			}
			if gaveUp.Attempt != 2 || gaveUp.Reason != retry.StopPermanent || gaveUp.StatusCode != http.StatusForbidden {
				t.Errorf("OnGiveUp saw attempt %d, %d, %v; want attempt 2, 403, %v", gaveUp.Attempt, gaveUp.StatusCode, gaveUp.Reason, retry.StopPermanent)
			}
			if len(log) != 2 || log[0].Code != "Throttling" || log[1].Status != http.StatusForbidden || log[0].Signature != log[1].Signature {
				t.Errorf("server log %+v; want a Throttling, then the same signature refused with 403", log)
			}
		})
	}
}

// TestDeadline: a call's deadline bounds its replays, and so the age of
// the signature they reuse. Against a server that throttles everything,
// the Transport stops before a wait that would end past the deadline and
// returns the last throttled response, which the SDK reports as the
// Throttling error, before the deadline.
func TestDeadline(t *testing.T) {
	fake := newFake(0)
	var gaveUp retry.Event
	client := startFake(t, fake, secretKey, retry.WithOnGiveUp(func(e retry.Event) { gaveUp = e }))
	const timeout = 1500 * time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	start := time.Now()
	_, err := listZones(ctx, client)
	elapsed := time.Since(start)

	var apiErr smithy.APIError
	if !errors.As(err, &apiErr) || apiErr.ErrorCode() != "Throttling" {
		t.Fatalf("error %v; want the Throttling error", err)
	}
	if gaveUp.Reason != retry.StopDeadline || gaveUp.Attempt < 2 || gaveUp.Attempt >= maxAttempts {
		t.Errorf("OnGiveUp saw attempt %d, %v; want a few attempts and %v", gaveUp.Attempt, gaveUp.Reason, retry.StopDeadline)
	}
	if elapsed >= timeout {
		t.Errorf("the call took %v; want it back before its %v deadline", elapsed, timeout)
	}
}

// TestFakeChecksSignatures: the fake's SigV4 check is real: a wrong secret,
// a malformed header and no header are refused with 403, which the
// Transport does not retry.
func TestFakeChecksSignatures(t *testing.T) {
	t.Run("wrong secret", func(t *testing.T) {
		fake := newFake(100)
		client := startFake(t, fake, "not-the-secret")
		_, err := listZones(context.Background(), client)
		var apiErr smithy.APIError
		if !errors.As(err, &apiErr) || apiErr.ErrorCode() != "SignatureDoesNotMatch" {
			t.Errorf("error %v; want SignatureDoesNotMatch", err)
		}
		if n := len(fake.Log()); n != 1 {
			t.Errorf("the server got %d requests; want 1: a 403 is not retried", n)
		}
	})
	for _, tt := range []struct {
		header, code string
	}{
		{"", "MissingAuthenticationToken"},
		{"AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20260101/us-east-1/route53/aws4_request", "IncompleteSignature"},
		{"Bearer abc", "IncompleteSignature"},
	} {
		t.Run(tt.code, func(t *testing.T) {
			fake := newFake(100)
			srv := httptest.NewServer(fake)
			defer srv.Close()
			req, _ := http.NewRequest(http.MethodGet, srv.URL+"/2013-04-01/hostedzone", nil)
			if tt.header != "" {
				req.Header.Set("Authorization", tt.header)
			}
			resp, err := srv.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			srv.Client().CloseIdleConnections()
			if resp.StatusCode != http.StatusForbidden || !strings.Contains(string(body), "<Code>"+tt.code+"</Code>") {
				t.Errorf("Authorization %q: %d %s; want 403 %s", tt.header, resp.StatusCode, body, tt.code)
			}
		})
	}
}

func TestMaxInWindow(t *testing.T) {
	t0 := time.Unix(0, 0)
	at := func(ms ...int) []time.Time {
		var ts []time.Time
		for _, m := range ms {
			ts = append(ts, t0.Add(time.Duration(m)*time.Millisecond))
		}
		return ts
	}
	tests := []struct {
		times []time.Time
		want  int
	}{
		{nil, 0},
		{at(0), 1},
		{at(0, 999), 2},
		{at(0, 1000), 1},
		{at(0, 100, 200, 300, 400, 1100, 1200), 5},
		{at(1200, 0, 400, 100), 3},
	}
	for _, tt := range tests {
		if got := maxInWindow(tt.times, time.Second); got != tt.want {
			t.Errorf("maxInWindow(%v) = %d; want %d", tt.times, got, tt.want)
		}
	}
}

// -sdk adaptive runs the calls with the SDK's own retryer; each call's
// attempts are read from the server's log, and every request the server
// got belongs to a call.
func TestSDKAdaptive(t *testing.T) {
	var out bytes.Buffer
	res, err := run(context.Background(), &out, options{workers: 2, sdk: "adaptive"})
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	total := res.invalid.attempts()
	for _, c := range append([]*call{res.invalid}, res.calls...) {
		if c.invocation == "" {
			t.Errorf("call #%d %s: no invocation ID recorded", c.n, c.op)
		}
	}
	for _, c := range res.calls {
		if c.err != nil {
			t.Errorf("call #%d %s: %v", c.n, c.op, c.err)
		}
		total += c.attempts()
	}
	if total != len(res.log) {
		t.Errorf("the calls' attempts add up to %d; the server got %d requests", total, len(res.log))
	}
	checkOutput(t, out.String(),
		"the AWS SDK's adaptive retry mode, MaxAttempts 20",
		"10 by 2 goroutines",
		"10 succeeded, 0 failed",
		"the SDK's retry quota (not observed)",
	)
}

func TestFillFromLog(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	log := []served{
		{At: t0.Add(1500 * time.Millisecond), Invocation: "a", Status: 200},
		{At: t0, Invocation: "a", Status: 400, Code: "Throttling"},
		{At: t0.Add(200 * time.Millisecond), Invocation: "b", Status: 200},
		{At: t0.Add(500 * time.Millisecond), Invocation: "a", Status: 503},
	}
	c := &call{invocation: "a"}
	fillFromLog(c, log)
	want := []retryNote{{1, "Throttling", 500 * time.Millisecond}, {2, "503", time.Second}}
	if !slices.Equal(c.retries, want) || c.attempts() != 3 {
		t.Errorf("retries %v (%d attempts); want %v (3 attempts)", c.retries, c.attempts(), want)
	}
	none := &call{}
	if fillFromLog(none, log); len(none.retries) != 0 {
		t.Errorf("a call without an invocation ID got retries %v", none.retries)
	}
}

// TestParseOptions: the Pacer is on with client.go's settings, off with
// -defaults or -sdk unless -pacer says otherwise.
func TestParseOptions(t *testing.T) {
	for _, tc := range []struct {
		args  []string
		pacer bool
		err   bool
	}{
		{nil, true, false},
		{[]string{"-workers", "50"}, true, false},
		{[]string{"-pacer=false"}, false, false},
		{[]string{"-defaults"}, false, false},
		{[]string{"-defaults", "-pacer"}, true, false},
		{[]string{"-sdk", "adaptive"}, false, false},
		{[]string{"-sdk", "standard", "-pacer"}, true, true},
		{[]string{"-workers", "0"}, true, true},
		{[]string{"extra"}, true, true},
	} {
		o, err := parseOptions(tc.args)
		if (err != nil) != tc.err {
			t.Errorf("parseOptions(%q): error %v; want error %v", tc.args, err, tc.err)
			continue
		}
		if err == nil && o.pacer != tc.pacer {
			t.Errorf("parseOptions(%q).pacer = %v; want %v", tc.args, o.pacer, tc.pacer)
		}
	}
}
