package redispace

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
)

// serverEnv names the redis-server binary the tests run against. Unset,
// they run against an embedded Redis (miniredis, which runs the Lua
// scripts), so that the package's tests need nothing installed; CI sets
// it, so that they run against the real server too.
const serverEnv = "REDISPACE_REDIS_SERVER"

// startRedis starts a Redis of the test's own, stopped when the test
// ends, and returns a client for it and a function that stops it early:
// the real redis-server that serverEnv names, on a loopback port and
// without persistence, or else an embedded one. No test here relies on
// a key's expiry, which the embedded server's clock does not drive.
func startRedis(t testing.TB) (*redis.Client, func()) {
	t.Helper()
	bin := os.Getenv(serverEnv)
	if bin == "" {
		mr := miniredis.NewMiniRedis()
		if err := mr.StartAddr("127.0.0.1:0"); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(mr.Close)
		return client(t, mr.Addr()), mr.Close
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	cmd := exec.Command(bin, "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no")
	if err := cmd.Start(); err != nil {
		t.Fatalf("%s=%s: %v", serverEnv, bin, err)
	}
	stop := func() {
		cmd.Process.Kill()
		cmd.Wait()
	}
	t.Cleanup(stop)
	rdb := client(t, fmt.Sprintf("127.0.0.1:%d", port))
	deadline := time.Now().Add(10 * time.Second)
	for rdb.Ping(context.Background()).Err() != nil {
		if time.Now().After(deadline) {
			t.Fatalf("%s did not answer PING within 10s", bin)
		}
		time.Sleep(10 * time.Millisecond) // waiting for another process to start
	}
	return rdb, stop
}

// client returns a client for the Redis at addr, closed when the test
// ends.
func client(t testing.TB, addr string) *redis.Client {
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	t.Cleanup(func() { rdb.Close() })
	return rdb
}

// A call that runs out of time is a slow Redis (errTimeout), whichever
// of the deadline and the client's answer bound hears first: a client
// that heeds the deadline answers with the context's error, or with a
// read timeout of its own. Read as a failed call, it turned the Pacer to
// Fallback at once, for RetryAfter, and failed the tests' reads of the
// state under load.
func TestBoundTimeout(t *testing.T) {
	for _, answer := range []error{context.DeadlineExceeded, &net.OpError{Op: "read", Err: os.ErrDeadlineExceeded}} {
		_, err := bound(context.Background(), time.Minute, func(context.Context) (any, error) {
			return nil, answer
		})
		if err != errTimeout {
			t.Errorf("bound, the client answering %v: %v; want errTimeout", answer, err)
		}
	}
	_, err := bound(context.Background(), time.Minute, func(context.Context) (any, error) {
		return nil, errors.New("NOSCRIPT")
	})
	if err == errTimeout {
		t.Error("bound, a failed call: errTimeout; want the call's error")
	}
}
