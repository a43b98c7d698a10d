// Package daemon holds what the benchmarks' own servers (nginx,
// redis-server) share: a loopback address, Debian's packages, and the
// wait for a server to listen.
package daemon

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"time"
)

// FreeAddr returns a loopback address, 127.0.0.1 and a port free now.
func FreeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// AptInstall installs Debian's packages pkgs with apt-get, its index
// updated first.
func AptInstall(pkgs ...string) error {
	for _, args := range [][]string{{"update"}, append([]string{"install", "-y", "--no-install-recommends"}, pkgs...)} {
		cmd := exec.Command("apt-get", args...)
		cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("apt-get %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	return nil
}

// AwaitListen returns once addr accepts a connection, or an error naming
// what after within.
func AwaitListen(what, addr string, within time.Duration) error {
	for deadline := time.Now().Add(within); ; time.Sleep(20 * time.Millisecond) {
		if conn, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			conn.Close()
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s did not listen on %s within %v", what, addr, within)
		}
	}
}
