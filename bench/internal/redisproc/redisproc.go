// Package redisproc runs a redis-server of a benchmark's own on loopback.
package redisproc

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os/exec"
	"time"

	"github.com/backoff-jitter/retry/bench/internal/daemon"
	"github.com/redis/go-redis/v9"
)

// Server is a redis-server on 127.0.0.1, with nothing saved to disk.
type Server struct {
	Addr string
	cmd  *exec.Cmd
	done chan struct{}
}

// Start starts one, installing Debian's redis-server with apt-get first
// when it is absent and install is set, and returns once it listens.
func Start(install bool) (*Server, error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		if !install {
			return nil, errors.New("redis-server is not installed (run with -install or apt-get install redis-server)")
		}
		if err := daemon.AptInstall("redis-server"); err != nil {
			return nil, err
		}
		if bin, err = exec.LookPath("redis-server"); err != nil {
			return nil, err
		}
	}
	addr, err := daemon.FreeAddr()
	if err != nil {
		return nil, err
	}
	_, port, _ := net.SplitHostPort(addr)
	cmd := exec.Command(bin, "--port", port, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no")
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	s := &Server{Addr: addr, cmd: cmd, done: make(chan struct{})}
	go func() { cmd.Wait(); close(s.done) }()
	if err := daemon.AwaitListen("redis-server", addr, 10*time.Second); err != nil {
		s.Stop()
		return nil, err
	}
	return s, nil
}

// Alive reports whether the server still runs.
func (s *Server) Alive() bool {
	select {
	case <-s.done:
		return false
	default:
		return true
	}
}

// Stop kills the server and waits for it to end.
func (s *Server) Stop() {
	s.cmd.Process.Kill()
	<-s.done
}

// Warm opens n connections of rdb to Redis, as a service does before it
// says it is ready: the first call on a connection still being dialled
// can outlast a Pacer's Timeout.
func Warm(rdb *redis.Client, n int) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	errs := make(chan error, n)
	for range n {
		go func() { errs <- rdb.Ping(ctx).Err() }()
	}
	for range n {
		if err := <-errs; err != nil {
			return fmt.Errorf("connecting to Redis: %w", err)
		}
	}
	return nil
}
