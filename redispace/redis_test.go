package redispace

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// redisServer finds redis-server, installing Debian's package with
// apt-get once per test binary where it is missing (unless
// REDISPACE_NO_INSTALL is set), and says why when it cannot.
var redisServer = sync.OnceValues(func() (string, error) {
	if bin, err := exec.LookPath("redis-server"); err == nil {
		return bin, nil
	}
	if os.Getenv("REDISPACE_NO_INSTALL") != "" {
		return "", errors.New("redis-server is not installed, and REDISPACE_NO_INSTALL forbids installing it")
	}
	apt := func(args ...string) error {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, "apt-get", args...)
		cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
		out, err := cmd.CombinedOutput()
		if err != nil {
			return fmt.Errorf("apt-get %s: %v: %s", strings.Join(args, " "), err, bytes.TrimSpace(out))
		}
		return nil
	}
	if err := apt("install", "-y", "redis-server"); err != nil {
		if err2 := apt("update"); err2 != nil {
			return "", fmt.Errorf("redis-server is not installed and could not be: %w", err2)
		}
		if err := apt("install", "-y", "redis-server"); err != nil {
			return "", fmt.Errorf("redis-server is not installed and could not be: %w", err)
		}
	}
	return exec.LookPath("redis-server")
})

// startRedis starts a redis-server of the test's own on a loopback port,
// without persistence, stopped when the test ends, and returns a client
// for it. Where redis-server is missing it is installed (Debian's
// package); the test is skipped, saying why, only where that fails.
func startRedis(t testing.TB) (*redis.Client, func()) {
	t.Helper()
	bin, err := redisServer()
	if err != nil {
		t.Skipf("the tests need a real redis-server: %v", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	cmd := exec.Command(bin, "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	stop := func() {
		cmd.Process.Kill()
		cmd.Wait()
	}
	t.Cleanup(stop)
	rdb := redis.NewClient(&redis.Options{Addr: fmt.Sprintf("127.0.0.1:%d", port)})
	t.Cleanup(func() { rdb.Close() })
	deadline := time.Now().Add(10 * time.Second)
	for rdb.Ping(context.Background()).Err() != nil {
		if time.Now().After(deadline) {
			t.Fatal("redis-server did not answer PING within 10s")
		}
		time.Sleep(10 * time.Millisecond) // waiting for another process to start
	}
	return rdb, stop
}
